package wire_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

func framed(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = wire.AppendFrame(b, p)
	}
	return b
}

func TestFramesRoundTripAndRefuseDamage(t *testing.T) {
	a, b, c := bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 65536), []byte("tail")
	body := framed(a, b, c)
	got, err := io.ReadAll(wire.NewFrameReader(bytes.NewReader(body)))
	require.NoError(t, err)
	require.Equal(t, append(append(append([]byte{}, a...), b...), c...), got)
	require.Len(t, body, len(got)+3*wire.FrameHeaderLen)

	flip := func(at int) []byte {
		d := bytes.Clone(body)
		d[at] ^= 0x01
		return d
	}
	second := wire.FrameHeaderLen + len(a) // where the second frame starts
	cases := []struct {
		name   string
		body   []byte
		want   error
		passed int // bytes yielded before the error
	}{
		{"a flipped data byte", flip(second + wire.FrameHeaderLen + 500), wire.ErrFrameMismatch, len(a)},
		{"a flipped CRC", flip(second + 5), wire.ErrFrameMismatch, len(a)},
		{"a length past the limit", flip(second + 2), wire.ErrFrameMismatch, len(a)},
		{"cut inside a frame", body[:second+wire.FrameHeaderLen+10], io.ErrUnexpectedEOF, len(a)},
		{"cut inside a header", body[:second+3], io.ErrUnexpectedEOF, len(a)},
		{"an empty frame", append(framed(a), make([]byte, wire.FrameHeaderLen)...), wire.ErrFrameMismatch, len(a)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := io.ReadAll(wire.NewFrameReader(bytes.NewReader(tc.body)))
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, body[wire.FrameHeaderLen:wire.FrameHeaderLen+tc.passed], got, "only checked frames pass")
		})
	}
}

func TestFramedLength(t *testing.T) {
	const block = 65536
	for _, tc := range []struct{ start, length, want int64 }{
		{0, 0, 0},
		{0, 1, 1 + 8},
		{0, block, block + 8},
		{0, block + 1, block + 1 + 16},
		{block - 1, 2, 2 + 16},
		{10, 201, 201 + 8},
		{3 * block, 2 * block, 2*block + 16},
	} {
		require.Equal(t, tc.want, wire.FramedLength(tc.start, tc.length, block), "%+v", tc)
	}
}
