package localcache

import (
	"encoding/binary"
	"time"

	"github.com/dfs-project/dfs/internal/meta"
)

// A record is held packed: every field of the file and its copies in one
// immutable string, the ID first. Held as a struct, a record with three
// copies took about 960 bytes of heap (each time.Time is 24 bytes, each
// string read from the database its own allocation); packed it takes about
// 430 (BenchmarkFootprint), so the same memory holds more than twice as
// many. Reading one back allocates only its copy slice, as cloning the
// struct did: every string field is a substring of the packed one, which Go
// strings share without copying.
//
// Layout, in order: the strings ID, Name, ContentType, Checksum, Status,
// StatusReason, PrimaryNodeID, IdempotencyKey and Chunk.ParentID, each as
// its length (uvarint) then its bytes; the integers SizeBytes,
// ReplicationFactor, RingPosition, Chunk.Part, Chunk.Index, Chunk.Offset,
// ChunkCount, CreatedAt and UpdatedAt (Unix microseconds) and Version, each
// a varint; then the number of copies plus one (0 for a nil slice), and per
// copy its ID (varint), NodeID and Status (strings), CreatedAt, UpdatedAt
// and Version (varints). A copy's FileID is the file's ID and is not stored.

// pack encodes rec. It reports false when rec cannot be held exactly: a time
// that is not UTC at microsecond precision (what every store returns), a
// copy naming another file, or chunks loaded beside it.
func pack(rec *meta.FileRecord) (string, bool) {
	if rec.Chunks != nil || !exactTime(rec.CreatedAt) || !exactTime(rec.UpdatedAt) {
		return "", false
	}
	for _, r := range rec.Replicas {
		if r.FileID != rec.ID || !exactTime(r.CreatedAt) || !exactTime(r.UpdatedAt) {
			return "", false
		}
	}
	f := &rec.File
	b := make([]byte, 0, 96+len(f.ID)+len(f.Name)+len(f.ContentType)+len(f.Checksum)+len(f.StatusReason)+
		len(f.PrimaryNodeID)+len(f.IdempotencyKey)+len(f.Chunk.ParentID)+len(rec.Replicas)*48)
	for _, s := range []string{f.ID, f.Name, f.ContentType, f.Checksum, string(f.Status), f.StatusReason,
		f.PrimaryNodeID, f.IdempotencyKey, f.Chunk.ParentID} {
		b = appendString(b, s)
	}
	for _, v := range []int64{f.SizeBytes, int64(f.ReplicationFactor), f.RingPosition, int64(f.Chunk.Part),
		int64(f.Chunk.Index), f.Chunk.Offset, int64(f.ChunkCount), f.CreatedAt.UnixMicro(), f.UpdatedAt.UnixMicro(), f.Version} {
		b = binary.AppendVarint(b, v)
	}
	n := uint64(0)
	if rec.Replicas != nil {
		n = uint64(len(rec.Replicas)) + 1
	}
	b = binary.AppendUvarint(b, n)
	for _, r := range rec.Replicas {
		b = binary.AppendVarint(b, r.ID)
		b = appendString(b, r.NodeID)
		b = appendString(b, string(r.Status))
		b = binary.AppendVarint(b, r.CreatedAt.UnixMicro())
		b = binary.AppendVarint(b, r.UpdatedAt.UnixMicro())
		b = binary.AppendVarint(b, r.Version)
	}
	return string(b), true
}

// exactTime reports whether t survives the trip through Unix microseconds
// unchanged, location and all.
func exactTime(t time.Time) bool { return t == fromMicros(t.UnixMicro()) }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// unpack decodes what pack encoded.
func unpack(p string) meta.FileRecord {
	d := decoder{p: p}
	var rec meta.FileRecord
	f := &rec.File
	f.ID, f.Name, f.ContentType, f.Checksum = d.str(), d.str(), d.str(), d.str()
	f.Status = meta.FileStatus(d.str())
	f.StatusReason, f.PrimaryNodeID, f.IdempotencyKey, f.Chunk.ParentID = d.str(), d.str(), d.str(), d.str()
	f.SizeBytes, f.ReplicationFactor, f.RingPosition = d.int(), int(d.int()), d.int()
	f.Chunk.Part, f.Chunk.Index, f.Chunk.Offset, f.ChunkCount = int(d.int()), int(d.int()), d.int(), int(d.int())
	f.CreatedAt, f.UpdatedAt, f.Version = fromMicros(d.int()), fromMicros(d.int()), d.int()
	if n := d.uint(); n > 0 {
		rec.Replicas = make([]meta.Replica, n-1)
		for i := range rec.Replicas {
			r := &rec.Replicas[i]
			r.ID, r.FileID, r.NodeID, r.Status = d.int(), f.ID, d.str(), meta.ReplicaStatus(d.str())
			r.CreatedAt, r.UpdatedAt, r.Version = fromMicros(d.int()), fromMicros(d.int()), d.int()
		}
	}
	return rec
}

// packedID is the ID of the record p holds, without decoding the rest.
func packedID(p string) string {
	d := decoder{p: p}
	return d.str()
}

// decoder reads a packed string from the front. Only pack's output is ever
// decoded, so it trusts the lengths it reads.
type decoder struct{ p string }

func (d *decoder) uint() uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		c := d.p[0]
		d.p = d.p[1:]
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

// int undoes binary.AppendVarint's zig-zag encoding.
func (d *decoder) int() int64 {
	u := d.uint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) str() string {
	n := d.uint()
	s := d.p[:n]
	d.p = d.p[n:]
	return s
}

// An object row is held packed the same way: Bucket, Key, FileID, ETag and
// ContentType as strings, SizeBytes and ModifiedAt (Unix microseconds) as
// varints, then the number of stored headers plus one (0 for a nil map) and
// each header's name and value, then the number of tags plus one (0 for a
// nil slice) and each tag's key and value. Held as a struct, with a set per file for
// the index of rows by file, a row without headers took about 860 bytes;
// packed, with a list per file, about 410 (BenchmarkObjectFootprint).

// packObject encodes o, or reports false when its ModifiedAt would not come
// back identical.
func packObject(o *meta.Object) (string, bool) {
	if !exactTime(o.ModifiedAt) {
		return "", false
	}
	n := 32 + len(o.Bucket) + len(o.Key) + len(o.FileID) + len(o.ETag) + len(o.ContentType)
	for k, v := range o.Headers {
		n += 4 + len(k) + len(v)
	}
	for _, t := range o.Tags {
		n += 4 + len(t.Key) + len(t.Value)
	}
	b := make([]byte, 0, n)
	for _, s := range []string{o.Bucket, o.Key, o.FileID, o.ETag, o.ContentType} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, o.SizeBytes)
	b = binary.AppendVarint(b, o.ModifiedAt.UnixMicro())
	h := uint64(0)
	if o.Headers != nil {
		h = uint64(len(o.Headers)) + 1
	}
	b = binary.AppendUvarint(b, h)
	for k, v := range o.Headers {
		b = appendString(appendString(b, k), v)
	}
	t := uint64(0)
	if o.Tags != nil {
		t = uint64(len(o.Tags)) + 1
	}
	b = binary.AppendUvarint(b, t)
	for _, tag := range o.Tags {
		b = appendString(appendString(b, tag.Key), tag.Value)
	}
	return string(b), true
}

// unpackObject decodes what packObject encoded. The headers and the tags
// are new each time, the caller's to change.
func unpackObject(p string) meta.Object {
	d := decoder{p: p}
	var o meta.Object
	o.Bucket, o.Key, o.FileID, o.ETag, o.ContentType = d.str(), d.str(), d.str(), d.str(), d.str()
	o.SizeBytes, o.ModifiedAt = d.int(), fromMicros(d.int())
	if n := d.uint(); n > 0 {
		o.Headers = make(map[string]string, n-1)
		for range n - 1 {
			k := d.str()
			o.Headers[k] = d.str()
		}
	}
	if n := d.uint(); n > 0 {
		o.Tags = make([]meta.Tag, n-1)
		for i := range o.Tags {
			o.Tags[i] = meta.Tag{Key: d.str(), Value: d.str()}
		}
	}
	return o
}

// packedObjectKey is the bucket and key of the row p holds, sharing p's
// memory.
func packedObjectKey(p string) objectKey {
	d := decoder{p: p}
	return objectKey{bucket: d.str(), key: d.str()}
}

// packedObjectFile is the file the row p holds names, sharing p's memory.
func packedObjectFile(p string) string {
	d := decoder{p: p}
	d.str()
	d.str()
	return d.str()
}
