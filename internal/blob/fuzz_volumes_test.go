package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedRecords are whole, torn and damaged records for the fuzz corpora.
func seedRecords(salt uint32) [][]byte {
	rec := func(id string, data []byte, flags byte) []byte {
		b := make([]byte, recordLen(id, int64(len(data))))
		copy(b[headerLen(id):], data)
		sealHeader(b, salt, recordHeader{id: id, flags: flags, size: int64(len(data)), sum: sha256.Sum256(data)})
		return b
	}
	good := rec("0123abcd", []byte("hello, volume"), 0)
	flipped := append([]byte(nil), good...)
	flipped[20] ^= 1
	return [][]byte{
		good,
		rec("abcd-efgh_0123", nil, flagTombstone),
		rec("zzzz", make([]byte, 100), 0),
		good[:30],
		flipped,
		append(append([]byte(nil), good...), rec("ffff", []byte("second"), 0)...),
		{},
	}
}

// FuzzParseHeader: the parser never panics, and whatever it accepts is a
// header that encodes back to the same bytes.
func FuzzParseHeader(f *testing.F) {
	const salt = 0x5eed
	for _, b := range seedRecords(salt) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b, salt)
		if err != nil {
			return
		}
		require.NoError(t, ValidateID(h.id))
		again := make([]byte, headerLen(h.id))
		sealHeader(again, salt, h)
		require.Equal(t, b[:len(again)], again)
	})
}

// FuzzVolumeRecovery: whatever follows a volume's superblock, opening the
// store neither fails nor panics, and every blob it then serves hashes to
// its recorded checksum; a second open finds nothing more to repair.
func FuzzVolumeRecovery(f *testing.F) {
	const salt = 0x5eed
	for _, b := range seedRecords(salt) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, volumesDirName), 0o750))
		content := append(superblock{num: 1, salt: salt}.encode(), body...)
		require.NoError(t, os.WriteFile(volumeFile(dir, 1), content, 0o640))
		v, err := OpenVolumes(dir, Options{})
		require.NoError(t, err)
		list, err := v.Enumerate(context.Background(), "", 1000)
		require.NoError(t, err)
		for _, info := range list {
			rc, _, err := v.Fetch(context.Background(), info.ID)
			require.NoError(t, err)
			got, err := io.ReadAll(rc)
			require.NoError(t, err)
			s := sha256.Sum256(got)
			require.Equal(t, info.Checksum, hex.EncodeToString(s[:]))
		}
		require.NoError(t, v.Close())
		v, err = OpenVolumes(dir, Options{})
		require.NoError(t, err)
		rec := v.Recovery()
		require.Zero(t, rec.TornBytes)
		require.Len(t, mustList(t, v), len(list))
		require.NoError(t, v.Close())
	})
}

func mustList(t *testing.T, v *Volumes) []Info {
	t.Helper()
	list, err := v.Enumerate(context.Background(), "", 1000)
	require.NoError(t, err)
	return list
}
