package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// The repair order sorts in the database, by files.active_copies (set by
// the writes that change copies, migration 8): the rows come from the
// primary key (by ID) or from files_durability_idx (by status and copies),
// never from a scan.
const (
	sqlFileIDsByRisk = `SELECT id::text FROM files WHERE id = ANY($1::uuid[])
		ORDER BY status IN ('PENDING', 'DELETED'), active_copies, updated_at, id`
	sqlRepairQueue = `SELECT active_copies, count(*) FROM files
		WHERE status IN ('DEGRADED', 'FAILED') AND chunk_count = 0 GROUP BY active_copies`
)

// FileIDsByRisk orders the existing files among ids for repair.
func (s *Store) FileIDsByRisk(ctx context.Context, ids []string) ([]string, error) {
	if err := rules.CheckFileIDs(ids); err != nil || len(ids) == 0 {
		return []string{}, err
	}
	return s.collectIDs(ctx, "order files by risk", sqlFileIDsByRisk, ids)
}

// RepairQueue counts the DEGRADED and FAILED files by ACTIVE copies.
func (s *Store) RepairQueue(ctx context.Context) (map[int]int, error) {
	queue := map[int]int{}
	err := s.run(ctx, "count the repair queue", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, sqlRepairQueue)
		if err != nil {
			return err
		}
		var copies, files int
		_, err = pgx.ForEachRow(rows, []any{&copies, &files}, func() error {
			queue[copies] += files
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return queue, nil
}
