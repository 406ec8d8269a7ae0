package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/errs"
)

// MaxDirectBlob is the largest blob DownloadDirect reads from a node: a
// blob is held in memory until its SHA-256 is checked, so a larger one (a
// file stored whole before chunking) is read through the coordinator.
const MaxDirectBlob = 64 << 20

// Locations returns where file id's bytes can be read straight from the
// storage nodes (GET /api/files/{id}/locations).
func (c *Client) Locations(ctx context.Context, id string) (apiwire.FileLocations, error) {
	if err := checkID("file", id); err != nil {
		return apiwire.FileLocations{}, err
	}
	var loc apiwire.FileLocations
	_, err := c.doJSON(ctx, http.MethodGet, pathOf("api", "files", id, "locations"), nil, nil, &loc)
	return loc, err
}

// DownloadDirect writes file id's bytes to w, reading each of its blobs
// (the file, or each chunk) straight from a node that holds it, through
// the URLs the coordinator signed, so that the bytes do not pass through
// the coordinator. Each blob is checked against its SHA-256 before any of
// it is written; a node that fails or sends bytes that do not match costs
// a try of the blob's next URL, and a blob no node could give is read
// through the coordinator, as is the whole file when the coordinator
// offers no locations. The file's own SHA-256 is checked at the end
// (Verified). A failure leaves in w what was written before it.
func (c *Client) DownloadDirect(ctx context.Context, id string, w io.Writer) (DownloadInfo, error) {
	loc, err := c.Locations(ctx, id)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Code != errs.CodeFileNotFound && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed):
		// A coordinator without the locations route.
		return c.Download(ctx, id, w, DownloadOptions{})
	case err != nil:
		return DownloadInfo{}, err
	}
	info := DownloadInfo{Status: http.StatusOK, Size: loc.SizeBytes, Checksum: loc.Checksum, Direct: true}
	whole := sha256.New()
	dst := &writeTracker{w: io.MultiWriter(w, whole)}
	for _, b := range loc.Blobs {
		data, from, err := c.readBlob(ctx, id, b)
		if err != nil {
			return info, err
		}
		if from == "" {
			info.Direct = false
		} else if info.ServedBy == "" {
			info.ServedBy = from
		}
		if _, err := dst.Write(data); err != nil {
			return info, errs.Wrap(errs.Other, err, "write the download of %s", id)
		}
		info.Bytes += int64(len(data))
	}
	if info.Bytes != loc.SizeBytes {
		return info, errs.E(errs.Unavailable, "the blobs of %s hold %d of its %d bytes", id, info.Bytes, loc.SizeBytes)
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != loc.Checksum {
		return info, errs.E(errs.Corrupt, "the bytes of %s hash to %s, not to the declared %s", id, got, loc.Checksum)
	}
	info.Verified = true
	return info, nil
}

// readBlob reads blob b of file id whole and checked: from its URLs in
// order, else through the coordinator. from is the host that gave it, ""
// for the coordinator.
func (c *Client) readBlob(ctx context.Context, id string, b apiwire.BlobLocation) (data []byte, from string, err error) {
	var failures []string
	if b.SizeBytes <= MaxDirectBlob {
		for _, u := range b.URLs {
			data, err := c.fetchURL(ctx, u, b)
			if err == nil {
				return data, hostOf(u), nil
			}
			if ctx.Err() != nil {
				return nil, "", errs.Wrap(errs.Other, ctx.Err(), "download of %s", id)
			}
			failures = append(failures, hostOf(u)+": "+err.Error())
		}
	}
	var buf bytes.Buffer
	rng := fmt.Sprintf("bytes=%d-%d", b.Offset, b.Offset+b.SizeBytes-1)
	if b.SizeBytes == 0 {
		return nil, "", nil
	}
	if _, err := c.Download(ctx, id, &buf, DownloadOptions{Range: rng}); err != nil {
		if len(failures) > 0 {
			return nil, "", fmt.Errorf("%w (the nodes: %s)", err, strings.Join(failures, "; "))
		}
		return nil, "", err
	}
	if got := sha256hex(buf.Bytes()); got != b.Checksum || int64(buf.Len()) != b.SizeBytes {
		return nil, "", errs.E(errs.Corrupt, "the coordinator's bytes %s of %s do not match their checksum", rng, id)
	}
	return buf.Bytes(), "", nil
}

// fetchURL reads blob b whole from one signed URL and checks it. The URL is
// its own credential: the client's key is not sent to a node.
func (c *Client) fetchURL(ctx context.Context, u string, b apiwire.BlobLocation) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "location %q", u)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "read")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readAPIError(resp)
	}
	data := make([]byte, b.SizeBytes)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "the blob broke off")
	}
	if n, _ := resp.Body.Read(make([]byte, 1)); n > 0 {
		return nil, errs.E(errs.Corrupt, "the blob is longer than %d bytes", b.SizeBytes)
	}
	if sha256hex(data) != b.Checksum {
		return nil, errs.E(errs.Corrupt, "the blob does not match its checksum")
	}
	return data, nil
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hostOf is the host:port of a URL, which names the node in messages.
func hostOf(u string) string {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		rest, _ = strings.CutPrefix(u, "https://")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}
