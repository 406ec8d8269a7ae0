package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
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
	tx, err := s.write.BeginTx(ctx, nil)
	require.NoError(b, err)
	for _, n := range nodes {
		_, err := tx.Exec(`INSERT INTO storage_nodes (node_id, host, port, status, registered_at) VALUES (?, 'h', 9000, 'HEALTHY', 0)`, n)
		require.NoError(b, err)
	}
	insFile, err := tx.Prepare(`INSERT INTO files (id, file_name, content_type, size_bytes, status, primary_node_id,
		replication_factor, ring_position, created_at, updated_at) VALUES (?, 'f', 'x', 1024, 'ACTIVE', ?, 3, ?, 0, 0)`)
	require.NoError(b, err)
	insCopy, err := tx.Prepare(`INSERT INTO file_replicas (file_id, node_id, status, created_at, updated_at) VALUES (?, ?, 'ACTIVE', 0, 0)`)
	require.NoError(b, err)
	for i := range files {
		id := uuid.NewString()
		_, err := insFile.Exec(id, nodes[i%5], i)
		require.NoError(b, err)
		for k := range 3 {
			_, err := insCopy.Exec(id, nodes[(i+k)%5])
			require.NoError(b, err)
		}
	}
	require.NoError(b, tx.Commit())

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
