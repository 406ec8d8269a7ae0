package localcache

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// exactTimeGen draws times as the stores return them: UTC, whole
// microseconds, the zero time included.
func exactTimeGen() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		if rapid.Bool().Draw(t, "zero") {
			return time.Time{}
		}
		return fromMicros(rapid.Int64Range(-1<<52, 1<<52).Draw(t, "us"))
	})
}

// Every field of every record comes back as it went in: strings of any
// bytes, negative and large numbers, nil and empty copy lists.
func TestPackRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := func(label string) string { return rapid.String().Draw(t, label) }
		num := func(label string) int64 { return rapid.Int64().Draw(t, label) }
		small := func(label string) int { return rapid.IntRange(-1<<31, 1<<31).Draw(t, label) }
		rec := meta.FileRecord{File: meta.File{
			ID: str("id"), Name: str("name"), ContentType: str("type"), SizeBytes: num("size"), Checksum: str("sum"),
			Status: meta.FileStatus(str("status")), StatusReason: str("reason"), PrimaryNodeID: str("primary"),
			ReplicationFactor: small("rf"), RingPosition: num("pos"), IdempotencyKey: str("key"),
			Chunk:      meta.ChunkRef{ParentID: str("parent"), Part: small("part"), Index: small("index"), Offset: num("offset")},
			ChunkCount: small("chunks"), CreatedAt: exactTimeGen().Draw(t, "created"), UpdatedAt: exactTimeGen().Draw(t, "updated"),
			Version: num("version"),
		}}
		switch n := rapid.IntRange(-1, 5).Draw(t, "copies"); {
		case n == 0:
			rec.Replicas = []meta.Replica{}
		case n > 0:
			for i := range n {
				rec.Replicas = append(rec.Replicas, meta.Replica{
					ID: num(fmt.Sprint("copy id ", i)), FileID: rec.ID, NodeID: str(fmt.Sprint("node ", i)),
					Status: meta.ReplicaStatus(str(fmt.Sprint("copy status ", i))), CreatedAt: exactTimeGen().Draw(t, fmt.Sprint("copy created ", i)),
					UpdatedAt: exactTimeGen().Draw(t, fmt.Sprint("copy updated ", i)), Version: num(fmt.Sprint("copy version ", i)),
				})
			}
		}
		packed, ok := pack(&rec)
		require.True(t, ok)
		require.Equal(t, rec.ID, packedID(packed))
		require.Equal(t, rec, unpack(packed))
	})
}

// Every field of every object row comes back as it went in, headers and
// tags included, a nil map or slice as nil and an empty one as empty.
func TestPackObjectRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := meta.Object{Bucket: rapid.String().Draw(t, "bucket"), Key: rapid.String().Draw(t, "key"),
			FileID: rapid.String().Draw(t, "file"), SizeBytes: rapid.Int64().Draw(t, "size"), ETag: rapid.String().Draw(t, "etag"),
			ContentType: rapid.String().Draw(t, "type"), ModifiedAt: exactTimeGen().Draw(t, "modified")}
		if rapid.Bool().Draw(t, "headers") {
			o.Headers = rapid.MapOf(rapid.String(), rapid.String()).Draw(t, "header map")
		}
		if rapid.Bool().Draw(t, "tags") {
			o.Tags = rapid.SliceOf(rapid.Custom(func(t *rapid.T) meta.Tag {
				return meta.Tag{Key: rapid.String().Draw(t, "tag key"), Value: rapid.String().Draw(t, "tag value")}
			})).Draw(t, "tag set")
		}
		packed, ok := packObject(&o)
		require.True(t, ok)
		require.Equal(t, objectKey{o.Bucket, o.Key}, packedObjectKey(packed))
		require.Equal(t, o.FileID, packedObjectFile(packed))
		require.Equal(t, o, unpackObject(packed))
	})
	o := meta.Object{Bucket: "b", Key: "k", ModifiedAt: time.Now()}
	_, ok := packObject(&o)
	require.False(t, ok, "a time with a monotonic reading")
}

// What pack cannot give back exactly it refuses, and the cache then holds
// nothing for that record rather than something different.
func TestPackRefusesWhatItCannotHoldExactly(t *testing.T) {
	good := func() meta.FileRecord {
		now := fromMicros(time.Now().UnixMicro())
		return meta.FileRecord{File: meta.File{ID: "f", CreatedAt: now, UpdatedAt: now},
			Replicas: []meta.Replica{{FileID: "f", NodeID: "n1", CreatedAt: now, UpdatedAt: now}}}
	}
	rec := good()
	_, ok := pack(&rec)
	require.True(t, ok)
	for name, spoil := range map[string]func(*meta.FileRecord){
		"nanoseconds":         func(r *meta.FileRecord) { r.CreatedAt = r.CreatedAt.Add(time.Nanosecond) },
		"a local time":        func(r *meta.FileRecord) { r.UpdatedAt = r.UpdatedAt.In(time.FixedZone("X", 3600)) },
		"a monotonic reading": func(r *meta.FileRecord) { r.UpdatedAt = time.Now() },
		"a copy's time":       func(r *meta.FileRecord) { r.Replicas[0].UpdatedAt = r.Replicas[0].UpdatedAt.Add(time.Nanosecond) },
		"another file's copy": func(r *meta.FileRecord) { r.Replicas[0].FileID = "g" },
		"chunks":              func(r *meta.FileRecord) { r.Chunks = []meta.FileRecord{} },
	} {
		rec := good()
		spoil(&rec)
		_, ok := pack(&rec)
		require.False(t, ok, name)
	}
}

// A record the cache cannot hold is read from the store every time, and
// replaces nothing stale.
func TestAnUnpackableRecordIsNotKept(t *testing.T) {
	ctx := context.Background()
	rec := meta.FileRecord{File: meta.File{ID: uuid.NewString(), Status: meta.FileActive, CreatedAt: time.Now()}}
	base := &fixedStore{rec: rec}
	s, c := newCached(t, base, 10)
	for range 2 {
		got, err := s.GetFile(ctx, rec.ID)
		require.NoError(t, err)
		require.Equal(t, rec, got)
	}
	require.Zero(t, s.Len())
	require.EqualValues(t, 2, c.misses.Load())
	require.EqualValues(t, 2, base.reads)
}

// fixedStore answers GetFile with one record.
type fixedStore struct {
	meta.Store
	rec   meta.FileRecord
	reads int
}

func (f *fixedStore) GetFile(_ context.Context, id string) (meta.FileRecord, error) {
	f.reads++
	if id != f.rec.ID {
		return meta.FileRecord{}, errs.E(errs.NotFound, "no file "+id)
	}
	return f.rec, nil
}

// BenchmarkFootprint reports the heap a held record takes, all of it: the
// packed record, its list element and its share of the map. The record is
// an uploaded 4 KiB file with three copies, as the bench leaves them.
// Reproduce: go test -run '^$' -bench Footprint ./internal/meta/localcache
func BenchmarkFootprint(b *testing.B) {
	const records = 50_000
	recs := make([]meta.FileRecord, records)
	for i := range recs {
		recs[i] = benchRecord(i)
	}
	base := &listStore{recs: map[string]meta.FileRecord{}}
	for _, r := range recs {
		base.recs[r.ID] = r
	}
	ctx := context.Background()
	var perRecord float64
	for b.Loop() {
		s := New(base, Options{Entries: records})
		before := heapAlloc()
		for _, r := range recs {
			if _, err := s.GetFile(ctx, r.ID); err != nil {
				b.Fatal(err)
			}
		}
		if n := s.(*Store).Len(); n != records {
			b.Fatalf("holds %d records, want %d", n, records)
		}
		perRecord = (float64(heapAlloc()) - float64(before)) / records
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perRecord, "B/record")
}

// benchRecord is the i-th record of an uploaded 4 KiB file with three
// copies, as the bench leaves them.
func benchRecord(i int) meta.FileRecord {
	now := fromMicros(time.Now().UnixMicro())
	id := uuid.NewString()
	rec := meta.FileRecord{File: meta.File{
		ID: id, Name: "bench.bin", ContentType: "application/octet-stream", SizeBytes: 4096,
		Checksum: fmt.Sprintf("%064x", i), Status: meta.FileActive, PrimaryNodeID: "node-1",
		ReplicationFactor: 3, RingPosition: ring.Position(id), CreatedAt: now, UpdatedAt: now, Version: 1,
	}}
	for n := 1; n <= 3; n++ {
		rec.Replicas = append(rec.Replicas, meta.Replica{ID: int64(3*i + n), FileID: id, NodeID: fmt.Sprint("node-", n),
			Status: meta.ReplicaActive, CreatedAt: now, UpdatedAt: now, Version: 1})
	}
	return rec
}

// BenchmarkObjectFootprint is BenchmarkFootprint for S3 object rows: a key
// of 27 bytes, no stored headers.
// Reproduce: go test -run '^$' -bench ObjectFootprint ./internal/meta/localcache
func BenchmarkObjectFootprint(b *testing.B) {
	const rows = 50_000
	now := fromMicros(time.Now().UnixMicro())
	ns := &objectMap{rows: map[string]meta.Object{}}
	keys := make([]string, rows)
	for i := range keys {
		keys[i] = fmt.Sprintf("photos/2026/12/img-%06d.jpg", i)
		ns.rows[keys[i]] = meta.Object{Bucket: "bench-bucket", Key: keys[i], FileID: uuid.NewString(), SizeBytes: 4096,
			ETag: fmt.Sprintf("%032x", i), ContentType: "application/octet-stream", ModifiedAt: now}
	}
	ctx := context.Background()
	var perRow float64
	for b.Loop() {
		c := NewObjects(ns, rows)
		before := heapAlloc()
		for _, k := range keys {
			if _, err := c.GetObject(ctx, "bench-bucket", k); err != nil {
				b.Fatal(err)
			}
		}
		if n := c.Len(); n != rows {
			b.Fatalf("holds %d rows, want %d", n, rows)
		}
		perRow = (float64(heapAlloc()) - float64(before)) / rows
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perRow, "B/row")
}

// objectMap answers GetObject from a map, with fresh strings as listStore.
type objectMap struct {
	meta.Namespace
	rows map[string]meta.Object
}

func (m *objectMap) GetObject(_ context.Context, bucket, key string) (meta.Object, error) {
	o, ok := m.rows[key]
	if !ok || o.Bucket != bucket {
		return meta.Object{}, errs.E(errs.NotFound, "no key "+key)
	}
	fresh := func(s string) string { return string([]byte(s)) }
	o.Bucket, o.Key, o.FileID, o.ETag, o.ContentType = fresh(o.Bucket), fresh(o.Key), fresh(o.FileID), fresh(o.ETag), fresh(o.ContentType)
	return o, nil
}

// listStore answers GetFile from a map, handing out the strings the store's
// reads would (the cache must not keep the caller's).
type listStore struct {
	meta.Store
	recs map[string]meta.FileRecord
}

func (l *listStore) GetFile(_ context.Context, id string) (meta.FileRecord, error) {
	rec, ok := l.recs[id]
	if !ok {
		return meta.FileRecord{}, errs.E(errs.NotFound, "no file "+id)
	}
	fresh := func(s string) string { return string([]byte(s)) } // as read from the database: new memory
	f := &rec.File
	f.ID, f.Name, f.ContentType, f.Checksum = fresh(f.ID), fresh(f.Name), fresh(f.ContentType), fresh(f.Checksum)
	f.Status, f.PrimaryNodeID = meta.FileStatus(fresh(string(f.Status))), fresh(f.PrimaryNodeID)
	rec.Replicas = append([]meta.Replica(nil), rec.Replicas...)
	for i := range rec.Replicas {
		r := &rec.Replicas[i]
		r.FileID, r.NodeID, r.Status = rec.ID, fresh(r.NodeID), meta.ReplicaStatus(fresh(string(r.Status)))
	}
	return rec, nil
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHit is a lookup the cache answers: the record unpacked from
// memory, with three copies.
func BenchmarkHit(b *testing.B) {
	rec := benchRecord(0)
	s := New(&listStore{recs: map[string]meta.FileRecord{rec.ID: rec}}, Options{Entries: 1})
	ctx := context.Background()
	for b.Loop() {
		got, err := s.GetFile(ctx, rec.ID)
		if err != nil || len(got.Replicas) != 3 {
			b.Fatal(got, err)
		}
	}
}
