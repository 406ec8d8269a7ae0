package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// PathBlobBatch takes many small blob writes in one request (POST). The
// body is a sequence of frames, one per blob (AppendBatchFrame); the answer
// is a BatchAnswer with one result per frame, in order, each what a PUT of
// that blob alone would have answered. The node acknowledges a blob only
// once it is as durable as a PUT would have made it, and answers when every
// blob of the batch has its result.
//
// A batch saves a small write the parts of a request that do not depend on
// its size: the HTTP exchange on both sides, the routing and the
// middleware. The coordinator's node client gathers the small writes that
// wait for a node into one batch while an earlier batch is in flight.
const PathBlobBatch = "/internal/blob-batch"

// Limits of one batch. A body that breaks one is refused whole with 400
// (413 for its size).
const (
	MaxBatchItems    = 256
	MaxBatchBytes    = 16 << 20
	MaxBatchItemSize = 1 << 20
)

// A frame is:
//
//	uint16  length of the blob id, then the id
//	uint16  length of the request id (0: none), then the id
//	[64]    the declared SHA-256 of the data, lower-case hex
//	uint32  length of the data, then the data
//
// integers big-endian.
const frameFixed = 2 + 2 + 64 + 4

// BatchItem is one blob of a batch.
type BatchItem struct {
	ID        string
	RequestID string // correlates the node's log lines for this blob
	Checksum  string
	Data      []byte
}

// FrameSize is the length of the frame of it.
func FrameSize(it BatchItem) int {
	return frameFixed + len(it.ID) + len(it.RequestID) + len(it.Data)
}

// AppendBatchFrame appends the frame of it to dst. It fails for a field too
// long for the frame, never for content the node would refuse: the node
// judges ids and checksums itself.
func AppendBatchFrame(dst []byte, it BatchItem) ([]byte, error) {
	if len(it.RequestID) > 0xffff {
		it.RequestID = "" // the id only correlates logs; drop it rather than fail
	}
	switch {
	case len(it.ID) > 0xffff:
		return dst, fmt.Errorf("blob id of %d bytes is too long for a batch", len(it.ID))
	case len(it.Checksum) != 64:
		return dst, fmt.Errorf("checksum %q is not 64 hex characters", it.Checksum)
	case len(it.Data) > MaxBatchItemSize:
		return dst, fmt.Errorf("blob of %d bytes is larger than a batch takes (%d)", len(it.Data), MaxBatchItemSize)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(it.ID)))
	dst = append(dst, it.ID...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(it.RequestID)))
	dst = append(dst, it.RequestID...)
	dst = append(dst, it.Checksum...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(it.Data)))
	return append(dst, it.Data...), nil
}

// ErrBatchMalformed is the cause of every ParseBatch failure.
var ErrBatchMalformed = errors.New("malformed batch")

// ParseBatch splits a batch body into its items. Their Data share b's
// memory. It fails on a frame cut short, an item over MaxBatchItemSize and
// more than MaxBatchItems items; an empty body is an empty batch.
func ParseBatch(b []byte) ([]BatchItem, error) {
	var items []BatchItem
	for off := 0; off < len(b); {
		if len(items) == MaxBatchItems {
			return nil, fmt.Errorf("%w: more than %d items", ErrBatchMalformed, MaxBatchItems)
		}
		it, n, err := parseFrame(b[off:])
		if err != nil {
			return nil, fmt.Errorf("%w: item %d at byte %d: %v", ErrBatchMalformed, len(items), off, err)
		}
		items = append(items, it)
		off += n
	}
	return items, nil
}

var errFrameShort = errors.New("frame cut short")

// parseFrame reads the frame at the start of b and returns its length.
func parseFrame(b []byte) (BatchItem, int, error) {
	var it BatchItem
	off := 0
	field := func(n int) ([]byte, bool) {
		if n > len(b)-off {
			return nil, false
		}
		f := b[off : off+n]
		off += n
		return f, true
	}
	u16 := func() (int, bool) {
		f, ok := field(2)
		if !ok {
			return 0, false
		}
		return int(binary.BigEndian.Uint16(f)), true
	}
	n, ok := u16()
	if !ok {
		return it, 0, errFrameShort
	}
	id, ok := field(n)
	if !ok {
		return it, 0, errFrameShort
	}
	if n, ok = u16(); !ok {
		return it, 0, errFrameShort
	}
	rid, ok := field(n)
	if !ok {
		return it, 0, errFrameShort
	}
	sum, ok := field(64)
	if !ok {
		return it, 0, errFrameShort
	}
	sz, ok := field(4)
	if !ok {
		return it, 0, errFrameShort
	}
	size := binary.BigEndian.Uint32(sz)
	if size > MaxBatchItemSize {
		return it, 0, fmt.Errorf("data of %d bytes is over the limit of %d", size, MaxBatchItemSize)
	}
	data, ok := field(int(size))
	if !ok {
		return it, 0, errFrameShort
	}
	it.ID, it.RequestID, it.Checksum, it.Data = string(id), string(rid), string(sum), data
	return it, off, nil
}

// BatchResult is the outcome of one blob of a batch: Status is what a PUT of
// it alone would have answered (201 written, 200 already held, or the
// error's status), with the blob's description on success and the error's
// code and message otherwise.
type BatchResult struct {
	ID       string `json:"id"`
	Status   int    `json:"status"`
	Size     int64  `json:"size,omitempty"`
	Checksum string `json:"checksum,omitempty"`
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
}

// BatchAnswer is the answer to POST PathBlobBatch.
type BatchAnswer struct {
	Results []BatchResult `json:"results"`
}
