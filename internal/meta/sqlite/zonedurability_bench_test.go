package sqlite

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkZoneDurability measures one ZoneDurability call over 100,000
// readable files with three ACTIVE copies each on five nodes, in three
// zones (two nodes, two nodes, one): every healthy copy is read, so this is
// the cost of the zone view, which the coordinator shares among the
// gauges and the health check for 30 s.
func BenchmarkZoneDurability(b *testing.B) {
	const files = 100_000
	nodes := []string{"node-1", "node-2", "node-3", "node-4", "node-5"}
	s := openTest(b)
	ctx := context.Background()
	seedFiles(b, s, files, nodes)
	zones := map[string]string{"node-1": "a", "node-2": "a", "node-3": "b", "node-4": "b", "node-5": "c"}
	b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
		for b.Loop() {
			z, err := s.ZoneDurability(ctx, zones)
			if err != nil {
				b.Fatal(err)
			}
			if z.Files != files {
				b.Fatalf("counted %d files, want %d", z.Files, files)
			}
		}
	})
}
