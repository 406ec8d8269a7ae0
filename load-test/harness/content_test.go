package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/stretchr/testify/require"
)

func contentBytes(t *testing.T, c Content) []byte {
	t.Helper()
	b, err := io.ReadAll(c.Reader())
	require.NoError(t, err)
	return b
}

func TestContentIsDeterministicAndDistinct(t *testing.T) {
	a := Content{Seed: 7, Size: 100_000}
	b1, b2 := contentBytes(t, a), contentBytes(t, a)
	require.Len(t, b1, 100_000)
	require.Equal(t, b1, b2, "a seed names its bytes")
	other := contentBytes(t, Content{Seed: 8, Size: 100_000})
	require.NotEqual(t, b1[:32], other[:32], "another seed gives other bytes from the first byte")

	sum := sha256.Sum256(b1)
	require.Equal(t, hex.EncodeToString(sum[:]), a.Checksum())
}

func TestComparer(t *testing.T) {
	c := Content{Seed: 3, Size: 10_000}
	good := contentBytes(t, c)
	flipped := bytes.Clone(good)
	flipped[4321] ^= 1
	tests := []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"identical", good, ""},
		{"one byte flipped", flipped, "byte 4321 differs"},
		{"short", good[:9_999], "got 9999 of 10000 bytes"},
		{"long", append(bytes.Clone(good), 'x'), "got 10001 bytes, uploaded 10000"},
		{"empty", nil, "got 0 of 10000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewComparer(c)
			// Odd chunk sizes cross every internal boundary.
			for rest := tt.body; len(rest) > 0; {
				n := min(len(rest), 777)
				k, err := m.Write(rest[:n])
				require.NoError(t, err)
				require.Equal(t, n, k)
				rest = rest[n:]
			}
			require.EqualValues(t, len(tt.body), m.Bytes())
			if tt.wantErr == "" {
				require.NoError(t, m.Err())
				return
			}
			require.ErrorContains(t, m.Err(), tt.wantErr)
			require.Equal(t, errs.Corrupt, errs.KindOf(m.Err()))
		})
	}
}

func TestComparerOfEmptyContent(t *testing.T) {
	m := NewComparer(Content{Seed: 1, Size: 0})
	require.NoError(t, m.Err())
}
