package sigv4

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// emptySHA256 is the hex SHA-256 of no bytes, part of every chunk's string
// to sign.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// maxChunkLine bounds a chunk header or trailer line.
const maxChunkLine = 4096

type chunkedOptions struct {
	signed, trailer bool
	key             []byte
	seed            string // the request's signature, which the first chunk's chains from
	time, scope     string
	declaredTrailer string // x-amz-trailer: the checksum header the trailer carries
	length          int64  // x-amz-decoded-content-length
}

// chunkedReader decodes an aws-chunked body: each chunk is
// "hex-size[;chunk-signature=sig]\r\n data \r\n", ended by a zero-size
// chunk, then optional trailer lines and an empty line. It checks each
// chunk's signature (a chain from the request's), the trailing checksum
// over the decoded bytes and the trailer's own signature, and the decoded
// length, and fails instead of returning bytes that do not pass.
type chunkedReader struct {
	o       chunkedOptions
	br      *bufio.Reader
	body    io.Closer
	prev    string
	left    int64 // bytes left in the current chunk
	size    int64 // the current chunk's size
	chunk   hash.Hash
	sum     hash.Hash // the trailer's checksum over every decoded byte
	sumName string
	total   int64
	done    bool
	err     error
	pending string // the signature the current chunk must have
}

func newChunkedReader(body io.ReadCloser, o chunkedOptions) *chunkedReader {
	c := &chunkedReader{o: o, br: bufio.NewReaderSize(body, 64<<10), body: body, prev: o.seed, chunk: sha256.New()}
	if o.trailer {
		c.sumName = strings.ToLower(strings.TrimSpace(o.declaredTrailer))
		c.sum = checksumHash(c.sumName)
	}
	return c
}

// checksumHash is the hash a trailing x-amz-checksum-* header carries, or
// nil for one this package does not know.
func checksumHash(name string) hash.Hash {
	switch name {
	case "x-amz-checksum-crc32":
		return crc32.NewIEEE()
	case "x-amz-checksum-crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case "x-amz-checksum-crc64nvme":
		return crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5))
	case "x-amz-checksum-sha1":
		return sha1.New()
	case "x-amz-checksum-sha256":
		return sha256.New()
	}
	return nil
}

func bad(format string, args ...any) *Error {
	return fail(http.StatusBadRequest, "IncompleteBody", format, args...)
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		if err := c.nextChunk(); err != nil {
			c.err = err
			return 0, err
		}
		if c.done {
			return 0, io.EOF
		}
	}
	n, err := c.br.Read(p[:min(int64(len(p)), c.left)])
	c.chunk.Write(p[:n])
	if c.sum != nil {
		c.sum.Write(p[:n])
	}
	c.left -= int64(n)
	c.total += int64(n)
	if err == io.EOF {
		err = bad("the body ended inside a chunk")
	}
	if err == nil && c.left == 0 {
		err = c.endChunk()
	}
	if err != nil {
		c.err = err
		// Bytes that failed their chunk's check are not handed on.
		return 0, err
	}
	return n, nil
}

func (c *chunkedReader) line() (string, error) {
	var b []byte
	for {
		part, isPrefix, err := c.br.ReadLine()
		if err != nil {
			return "", bad("the chunked body ended early")
		}
		b = append(b, part...)
		if len(b) > maxChunkLine {
			return "", bad("a chunk header line is too long")
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

func (c *chunkedReader) nextChunk() error {
	h, err := c.line()
	if err != nil {
		return err
	}
	size, ext, _ := strings.Cut(h, ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return bad("a chunk size %q is not hex", size)
	}
	c.pending = ""
	if c.o.signed {
		sig, ok := strings.CutPrefix(strings.TrimSpace(ext), "chunk-signature=")
		if !ok {
			return fail(http.StatusForbidden, "SignatureDoesNotMatch", "a chunk carries no chunk-signature")
		}
		c.pending = sig
	}
	c.chunk.Reset()
	c.left, c.size = n, n
	if n == 0 {
		if err := c.endChunk(); err != nil {
			return err
		}
		return c.finish()
	}
	return nil
}

// endChunk checks the chunk just read against its signature and reads the
// CRLF after its data.
func (c *chunkedReader) endChunk() error {
	if c.o.signed {
		sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + c.o.time + "\n" + c.o.scope + "\n" + c.prev + "\n" + emptySHA256 + "\n" +
			hex.EncodeToString(c.chunk.Sum(nil))
		want := hex.EncodeToString(hmacSHA256(c.o.key, []byte(sts)))
		if !hmac.Equal([]byte(want), []byte(c.pending)) {
			return mismatch()
		}
		c.prev = want
	}
	if c.size > 0 {
		crlf, err := c.line()
		if err != nil || crlf != "" {
			return bad("a chunk's data is not followed by CRLF")
		}
	}
	return nil
}

// finish reads the trailer after the last chunk and checks it.
func (c *chunkedReader) finish() error {
	trailers := map[string]string{}
	var order []string
	for {
		l, err := c.line()
		if err != nil {
			if !c.o.trailer && len(order) == 0 {
				break // a body that ends right after the last chunk
			}
			return err
		}
		if l == "" {
			if c.o.signed && c.o.trailer && len(order) > 0 && trailers["x-amz-trailer-signature"] == "" {
				continue // some signers put a blank line before the trailer's signature
			}
			break
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return bad("a trailer line %q is malformed", l)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		trailers[k] = strings.TrimSpace(v)
		order = append(order, k)
	}
	if c.total != c.o.length {
		return bad("the chunks hold %d bytes; x-amz-decoded-content-length says %d", c.total, c.o.length)
	}
	if c.o.trailer && c.sumName != "" {
		got, ok := trailers[c.sumName]
		if !ok {
			return bad("the trailer %s declared in x-amz-trailer is missing", c.sumName)
		}
		if c.sum != nil && base64.StdEncoding.EncodeToString(c.sum.Sum(nil)) != got {
			return fail(http.StatusBadRequest, "BadDigest", "The %s you specified did not match the calculated checksum.", c.sumName)
		}
		if c.o.signed {
			sig := trailers["x-amz-trailer-signature"]
			canon := c.sumName + ":" + got + "\n"
			sum := sha256.Sum256([]byte(canon))
			sts := "AWS4-HMAC-SHA256-TRAILER\n" + c.o.time + "\n" + c.o.scope + "\n" + c.prev + "\n" + hex.EncodeToString(sum[:])
			if !hmac.Equal([]byte(hex.EncodeToString(hmacSHA256(c.o.key, []byte(sts)))), []byte(sig)) {
				return mismatch()
			}
		}
	}
	c.done = true
	return nil
}

func (c *chunkedReader) Close() error { return c.body.Close() }
