package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/dfs-project/dfs/internal/meta"
)

// files.active_copies (set by every write that changes a file's copies,
// migration 8) is every file's count of ACTIVE copies on any node; a file's
// healthy copies are that minus its ACTIVE copies on the nodes that are not
// healthy. So the answer is a GROUP BY over the files_durability_idx
// covering index, corrected by the copies on down nodes, found through
// file_replicas_node_status_idx: the work grows with what is at risk, not
// with every copy of every file.
const (
	// durabilityDown is each file's ACTIVE copies on a node that is not
	// healthy; every copy's node is a storage_nodes row (a foreign key).
	durabilityDown = `WITH down AS MATERIALIZED (
			SELECT r.file_id, count(*) AS n FROM file_replicas r
			WHERE r.status = 'ACTIVE' AND r.node_id IN (
				SELECT node_id FROM storage_nodes WHERE NOT (node_id = ANY($1)))
			GROUP BY r.file_id)
		`
	readableFiles = `f.chunk_count = 0 AND f.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')`

	sqlDurabilityByActive = `SELECT f.active_copies, count(*),
			COALESCE(sum(f.size_bytes) FILTER (WHERE f.active_copies < f.replication_factor), 0)::bigint
		FROM files f WHERE ` + readableFiles + ` GROUP BY f.active_copies`
	// sqlDurabilityDown moves the files with copies on down nodes from the
	// bucket of their ACTIVE copies to that of their healthy ones.
	sqlDurabilityDown = durabilityDown + `SELECT f.active_copies, f.active_copies - d.n, count(*),
			COALESCE(sum(f.size_bytes) FILTER (WHERE f.active_copies < f.replication_factor), 0)::bigint,
			COALESCE(sum(f.size_bytes) FILTER (WHERE f.active_copies - d.n < f.replication_factor), 0)::bigint
		FROM down d JOIN files f ON f.id = d.file_id WHERE ` + readableFiles + `
		GROUP BY 1, 2`
	// sqlDurabilityByNode groups by node the healthy copies of the files with
	// one or two of them: those with at most two ACTIVE copies anywhere, and
	// those with more that lost some to down nodes.
	sqlDurabilityByNode = durabilityDown + `, low AS (
			SELECT f.id, f.active_copies - COALESCE(d.n, 0) AS h
			FROM files f LEFT JOIN down d ON d.file_id = f.id
			WHERE ` + readableFiles + ` AND f.active_copies BETWEEN 1 AND 2
			UNION ALL
			SELECT f.id, f.active_copies - d.n
			FROM down d JOIN files f ON f.id = d.file_id
			WHERE ` + readableFiles + ` AND f.active_copies > 2)
		SELECT r.node_id, count(*) FILTER (WHERE low.h = 2), count(*) FILTER (WHERE low.h = 1)
		FROM low JOIN file_replicas r ON r.file_id = low.id
		WHERE low.h BETWEEN 1 AND 2 AND r.status = 'ACTIVE' AND r.node_id = ANY($1)
		GROUP BY r.node_id`

	// The statements above count every row with no chunks of its own, the
	// chunks included (they share the covering index with the whole-file
	// blobs). chunkedDurability corrects that by the file: each readable
	// chunk row is taken out again, and each readable chunked file (its
	// manifest) is counted once, by the fewest healthy copies of its
	// chunks. The chunks of an upload session (their parent is a part, not
	// a manifest) are taken out and never put back: they are no file yet.
	chunkedDurability = durabilityDown + `, chunk AS (
			SELECT c.id, c.parent_id AS pid, c.replication_factor AS rf, c.size_bytes AS size,
				c.active_copies - COALESCE(d.n, 0) AS h
			FROM files c LEFT JOIN down d ON d.file_id = c.id
			WHERE c.parent_id IS NOT NULL AND c.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')),
		chunked AS (
			SELECT m.id, m.replication_factor AS rf, m.size_bytes AS size, min(ch.h) AS h
			FROM chunk ch JOIN files m ON m.id = ch.pid
			WHERE m.parent_id IS NULL AND m.chunk_count > 0
				AND m.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')
			GROUP BY m.id, m.replication_factor, m.size_bytes)
		`
	// sqlDurabilityChunked is the correction of FilesByCopies and
	// BytesAtRisk: per healthy copy count, files added and bytes at risk.
	sqlDurabilityChunked = chunkedDurability + `SELECT h, sum(n), COALESCE(sum(b), 0)::bigint FROM (
			SELECT h, -1 AS n, -(CASE WHEN h < rf THEN size ELSE 0 END) AS b FROM chunk
			UNION ALL
			SELECT h, 1, CASE WHEN h < rf THEN size ELSE 0 END FROM chunked) x
		GROUP BY h`
	// sqlDurabilityChunkedByNode is the correction of the per-node counts: a
	// chunked file with one or two healthy copies loses one to a node's
	// failure when one of its chunks with that fewest count has a copy there;
	// it counts once per node however many such chunks the node holds.
	sqlDurabilityChunkedByNode = chunkedDurability + `SELECT node_id, sum(one), sum(none) FROM (
			SELECT r.node_id, -(CASE WHEN ch.h = 2 THEN 1 ELSE 0 END) AS one,
				-(CASE WHEN ch.h = 1 THEN 1 ELSE 0 END) AS none
			FROM chunk ch JOIN file_replicas r ON r.file_id = ch.id
			WHERE ch.h BETWEEN 1 AND 2 AND r.status = 'ACTIVE' AND r.node_id = ANY($1)
			UNION ALL
			SELECT node_id, max(CASE WHEN h = 2 THEN 1 ELSE 0 END), max(CASE WHEN h = 1 THEN 1 ELSE 0 END) FROM (
				SELECT r.node_id, cf.id, cf.h
				FROM chunked cf JOIN chunk ch ON ch.pid = cf.id AND ch.h = cf.h
					JOIN file_replicas r ON r.file_id = ch.id
				WHERE cf.h BETWEEN 1 AND 2 AND r.status = 'ACTIVE' AND r.node_id = ANY($1)) y
			GROUP BY node_id, id) x
		GROUP BY node_id`
)

// Durability counts the readable files' healthy copies in one snapshot.
func (s *Store) Durability(ctx context.Context, healthyNodes []string) (meta.Durability, error) {
	nodes := slices.Clone(healthyNodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if nodes == nil {
		nodes = []string{}
	}
	d := meta.Durability{Nodes: make([]meta.NodeDurability, len(nodes))}
	err := s.snapshot(ctx, "count durability", func(ctx context.Context, tx pgx.Tx) error {
		// A retried transaction starts from nothing.
		d.FilesByCopies, d.BytesAtRisk = map[int]int{}, 0
		for i := range d.Nodes {
			d.Nodes[i] = meta.NodeDurability{NodeID: nodes[i]}
		}
		rows, err := tx.Query(ctx, sqlDurabilityByActive)
		if err != nil {
			return err
		}
		var active, healthy, files int
		var atRisk, riskAfter int64
		if _, err := pgx.ForEachRow(rows, []any{&active, &files, &atRisk}, func() error {
			d.FilesByCopies[active] += files
			d.BytesAtRisk += atRisk
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, sqlDurabilityDown, nodes)
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&active, &healthy, &files, &atRisk, &riskAfter}, func() error {
			d.FilesByCopies[active] -= files
			d.FilesByCopies[healthy] += files
			d.BytesAtRisk += riskAfter - atRisk
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, sqlDurabilityChunked, nodes)
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&healthy, &files, &atRisk}, func() error {
			d.FilesByCopies[healthy] += files
			d.BytesAtRisk += atRisk
			return nil
		}); err != nil {
			return err
		}
		var id string
		var one, none int
		for _, query := range []string{sqlDurabilityByNode, sqlDurabilityChunkedByNode} {
			rows, err = tx.Query(ctx, query, nodes)
			if err != nil {
				return err
			}
			if _, err := pgx.ForEachRow(rows, []any{&id, &one, &none}, func() error {
				if i, ok := slices.BinarySearch(nodes, id); ok {
					d.Nodes[i].FilesLeftWithOneCopy += one
					d.Nodes[i].FilesLeftWithNoCopy += none
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return meta.Durability{}, err
	}
	for copies, files := range d.FilesByCopies {
		if files == 0 {
			delete(d.FilesByCopies, copies)
		}
	}
	return d, nil
}
