package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

type summingStore interface {
	Store
	BlockSummer
	Rehasher
	Remover
	Close() error
}

func TestBlockSumsBesideLargeBlobs(t *testing.T) {
	opens := map[string]func(dir string) (summingStore, error){
		"files":   func(dir string) (summingStore, error) { return OpenDisk(dir, Options{}) },
		"volumes": func(dir string) (summingStore, error) { return OpenVolumes(dir, Options{}) },
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s, err := open(dir)
			require.NoError(t, err)
			defer func() { s.Close() }()
			data := bytes.Repeat([]byte("block sums "), 300_000) // 3.3 MB: 51 blocks, the last short
			sum := sha256.Sum256(data)
			id := "6f56d787-07be-4b64-aaf4-611cfce6e07e"
			_, _, err = s.Receive(ctx, id, hex.EncodeToString(sum[:]), int64(len(data)), bytes.NewReader(data))
			require.NoError(t, err)

			b, ok, err := s.BlockSums(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			require.Len(t, b.Sums, (len(data)+BlockSize-1)/BlockSize)
			for i := range b.Sums {
				block := data[i*BlockSize : min((i+1)*BlockSize, len(data))]
				require.Equal(t, crc32.Checksum(block, castagnoli), b.Sums[i], "block %d", i)
				require.True(t, b.CheckBlock(int64(i), block))
			}
			require.False(t, b.CheckBlock(0, data[1:BlockSize+1]))

			small := "7f56d787-07be-4b64-aaf4-611cfce6e07e"
			ssum := sha256.Sum256([]byte("small"))
			_, _, err = s.Receive(ctx, small, hex.EncodeToString(ssum[:]), 5, bytes.NewReader([]byte("small")))
			require.NoError(t, err)
			_, ok, err = s.BlockSums(ctx, small)
			require.NoError(t, err)
			require.False(t, ok, "a small blob is checked whole and has no block sums")

			// Torn: read as a blob without sums, never as a corrupt one.
			path := blockSumsPath(dir, id)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, raw[:len(raw)/2], 0o644))
			_, ok, err = s.BlockSums(ctx, id)
			require.NoError(t, err)
			require.False(t, ok, "a torn sums file is no sums")
			flipped := bytes.Clone(raw)
			flipped[blockSumsFixedLen+3] ^= 1
			require.NoError(t, os.WriteFile(path, flipped, 0o644))
			_, ok, _ = s.BlockSums(ctx, id)
			require.False(t, ok, "a sums file failing its own CRC is no sums")

			// A scrub's rehash of the intact blob gives it its sums back.
			require.NoError(t, os.Remove(path))
			c, err := s.Rehash(ctx, id)
			require.NoError(t, err)
			require.True(t, c.Intact())
			again, ok, err := s.BlockSums(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "rehash wrote the sums of a blob without them")
			require.Equal(t, b, again)

			// Sums without their blob do not survive a restart; removal
			// takes them along.
			require.NoError(t, s.Remove(ctx, id))
			_, err = os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist)
			require.NoError(t, os.WriteFile(path, raw, 0o644))
			require.NoError(t, s.Close())
			s, err = open(dir)
			require.NoError(t, err)
			_, err = os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist, "an orphan sums file is removed at start")
		})
	}
}

func TestBlockSumsFormatRefusesOthers(t *testing.T) {
	b := BlockSums{Checksum: hex.EncodeToString(make([]byte, 32)), Size: BlockSize + 1, Sums: []uint32{1, 2}}
	got, err := decodeBlockSums(b.encode())
	require.NoError(t, err)
	require.Equal(t, b, got)
	bad := BlockSums{Checksum: b.Checksum, Size: 3 * BlockSize, Sums: []uint32{1, 2}}.encode()
	_, err = decodeBlockSums(bad)
	require.ErrorIs(t, err, errBadBlockSums, "a count that does not fit the size")
	_, err = decodeBlockSums([]byte("DFSBLKS1"))
	require.ErrorIs(t, err, errBadBlockSums)
}
