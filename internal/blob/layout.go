package blob

import (
	"os"
	"path/filepath"
	"strings"
)

// The on-disk layout of a Disk store, all in this file:
//
//	<root>/ab/cd/<id>          the blob (ab and cd are the id's first two and next two characters)
//	<root>/ab/cd/<id>.sha256   its checksum sidecar: 64 lower-case hex digits and a newline
//	<root>/ab/cd/<id>.blk      its block sums, for a blob over WholeCheckMax bytes (blocks.go)
//	<root>/ab/cd/.tmp-<id>-*   a write in progress (removed by Open if a crash left it)
//	<root>/disk-id             the directory's identity: a UUID and a newline (identity.go)
//	<root>/.tmp-disk-id-*      an identity being recorded (removed by Open)
//	<root>/.lock               held by the process that has the store open (dirlock)
//
// Two levels of fan-out (256 directories each for hex ids such as UUIDs) keep
// directories small at millions of blobs.
// Ids contain no dot, so neither a sidecar nor a temp file can be mistaken for
// a blob, and since every id is at least four characters long, ordering by
// (level one, level two, name) is ordering by id, which lets Enumerate walk
// the tree in id order.
const (
	sidecarExt          = ".sha256"
	blockSumsExt        = ".blk"
	tempPrefix          = ".tmp-"
	identityName        = "disk-id"
	identityTempPattern = tempPrefix + identityName + "-*"
)

// shard returns the two directory levels of id.
func shard(id string) (string, string) { return id[0:2], id[2:4] }

func shardDir(root, id string) string {
	a, b := shard(id)
	return filepath.Join(root, a, b)
}

func blobPath(root, id string) string { return filepath.Join(shardDir(root, id), id) }

func sidecarPath(root, id string) string { return blobPath(root, id) + sidecarExt }

func blockSumsPath(root, id string) string { return blobPath(root, id) + blockSumsExt }

// tempPattern is the os.CreateTemp pattern for a write of id.
func tempPattern(id string) string { return tempPrefix + id + "-*" }

func isTempName(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// isShardName reports whether name can be a directory level of the tree.
func isShardName(name string) bool {
	return len(name) == 2 && isIDChar(name[0]) && isIDChar(name[1])
}

// inShard reports whether id belongs in directory a/b; a file elsewhere is not
// one of ours.
func inShard(id, a, b string) bool {
	x, y := shard(id)
	return x == a && y == b
}

// prefix returns the two characters of s starting at i, or what there is.
func prefix(s string, i int) string {
	if i >= len(s) {
		return ""
	}
	return s[i:min(i+2, len(s))]
}

// shardNames lists the shard directories under dir in order.
func shardNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() && isShardName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
