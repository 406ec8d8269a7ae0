package sqlite

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metatest"
)

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openTest(t testing.TB) *Store {
	return openAt(t, filepath.Join(t.TempDir(), "metadata.db"))
}

func TestConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store { return openCounted(t) })
}

// sqlWrongActiveCopies counts the files whose active_copies differs from a
// count of their ACTIVE copies.
const sqlWrongActiveCopies = `SELECT count(*) FROM files f WHERE f.active_copies <>
	(SELECT count(*) FROM file_replicas r WHERE r.file_id = f.id AND r.status = 'ACTIVE')`

// openCounted is openTest whose test ends by checking every file's
// active_copies against its copies: no trigger keeps the column (migration
// 8), the writes that change copies set it, and every conformance case is a
// mix of such writes.
func openCounted(t *testing.T) *Store {
	s := openTest(t)
	t.Cleanup(func() { // runs before openTest's Close
		var wrong int
		require.NoError(t, s.read.QueryRow(sqlWrongActiveCopies).Scan(&wrong))
		require.Zero(t, wrong, "files whose active_copies is not their count of ACTIVE copies")
	})
	return s
}

// BenchmarkStore runs the shared benchmarks. They write from one goroutine,
// so each write should have a COMMIT of its own (writes/commit 1, counted
// over the whole run, setup included): the committer never holds a lone
// writer back to wait for company.
func BenchmarkStore(b *testing.B) {
	metatest.RunBenchmarks(b, func(b *testing.B) meta.Store {
		s := openTest(b)
		b.Cleanup(func() {
			if d := countsOf(s); d.commits > 0 {
				b.ReportMetric(float64(d.ran)/float64(d.commits), "writes/commit")
			}
		})
		return s
	})
}

func TestNamespaceConformance(t *testing.T) {
	metatest.RunNamespace(t, func(t *testing.T) metatest.NamespaceStore { return openCounted(t) })
}

// TestListingIsARangeRead checks that a page of keys is read from the
// primary key's range, never by scanning the bucket.
func TestListingIsARangeRead(t *testing.T) {
	s := openTest(t)
	plan := queryPlan(t, s, objectsAfterSQL, "b", []byte("a"), []byte("a"), []byte("b"), 10)
	require.Equal(t, []string{"SEARCH objects USING PRIMARY KEY (bucket=? AND object_key>? AND object_key<?)"}, plan)
}

// queryPlan is the detail column of EXPLAIN QUERY PLAN for query on the
// read pool, a line per step.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.read.Query("EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return plan
}

// BenchmarkGetObject is the metadata read every S3 GetObject and HeadObject
// makes: one key's row by the primary key.
func BenchmarkGetObject(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	require.NoError(b, s.CreateBucket(ctx, &meta.Bucket{Name: "bench", Owner: "AK"}))
	rec := &meta.FileRecord{File: meta.File{ID: "00000000-0000-4000-8000-000000000001", Name: "f", Status: meta.FileActive, ReplicationFactor: 1}}
	require.NoError(b, s.CreateFile(ctx, rec))
	_, err := s.PutObject(ctx, &meta.Object{Bucket: "bench", Key: "dir/object.bin", FileID: rec.ID, SizeBytes: 1, ETag: "e", ContentType: "x"})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetObject(ctx, "bench", "dir/object.bin"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutObject is the key's write every S3 PutObject makes after its
// upload: a new key pointed at a stored file, in a transaction of its own.
func BenchmarkPutObject(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	require.NoError(b, s.CreateBucket(ctx, &meta.Bucket{Name: "bench", Owner: "AK"}))
	rec := &meta.FileRecord{File: meta.File{ID: "00000000-0000-4000-8000-000000000001", Name: "f", Status: meta.FileActive, ReplicationFactor: 1}}
	require.NoError(b, s.CreateFile(ctx, rec))
	b.ReportAllocs()
	cpu := processCPU()
	i := 0
	for b.Loop() {
		i++
		o := &meta.Object{Bucket: "bench", Key: "dir/object-" + strconv.Itoa(i), FileID: rec.ID, SizeBytes: 1, ETag: "e",
			ContentType: "x", Headers: map[string]string{"X-Amz-Meta-A": "b"}}
		if _, err := s.PutObject(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkFinalWrite is an S3 PutObject's metadata writes after its copies
// are written: the file's final record and its new key, in two transactions
// (UpdateFile, then PutObject) or in one (UpdateFileAndPutObject). Each op
// rewrites one stored file and points a new key at it, from one goroutine,
// so each transaction pays its COMMIT and fsync.
func BenchmarkFinalWrite(b *testing.B) {
	for _, bc := range []struct {
		name  string
		write func(ctx context.Context, s *Store, rec *meta.FileRecord, o *meta.Object) error
	}{
		{"separate", func(ctx context.Context, s *Store, rec *meta.FileRecord, o *meta.Object) error {
			if err := s.UpdateFile(ctx, rec); err != nil {
				return err
			}
			_, err := s.PutObject(ctx, o)
			return err
		}},
		{"folded", func(ctx context.Context, s *Store, rec *meta.FileRecord, o *meta.Object) error {
			_, err := s.UpdateFileAndPutObject(ctx, rec, o)
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openTest(b)
			ctx := context.Background()
			require.NoError(b, s.CreateBucket(ctx, &meta.Bucket{Name: "bench", Owner: "AK"}))
			rec := &meta.FileRecord{File: meta.File{ID: "00000000-0000-4000-8000-000000000001", Name: "f", Status: meta.FileActive, ReplicationFactor: 1}}
			require.NoError(b, s.CreateFile(ctx, rec))
			b.ReportAllocs()
			cpu := processCPU()
			i := 0
			for b.Loop() {
				i++
				o := &meta.Object{Bucket: "bench", Key: "dir/object-" + strconv.Itoa(i), FileID: rec.ID, SizeBytes: 1, ETag: "e",
					ContentType: "x", Headers: map[string]string{"X-Amz-Meta-A": "b"}}
				if err := bc.write(ctx, s, rec, o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// Options.CheckpointPages decides how large the WAL grows before the writer
// checkpoints it into the database file; it must stay within its bounds.
func TestCheckpointPagesBoundsTheWAL(t *testing.T) {
	ctx := context.Background()
	walAfterWrites := func(pages int) int64 {
		path := filepath.Join(t.TempDir(), "metadata.db")
		s, err := OpenWith(ctx, path, nil, Options{CheckpointPages: pages})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		var got int
		require.NoError(t, s.write.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&got))
		require.Equal(t, pages, got)
		require.NoError(t, s.CreateNode(ctx, &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}))
		// One commit each, so that the WAL passes any threshold between
		// two commits.
		for range 400 {
			rec := &meta.FileRecord{
				File:     meta.File{ID: uuid.NewString(), Name: "f", Status: meta.FileActive, ReplicationFactor: 1, PrimaryNodeID: "node-1"},
				Replicas: []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}},
			}
			require.NoError(t, s.CreateFile(ctx, rec))
		}
		fi, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		return fi.Size()
	}
	const frame = 4096 + 24 // a page and its frame header
	small, large := walAfterWrites(MinCheckpointPages), walAfterWrites(5000)
	t.Logf("WAL after 400 commits: %d bytes checkpointing at %d pages, %d at 5000", small, MinCheckpointPages, large)
	// A commit writes a few pages, so the WAL passes the threshold by a few
	// frames before the commit that passed it checkpoints and the next
	// starts it over.
	require.Less(t, small, int64((MinCheckpointPages+50)*frame))
	require.Greater(t, large, int64(4*MinCheckpointPages*frame), "without a checkpoint, the WAL holds every commit")

	for _, pages := range []int{MinCheckpointPages - 1, MaxCheckpointPages + 1} {
		_, err := OpenWith(ctx, filepath.Join(t.TempDir(), "metadata.db"), nil, Options{CheckpointPages: pages})
		require.Equal(t, errs.Invalid, errs.KindOf(err), "%d: %v", pages, err)
	}
}
