package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// The repair order sorts in the database, by files.active_copies (set by
// the writes that change copies, migration 8): the rows come from the
// primary key (the IDs travel as one JSON array, so the statement is the
// same for any number) or from files_durability_idx (by status and
// copies), never from a scan.
const (
	sqlFileIDsByRisk = `SELECT id FROM files WHERE id IN (SELECT value FROM json_each(?))
		ORDER BY status IN ('PENDING', 'DELETED'), active_copies, updated_at, id`
	sqlRepairQueue = `SELECT active_copies, count(*) FROM files
		WHERE status IN ('DEGRADED', 'FAILED') AND chunk_count = 0 GROUP BY status, active_copies`
)

// FileIDsByRisk orders the existing files among ids for repair.
func (s *Store) FileIDsByRisk(ctx context.Context, ids []string) ([]string, error) {
	if err := rules.CheckFileIDs(ids); err != nil || len(ids) == 0 {
		return []string{}, err
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	out, err := s.collectIDs(ctx, []string{}, sqlFileIDsByRisk, string(list))
	return out, fail(ctx, err, "order files by risk")
}

// RepairQueue counts the DEGRADED and FAILED files by ACTIVE copies.
func (s *Store) RepairQueue(ctx context.Context) (map[int]int, error) {
	queue := map[int]int{}
	err := s.readTx(ctx, "count the repair queue", func(tx *sql.Tx) error {
		return eachRow(ctx, tx, sqlRepairQueue, nil, func(rows *sql.Rows) error {
			var copies, files int
			if err := rows.Scan(&copies, &files); err != nil {
				return err
			}
			queue[copies] += files
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return queue, nil
}
