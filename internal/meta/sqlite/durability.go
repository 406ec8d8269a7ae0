package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"

	"github.com/dfs-project/dfs/internal/meta"
)

// The healthy nodes travel as one JSON array bound to ?1, so the statements
// stay the same for any number of nodes.
//
// files.active_copies (set by the writes that change copies, migration 8)
// is every file's count of ACTIVE copies on any node; a file's healthy
// copies are that minus its ACTIVE copies on the nodes that are not
// healthy. So the answer is a GROUP BY over the files_durability_idx
// covering index, corrected by the copies on down nodes, found through
// file_replicas_node_status_idx: the work grows with what is at risk, not
// with every copy of every file. CROSS JOIN fixes
// SQLite's join order: from the few files at risk to their rows, never
// from every row to a probe of the few. The unary + in the last statement
// keeps SQLite from probing file_replicas once per file and healthy node;
// it reads each file's few copies instead.
const (
	// durabilityDown is each file's ACTIVE copies on a node that is not
	// healthy; every copy's node is a storage_nodes row (a foreign key).
	durabilityDown = `WITH down AS MATERIALIZED (
			SELECT r.file_id, count(*) AS n FROM file_replicas r
			WHERE r.status = 'ACTIVE' AND r.node_id IN (
				SELECT node_id FROM storage_nodes WHERE node_id NOT IN (SELECT value FROM json_each(?1)))
			GROUP BY r.file_id)
		`
	readableFiles = `f.chunk_count = 0 AND f.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')`

	// Grouped by status too, so that the groups follow the index's order.
	sqlDurabilityByActive = `SELECT f.active_copies, count(*),
			COALESCE(sum(CASE WHEN f.active_copies < f.replication_factor THEN f.size_bytes ELSE 0 END), 0)
		FROM files f WHERE ` + readableFiles + ` GROUP BY f.status, f.active_copies`
	// sqlDurabilityDown moves the files with copies on down nodes from the
	// bucket of their ACTIVE copies to that of their healthy ones.
	sqlDurabilityDown = durabilityDown + `SELECT f.active_copies, f.active_copies - d.n, count(*),
			COALESCE(sum(CASE WHEN f.active_copies < f.replication_factor THEN f.size_bytes ELSE 0 END), 0),
			COALESCE(sum(CASE WHEN f.active_copies - d.n < f.replication_factor THEN f.size_bytes ELSE 0 END), 0)
		FROM down d CROSS JOIN files f ON f.id = d.file_id WHERE ` + readableFiles + `
		GROUP BY 1, 2`
	// sqlDurabilityByNode groups by node the healthy copies of the files with
	// one or two of them: those with at most two ACTIVE copies anywhere, and
	// those with more that lost some to down nodes.
	sqlDurabilityByNode = durabilityDown + `, low AS (
			SELECT id, h FROM (
				SELECT f.id, f.active_copies - COALESCE(d.n, 0) AS h
				FROM files f LEFT JOIN down d ON d.file_id = f.id
				WHERE ` + readableFiles + ` AND f.active_copies BETWEEN 1 AND 2
				UNION ALL
				SELECT f.id, f.active_copies - d.n
				FROM down d CROSS JOIN files f ON f.id = d.file_id
				WHERE ` + readableFiles + ` AND f.active_copies > 2)
			WHERE h BETWEEN 1 AND 2)
		SELECT r.node_id, sum(low.h = 2), sum(low.h = 1)
		FROM low CROSS JOIN file_replicas r ON r.file_id = low.id
		WHERE r.status = 'ACTIVE' AND +r.node_id IN (SELECT value FROM json_each(?1))
		GROUP BY r.node_id`

	// The statements above count every row with no chunks of its own, the
	// chunks included (they share the covering index with the whole-file
	// blobs). chunkedDurability corrects that by the file: each readable
	// chunk row is taken out again, and each readable chunked file (its
	// manifest) is counted once, by the fewest healthy copies of its
	// chunks. The chunks of an upload session (their parent is a part, not
	// a manifest) are taken out and never put back: they are no file yet.
	// The chunks are read once (MATERIALIZED) through files_parent_idx, the
	// rows that have a parent, not through the status of every file.
	chunkedDurability = durabilityDown + `, chunk AS MATERIALIZED (
			SELECT c.id, c.parent_id AS pid, c.replication_factor AS rf, c.size_bytes AS size,
				c.active_copies - COALESCE(d.n, 0) AS h
			FROM files c INDEXED BY files_parent_idx LEFT JOIN down d ON d.file_id = c.id
			WHERE c.parent_id IS NOT NULL AND c.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')),
		chunked AS (
			SELECT m.id, m.replication_factor AS rf, m.size_bytes AS size, min(ch.h) AS h
			FROM chunk ch CROSS JOIN files m ON m.id = ch.pid
			WHERE m.parent_id IS NULL AND m.chunk_count > 0
				AND m.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')
			GROUP BY m.id, m.replication_factor, m.size_bytes)
		`
	// sqlDurabilityChunked is the correction of FilesByCopies and
	// BytesAtRisk: per healthy copy count, files added and bytes at risk.
	sqlDurabilityChunked = chunkedDurability + `SELECT h, sum(n), COALESCE(sum(b), 0) FROM (
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
			FROM chunk ch CROSS JOIN file_replicas r ON r.file_id = ch.id
			WHERE ch.h BETWEEN 1 AND 2 AND r.status = 'ACTIVE' AND +r.node_id IN (SELECT value FROM json_each(?1))
			UNION ALL
			SELECT node_id, max(CASE WHEN h = 2 THEN 1 ELSE 0 END), max(CASE WHEN h = 1 THEN 1 ELSE 0 END) FROM (
				SELECT r.node_id, cf.id, cf.h
				FROM chunked cf CROSS JOIN chunk ch ON ch.pid = cf.id AND ch.h = cf.h
					CROSS JOIN file_replicas r ON r.file_id = ch.id
				WHERE cf.h BETWEEN 1 AND 2 AND r.status = 'ACTIVE' AND +r.node_id IN (SELECT value FROM json_each(?1))) y
			GROUP BY node_id, id) x
		GROUP BY node_id`
)

// Durability counts the readable files' healthy copies in one read snapshot.
func (s *Store) Durability(ctx context.Context, healthyNodes []string) (meta.Durability, error) {
	nodes := slices.Clone(healthyNodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	list, err := json.Marshal(append([]string{}, nodes...))
	if err != nil {
		return meta.Durability{}, err
	}
	d := meta.Durability{FilesByCopies: map[int]int{}, Nodes: make([]meta.NodeDurability, len(nodes))}
	for i, id := range nodes {
		d.Nodes[i].NodeID = id
	}
	err = s.readTx(ctx, "count durability", func(tx *sql.Tx) error {
		if err := eachRow(ctx, tx, sqlDurabilityByActive, nil, func(rows *sql.Rows) error {
			var copies, files int
			var atRisk int64
			if err := rows.Scan(&copies, &files, &atRisk); err != nil {
				return err
			}
			d.FilesByCopies[copies] += files
			d.BytesAtRisk += atRisk
			return nil
		}); err != nil {
			return err
		}
		if err := eachRow(ctx, tx, sqlDurabilityDown, string(list), func(rows *sql.Rows) error {
			var active, healthy, files int
			var riskBefore, riskAfter int64
			if err := rows.Scan(&active, &healthy, &files, &riskBefore, &riskAfter); err != nil {
				return err
			}
			d.FilesByCopies[active] -= files
			d.FilesByCopies[healthy] += files
			d.BytesAtRisk += riskAfter - riskBefore
			return nil
		}); err != nil {
			return err
		}
		if err := eachRow(ctx, tx, sqlDurabilityChunked, string(list), func(rows *sql.Rows) error {
			var copies, files int
			var atRisk int64
			if err := rows.Scan(&copies, &files, &atRisk); err != nil {
				return err
			}
			d.FilesByCopies[copies] += files
			d.BytesAtRisk += atRisk
			return nil
		}); err != nil {
			return err
		}
		for _, query := range []string{sqlDurabilityByNode, sqlDurabilityChunkedByNode} {
			if err := eachRow(ctx, tx, query, string(list), func(rows *sql.Rows) error {
				var id string
				var one, none int
				if err := rows.Scan(&id, &one, &none); err != nil {
					return err
				}
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

// eachRow runs query (with arg unless it is nil) and calls fn on every row.
func eachRow(ctx context.Context, tx *sql.Tx, query string, arg any, fn func(*sql.Rows) error) error {
	var args []any
	if arg != nil {
		args = []any{arg}
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
