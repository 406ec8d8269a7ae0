package sqlite

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
)

// BenchmarkDurability measures one Durability call over 100,000 readable
// files with three ACTIVE copies each on five nodes, with every node healthy
// and with one down (then the three fifths of the files that lost a copy make the
// per-node query do real work). The rows are written in one transaction
// straight into the tables: CreateFile a hundred thousand times would only
// measure the setup.
func BenchmarkDurability(b *testing.B) {
	const files = 100_000
	nodes := []string{"node-1", "node-2", "node-3", "node-4", "node-5"}
	s := openTest(b)
	ctx := context.Background()
	seedFiles(b, s, files, nodes)

	for _, tc := range []struct {
		name    string
		healthy []string
		want    map[int]int
	}{
		{"AllHealthy", nodes, map[int]int{3: files}},
		{"OneDown", nodes[1:], map[int]int{3: files * 2 / 5, 2: files * 3 / 5}},
	} {
		b.Run(fmt.Sprintf("files=%d/%s", files, tc.name), func(b *testing.B) {
			for b.Loop() {
				d, err := s.Durability(ctx, tc.healthy)
				if err != nil {
					b.Fatal(err)
				}
				if d.FilesByCopies[3] != tc.want[3] || d.FilesByCopies[2] != tc.want[2] {
					b.Fatalf("counted %v, want %v", d.FilesByCopies, tc.want)
				}
			}
		})
	}
}

// seedFiles writes n ACTIVE files with three ACTIVE copies each over nodes,
// in one transaction straight into the tables, and returns their IDs.
func seedFiles(b *testing.B, s *Store, n int, nodes []string) []string {
	b.Helper()
	tx, err := s.write.BeginTx(context.Background(), nil)
	require.NoError(b, err)
	for _, node := range nodes {
		_, err := tx.Exec(`INSERT INTO storage_nodes (node_id, host, port, status, registered_at) VALUES (?, 'h', 9000, 'HEALTHY', 0)`, node)
		require.NoError(b, err)
	}
	insFile, err := tx.Prepare(`INSERT INTO files (id, file_name, content_type, size_bytes, status, primary_node_id,
		replication_factor, ring_position, created_at, updated_at, active_copies) VALUES (?, 'f', 'x', 1024, 'ACTIVE', ?, 3, ?, 0, ?, 3)`)
	require.NoError(b, err)
	insCopy, err := tx.Prepare(`INSERT INTO file_replicas (file_id, node_id, status, created_at, updated_at) VALUES (?, ?, 'ACTIVE', 0, 0)`)
	require.NoError(b, err)
	ids := make([]string, n)
	for i := range n {
		ids[i] = uuid.NewString()
		_, err := insFile.Exec(ids[i], nodes[i%len(nodes)], i, n-i)
		require.NoError(b, err)
		for k := range 3 {
			_, err := insCopy.Exec(ids[i], nodes[(i+k)%len(nodes)])
			require.NoError(b, err)
		}
	}
	require.NoError(b, tx.Commit())
	return ids
}

// BenchmarkFileIDsByRisk measures ordering the files of one run (what a
// node's failure or a join hands the rebalancer) among 100,000, every one
// looked up by its key and sorted in the database.
func BenchmarkFileIDsByRisk(b *testing.B) {
	const files = 100_000
	s := openTest(b)
	ids := seedFiles(b, s, files, []string{"node-1", "node-2", "node-3", "node-4", "node-5"})
	ctx := context.Background()
	for _, n := range []int{1_000, 60_000} {
		b.Run(fmt.Sprintf("files=%d/ordered=%d", files, n), func(b *testing.B) {
			for b.Loop() {
				got, err := s.FileIDsByRisk(ctx, ids[:n])
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != n || got[0] != ids[n-1] {
					b.Fatalf("ordered %d files starting with %s, want %d starting with the oldest, %s", len(got), got[0], n, ids[n-1])
				}
			}
		})
	}
}

// BenchmarkListFiles measures the first page of the default listing (the
// console's and `dfs ls`'s) among 100,000 files, and a page of a rare
// status, PENDING, which no seeded file has.
func BenchmarkListFiles(b *testing.B) {
	const files = 100_000
	s := openTest(b)
	seedFiles(b, s, files, []string{"node-1", "node-2", "node-3", "node-4", "node-5"})
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		statuses []meta.FileStatus
		want     int
	}{
		{"default", nil, files},
		{"pending", []meta.FileStatus{meta.FilePending}, 0},
	} {
		b.Run(fmt.Sprintf("files=%d/%s", files, tc.name), func(b *testing.B) {
			for b.Loop() {
				page, total, err := s.ListFiles(ctx, meta.FileQuery{Statuses: tc.statuses, Limit: 50})
				if err != nil {
					b.Fatal(err)
				}
				if total != tc.want || len(page) != min(50, tc.want) {
					b.Fatalf("listed %d of %d, want %d of %d", len(page), total, min(50, tc.want), tc.want)
				}
			}
		})
	}
}

// BenchmarkFilesAfter measures what the anti-entropy sweep and the
// rebalancer read: every one of 20,000 files with its three copies, in
// pages of 500 (the sweep's default page). It reports the cost per file.
func BenchmarkFilesAfter(b *testing.B) {
	const files, page = 20_000, 500
	s := openTest(b)
	seedFiles(b, s, files, []string{"node-1", "node-2", "node-3", "node-4", "node-5"})
	ctx := context.Background()
	for b.Loop() {
		after, seen := "", 0
		for {
			recs, err := s.FilesAfter(ctx, after, page)
			if err != nil {
				b.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			for _, r := range recs {
				if len(r.Replicas) != 3 {
					b.Fatalf("file %s has %d copies, want 3", r.ID, len(r.Replicas))
				}
			}
			seen += len(recs)
			after = recs[len(recs)-1].ID
		}
		if seen != files {
			b.Fatalf("walked %d files, want %d", seen, files)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
}

// BenchmarkGetFile measures what a download asks of the store when the
// coordinator's record cache misses: one file with its three copies, by ID,
// among 20,000, from eight goroutines per processor, more than the read
// pool has connections, as under a download load.
func BenchmarkGetFile(b *testing.B) {
	const files = 20_000
	s := openTest(b)
	ids := seedFiles(b, s, files, []string{"node-1", "node-2", "node-3", "node-4", "node-5"})
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := ids[int(next.Add(7919))%files]
			rec, err := s.GetFile(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if len(rec.Replicas) != 3 {
				b.Fatalf("file %s has %d copies, want 3", id, len(rec.Replicas))
			}
		}
	})
}
