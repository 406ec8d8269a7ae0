package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
	"github.com/dfs-project/dfs/migrations"
)

func pragma(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var v string
	require.NoError(t, db.QueryRow("PRAGMA "+name).Scan(&v))
	return v
}

// TestPragmas checks what durability and concurrency rest on, on the
// connections the store really uses.
func TestPragmas(t *testing.T) {
	s := openTest(t)
	cases := []struct {
		db     *sql.DB
		pragma string
		want   string
	}{
		{s.write, "journal_mode", "wal"},
		{s.write, "synchronous", "2"}, // FULL
		{s.write, "foreign_keys", "1"},
		{s.write, "busy_timeout", "5000"},
		{s.write, "query_only", "0"},
		{s.read, "journal_mode", "wal"},
		{s.read, "synchronous", "2"},
		{s.read, "foreign_keys", "1"},
		{s.read, "busy_timeout", "5000"},
		{s.read, "query_only", "1"},
	}
	for _, tc := range cases {
		pool := "read"
		if tc.db == s.write {
			pool = "write"
		}
		require.Equal(t, tc.want, pragma(t, tc.db, tc.pragma), "%s pool: PRAGMA %s", pool, tc.pragma)
	}
	require.Equal(t, 1, s.write.Stats().MaxOpenConnections, "SQLite has one writer: the write pool has one connection")
	_, err := s.read.Exec(`DELETE FROM leases`)
	require.Error(t, err, "the read pool cannot write")
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	ctx := context.Background()
	s, err := Open(ctx, path, nil)
	require.NoError(t, err)
	n := &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}
	require.NoError(t, s.CreateNode(ctx, n))
	rec := &meta.FileRecord{
		File:     meta.File{ID: uuid.NewString(), Name: "a", Status: meta.FileActive, ReplicationFactor: 1, PrimaryNodeID: "node-1"},
		Replicas: []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}},
	}
	require.NoError(t, s.CreateFile(ctx, rec))
	require.NoError(t, s.Close())

	s = openAt(t, path)
	gotNode, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, *n, gotNode)
	gotFile, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, gotFile)
}

// TestUpgradeFromTheFirstSchema opens a database left at schema version 1,
// with a file in it, and checks that opening it applies the later migrations
// (the redundant indexes go, disk identities, epochs and the count of ACTIVE
// copies arrive) and keeps
// the data.
func TestUpgradeFromTheFirstSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	ctx := context.Background()
	s := openAt(t, path)
	require.NoError(t, s.CreateNode(ctx, &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}))
	rec := &meta.FileRecord{
		File:     meta.File{ID: uuid.NewString(), Name: "a", Status: meta.FileActive, ReplicationFactor: 1, PrimaryNodeID: "node-1"},
		Replicas: []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}},
	}
	require.NoError(t, s.CreateFile(ctx, rec))
	// Back to version 1 as it was shipped.
	for _, q := range []string{
		`DROP TABLE multipart_uploads`,
		`DROP TABLE objects`,
		`DROP TABLE buckets`,
		`DROP TABLE access_keys`,
		`DROP TABLE upload_parts`,
		`DROP TABLE upload_sessions`,
		`DROP INDEX files_parent_idx`,
		`DROP INDEX files_top_created_at_idx`,
		`DROP INDEX files_top_status_idx`,
		`DROP INDEX files_durability_idx`,
		`ALTER TABLE files DROP COLUMN active_copies`,
		`ALTER TABLE files DROP COLUMN chunk_count`,
		`ALTER TABLE files DROP COLUMN chunk_offset`,
		`ALTER TABLE files DROP COLUMN chunk_index`,
		`ALTER TABLE files DROP COLUMN chunk_part`,
		`ALTER TABLE files DROP COLUMN parent_id`,
		`CREATE INDEX files_status_idx ON files (status)`,
		`CREATE INDEX files_created_at_idx ON files (created_at DESC, id DESC)`,
		`CREATE INDEX files_primary_node_id_idx ON files (primary_node_id)`,
		`CREATE INDEX file_replicas_file_id_idx ON file_replicas (file_id)`,
		`DROP TABLE coordinator_state`,
		`DROP TABLE rebalance_epochs`,
		`ALTER TABLE storage_nodes DROP COLUMN disk_id`,
		`ALTER TABLE storage_nodes DROP COLUMN weight_override`,
		`ALTER TABLE storage_nodes DROP COLUMN zone_override`,
		`ALTER TABLE storage_nodes DROP COLUMN weight`,
		`ALTER TABLE storage_nodes DROP COLUMN zone`,
		`UPDATE schema_migrations SET version = 1`,
	} {
		_, err := s.write.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, s.Close())

	s = openAt(t, path)
	var version int
	require.NoError(t, s.read.QueryRow(`SELECT version FROM schema_migrations`).Scan(&version))
	src, err := iofs.New(migrations.SQLite, migrations.SQLiteDir)
	require.NoError(t, err)
	newest, err := migrations.Newest(src)
	require.NoError(t, err)
	require.Equal(t, int(newest), version)
	var n int
	require.NoError(t, s.read.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index'
		AND name IN ('files_status_idx', 'file_replicas_file_id_idx', 'files_created_at_idx', 'files_primary_node_id_idx')`).Scan(&n))
	require.Zero(t, n, "the redundant and the unread indexes are gone")
	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, got)
	n1, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Empty(t, n1.DiskID, "a node from before identities has none")
	require.Empty(t, n1.PlacementZone(), "a node from before zones has none")
	require.Equal(t, 1.0, n1.PlacementWeight(), "and weight 1")
	e, err := s.Epochs(ctx)
	require.NoError(t, err)
	require.Equal(t, meta.Epochs{}, e, "the epochs start at 0, 0")
	d, err := s.Durability(ctx, []string{"node-1"})
	require.NoError(t, err)
	require.Equal(t, map[int]int{1: 1}, d.FilesByCopies, "the existing copy is counted into active_copies")
}

// TestParallelWriters runs 16 writers and 4 readers at once, first on one
// store and then split over two stores on the same file (two connections
// that lock each other, as a second process would). No operation may fail
// with SQLITE_BUSY or anything else, and no write may be lost.
func TestParallelWriters(t *testing.T) {
	for _, stores := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d stores", stores), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "metadata.db")
			ss := make([]*Store, stores)
			for i := range ss {
				ss[i] = openAt(t, path)
			}
			ctx := context.Background()
			require.NoError(t, ss[0].CreateNode(ctx, &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}))

			const writers, perWriter, readers = 16, 8, 4
			var failures sync.Map
			var writersWG, readersWG sync.WaitGroup
			stop := make(chan struct{})
			for w := range writers {
				s := ss[w%stores]
				writersWG.Go(func() {
					for i := range perWriter {
						rec := &meta.FileRecord{
							File: meta.File{ID: uuid.NewString(), Name: fmt.Sprintf("w%d-%d", w, i), Status: meta.FilePending,
								ReplicationFactor: 1, RingPosition: int64(w*perWriter + i)},
							Replicas: []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaPending}},
						}
						if err := s.CreateFile(ctx, rec); err != nil {
							failures.Store(rec.Name+" create", err)
							continue
						}
						if err := s.TouchFile(ctx, rec.ID); err != nil {
							failures.Store(rec.Name+" touch", err)
						}
						rec.Status, rec.Replicas[0].Status = meta.FileActive, meta.ReplicaActive
						if err := s.UpdateFile(ctx, rec); err != nil {
							failures.Store(rec.Name+" update", err)
						}
					}
				})
			}
			for r := range readers {
				s := ss[r%stores]
				readersWG.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, _, err := s.ListFiles(ctx, meta.FileQuery{Limit: 50}); err != nil {
							failures.Store(fmt.Sprintf("reader %d", r), err)
							return
						}
					}
				})
			}
			writersWG.Wait()
			close(stop)
			readersWG.Wait()
			failures.Range(func(op, err any) bool {
				t.Errorf("%s: %v", op, err)
				return true
			})
			counts, err := ss[0].CountFilesByStatus(ctx)
			require.NoError(t, err)
			require.Equal(t, writers*perWriter, counts[meta.FileActive], "every write landed")
		})
	}
}

func TestRefusesUnknownSchema(t *testing.T) {
	cases := []struct {
		name, update, want string
	}{
		{"newer version", `UPDATE schema_migrations SET version = 999`, "newer than this program knows"},
		{"dirty", `UPDATE schema_migrations SET dirty = 1`, "dirty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "metadata.db")
			s := openAt(t, path)
			_, err := s.write.Exec(tc.update)
			require.NoError(t, err)
			require.NoError(t, s.Close())

			_, err = Open(context.Background(), path, nil)
			require.Error(t, err)
			require.Equal(t, errs.Conflict, errs.KindOf(err))
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestUnopenableFileIsUnavailable(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "missing-dir", "metadata.db"), nil)
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err), "%v", err)
	require.Equal(t, "METADATA_UNAVAILABLE", errs.CodeOf(err))
}

// TestIndexedQueries checks that the queries the failure, repair and join
// paths and the durability report run are served by an index, never a scan
// of all files.
func TestIndexedQueries(t *testing.T) {
	s := openTest(t)
	cases := []struct {
		name, query, index string
		args               []any
	}{
		{"files on a node", fileIDsOnNodeSQL, "file_replicas_node_status_idx", []any{"node-1"}},
		{"files by status", fileIDsByStatusSQL(2), "files_status_updated_at_idx", []any{"PENDING", "DEGRADED", 1, 10}},
		{"files in ranges", fileIDsInRangesSQL(2), "files_ring_position_idx", []any{1, 2, 5, 9}},
		{"durability by active copies", sqlDurabilityByActive, "files_durability_idx", nil},
		{"durability of copies on down nodes", sqlDurabilityDown, "file_replicas_node_status_idx", []any{`["node-1"]`}},
		{"durability by node", sqlDurabilityByNode, "files_durability_idx", []any{`["node-1"]`}},
		{"durability of chunked files", sqlDurabilityChunked, "files_parent_idx", []any{`["node-1"]`}},
		{"durability of chunked files by node", sqlDurabilityChunkedByNode, "files_parent_idx", []any{`["node-1"]`}},
		{"files by risk", sqlFileIDsByRisk, "sqlite_autoindex_files_1", []any{`["0b6d5c1e-8f0a-4a8e-9c52-3d1f0f6e2a11"]`}},
		{"the chunks of a parent", sqlChunksOf, "files_parent_idx", []any{"p"}},
		{"the copies of a parent's chunks", sqlChunkReplicas, "files_parent_idx", []any{"p"}},
		{"repair queue", sqlRepairQueue, "files_durability_idx", nil},
		{"a page of PENDING files", listPageSQL([]string{"PENDING"}, listedWhere(1)), "files_top_status_idx",
			[]any{"PENDING", 50, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			joined := strings.Join(queryPlan(t, s, tc.query, tc.args...), "\n")
			require.Regexp(t, "USING (COVERING )?INDEX "+tc.index+" ", joined)
			require.NotContains(t, joined, "SCAN f\n")
			require.NotRegexp(t, `SCAN (files|file_replicas|f)\b`, joined)
		})
	}
}

// TestFilesAfterReadsInIndexOrder checks that both statements of a
// FilesAfter page walk an index in the order they return, so a page never
// sorts what it reads.
func TestFilesAfterReadsInIndexOrder(t *testing.T) {
	s := openTest(t)
	for _, tc := range []struct {
		name, query, index string
		args               []any
	}{
		{"a page of files after an ID", sqlFilesAfter, "sqlite_autoindex_files_1", []any{"", 500}},
		{"the copies of a page", sqlReplicasBetween, "sqlite_autoindex_file_replicas_1", []any{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			joined := strings.Join(queryPlan(t, s, tc.query, tc.args...), "\n")
			require.Regexp(t, "^SEARCH [a-z_]+ USING INDEX "+tc.index+" ", joined)
			require.NotContains(t, joined, "TEMP B-TREE")
			require.NotContains(t, joined, "SCAN")
		})
	}
}

// TestDefaultListingReadsInPageOrder checks that a page of the default
// listing walks the files newest first along their index, which ends after
// the page, and never sorts every listed file (BenchmarkListFiles).
func TestDefaultListingReadsInPageOrder(t *testing.T) {
	s := openTest(t)
	listed, err := rules.ListStatuses(nil)
	require.NoError(t, err)
	plan := queryPlan(t, s, listPageSQL(listed, listedWhere(len(listed))), append(stringArgs(listed), 50, 0)...)
	require.Equal(t, []string{"SCAN f USING INDEX files_top_created_at_idx"}, plan)
}

func TestDeadlineIsUnavailable(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := s.CreateNode(ctx, &meta.Node{ID: "n", Host: "h", Port: 1, Status: meta.NodeHealthy})
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.Equal(t, "METADATA_UNAVAILABLE", errs.CodeOf(err))
}

// processCPU is the user and system CPU time of the whole process. On a
// machine shared with other work a benchmark's CPU per op moves less than
// its wall time per op, which also counts the time it waited for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCommits adds to b's results how many COMMITs (and so fsyncs of the
// WAL) each op cost and how many write transactions shared each COMMIT,
// counted from before, and the process's CPU time per op since cpu.
func reportCommits(b *testing.B, s *Store, before counts, cpu time.Duration) {
	d := countsOf(s).since(before)
	b.ReportMetric(float64(d.commits)/float64(b.N), "commits/op")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	if d.commits > 0 {
		b.ReportMetric(float64(d.ran)/float64(d.commits), "writes/commit")
	}
}

// BenchmarkParallelCreateFile measures uploads' metadata writes from many
// goroutines at once, sharing commits through the committer.
func BenchmarkParallelCreateFile(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	require.NoError(b, s.CreateNode(ctx, &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}))
	before, cpu := countsOf(s), processCPU()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := &meta.FileRecord{
				File:     meta.File{ID: uuid.NewString(), Name: "f", Status: meta.FileActive, ReplicationFactor: 1},
				Replicas: []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}},
			}
			if err := s.CreateFile(ctx, rec); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCommits(b, s, before, cpu)
}

// BenchmarkParallelUpload is the metadata side of 32 concurrent uploads of
// three copies each: "recorded-first" creates a PENDING file, then updates
// it to ACTIVE (an upload with an Idempotency-Key, or any upload with
// PENDING_RECORD_DELAY=0); "one-write" creates the ACTIVE file at once (an
// upload that finished within the delay).
func BenchmarkParallelUpload(b *testing.B) {
	nodes := []string{"node-1", "node-2", "node-3"}
	upload := func(ctx context.Context, s *Store, first bool, newID func() string) error {
		rec := &meta.FileRecord{File: meta.File{ID: newID(), Name: "f", Status: meta.FileActive, ReplicationFactor: 3, PrimaryNodeID: nodes[0]}}
		status := meta.ReplicaActive
		if first {
			rec.Status, rec.PrimaryNodeID, status = meta.FilePending, "", meta.ReplicaPending
		}
		for _, n := range nodes {
			rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: status})
		}
		if err := s.CreateFile(ctx, rec); err != nil || !first {
			return err
		}
		rec.Status, rec.PrimaryNodeID = meta.FileActive, nodes[0]
		for i := range rec.Replicas {
			rec.Replicas[i].Status = meta.ReplicaActive
		}
		return s.UpdateFile(ctx, rec)
	}
	random := uuid.NewString
	timeOrdered := func() string { return uuid.Must(uuid.NewV7()).String() }
	for _, bc := range []struct {
		name  string
		first bool
		newID func() string
	}{
		{"recorded-first", true, random},
		{"one-write", false, random},
		{"one-write-time-ordered-ids", false, timeOrdered},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openTest(b)
			ctx := context.Background()
			for _, id := range nodes {
				require.NoError(b, s.CreateNode(ctx, &meta.Node{ID: id, Host: "h", Port: 1, Status: meta.NodeHealthy}))
			}
			before, cpu := countsOf(s), processCPU()
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := upload(ctx, s, bc.first, bc.newID); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportCommits(b, s, before, cpu)
		})
	}
}
