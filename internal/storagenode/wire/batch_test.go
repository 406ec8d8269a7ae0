package wire

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var sum64 = strings.Repeat("ab", 32)

func TestBatchFramesRoundTrip(t *testing.T) {
	items := []BatchItem{
		{ID: "a", RequestID: "req-1", Checksum: sum64, Data: []byte("hello")},
		{ID: strings.Repeat("x", 300), Checksum: sum64, Data: []byte{}},
		{ID: "big", RequestID: "r", Checksum: sum64, Data: bytes.Repeat([]byte{7}, MaxBatchItemSize)},
	}
	var body []byte
	for _, it := range items {
		var err error
		body, err = AppendBatchFrame(body, it)
		require.NoError(t, err)
	}
	require.Equal(t, FrameSize(items[0])+FrameSize(items[1])+FrameSize(items[2]), len(body))
	got, err := ParseBatch(body)
	require.NoError(t, err)
	require.Equal(t, items, got)

	got, err = ParseBatch(nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestAppendBatchFrameRefusesWhatDoesNotFit(t *testing.T) {
	_, err := AppendBatchFrame(nil, BatchItem{ID: "a", Checksum: "short"})
	require.ErrorContains(t, err, "64 hex")
	_, err = AppendBatchFrame(nil, BatchItem{ID: strings.Repeat("a", 1<<16), Checksum: sum64})
	require.ErrorContains(t, err, "too long")
	_, err = AppendBatchFrame(nil, BatchItem{ID: "a", Checksum: sum64, Data: make([]byte, MaxBatchItemSize+1)})
	require.ErrorContains(t, err, "larger than a batch takes")
	b, err := AppendBatchFrame(nil, BatchItem{ID: "a", RequestID: strings.Repeat("r", 1<<16), Checksum: sum64})
	require.NoError(t, err, "an over-long request id is dropped, not fatal")
	got, err := ParseBatch(b)
	require.NoError(t, err)
	require.Empty(t, got[0].RequestID)
}

func TestParseBatchRefusesMalformedBodies(t *testing.T) {
	one, err := AppendBatchFrame(nil, BatchItem{ID: "a", Checksum: sum64, Data: []byte("data")})
	require.NoError(t, err)
	for cut := 1; cut < len(one); cut++ {
		_, err := ParseBatch(one[:cut])
		require.ErrorIs(t, err, ErrBatchMalformed, "cut at %d", cut)
	}
	// A frame whose declared length is over the limit.
	huge := bytes.Clone(one[:len(one)-4-4])
	huge = binary.BigEndian.AppendUint32(huge, MaxBatchItemSize+1)
	_, err = ParseBatch(huge)
	require.ErrorContains(t, err, "over the limit")

	var many []byte
	for range MaxBatchItems + 1 {
		many = append(many, one...)
	}
	_, err = ParseBatch(many)
	require.ErrorContains(t, err, "more than")
	_, err = ParseBatch(many[:len(one)*MaxBatchItems])
	require.NoError(t, err)
}

// FuzzParseBatch: whatever the body, ParseBatch returns items whose frames
// rebuild exactly the body, or an error; it never panics.
func FuzzParseBatch(f *testing.F) {
	one, _ := AppendBatchFrame(nil, BatchItem{ID: "a", RequestID: "r", Checksum: sum64, Data: []byte("data")})
	f.Add(one)
	f.Add(append(bytes.Clone(one), one...))
	f.Add([]byte{0, 1, 'a', 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := ParseBatch(body)
		if err != nil {
			return
		}
		var again []byte
		for _, it := range items {
			require.LessOrEqual(t, len(it.Data), MaxBatchItemSize)
			again, err = AppendBatchFrame(again, it)
			if err != nil {
				// Only a checksum field that is not 64 bytes of text can
				// fail, and the parser always takes 64 bytes.
				t.Fatalf("a parsed item does not frame again: %v", err)
			}
		}
		require.True(t, bytes.Equal(body, again), "the frames rebuild the body")
	})
}
