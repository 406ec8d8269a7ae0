package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// BumpMembershipEpoch adds one to the membership epoch. The UPDATE takes the
// row's lock, so concurrent bumps, from any coordinator, queue and each
// returns a value of its own.
func (s *Store) BumpMembershipEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	err := s.run(ctx, "bump membership epoch", func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `UPDATE rebalance_epochs SET membership = membership + 1 WHERE id = 1 RETURNING membership`).Scan(&epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.NoEpochs()
		}
		return err
	})
	return epoch, err
}

// Epochs reads the membership and rebalanced epochs.
func (s *Store) Epochs(ctx context.Context) (meta.Epochs, error) {
	var e meta.Epochs
	err := s.run(ctx, "read epochs", func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `SELECT membership, rebalanced FROM rebalance_epochs WHERE id = 1`).Scan(&e.Membership, &e.Rebalanced)
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.NoEpochs()
		}
		return err
	})
	return e, err
}

// CompleteRebalance raises the rebalanced epoch to epoch, capped by the
// membership epoch, in one statement so that it cannot race a bump or
// another completion.
func (s *Store) CompleteRebalance(ctx context.Context, epoch int64) error {
	if err := rules.CheckEpoch(epoch); err != nil {
		return err
	}
	return s.run(ctx, "complete rebalance", func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE rebalance_epochs
			SET rebalanced = GREATEST(rebalanced, LEAST($1, membership)) WHERE id = 1`, epoch)
		if err == nil && tag.RowsAffected() == 0 {
			return rules.NoEpochs()
		}
		return err
	})
}

// MarkNodeCopiesLost marks the node's ACTIVE copies FAILED and their files
// DEGRADED (see meta.Store), in one transaction.
func (s *Store) MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error) {
	ids := []string{}
	err := s.tx(ctx, "mark copies on "+nodeID+" lost", func(ctx context.Context, tx pgx.Tx) error {
		ids = ids[:0]
		// The files' rows are locked first, in ID order, as UpdateFile locks
		// a file before its copies: the two cannot deadlock.
		rows, err := tx.Query(ctx, `SELECT f.id::text FROM files f JOIN file_replicas r ON r.file_id = f.id
			WHERE r.node_id = $1 AND r.status = 'ACTIVE' AND f.status NOT IN ('PENDING', 'DELETED')
			ORDER BY f.id FOR UPDATE OF f`, nodeID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE file_replicas SET status = 'FAILED', updated_at = $3, version = version + 1
			WHERE node_id = $1 AND status = 'ACTIVE' AND file_id = ANY($2::uuid[])`, nodeID, ids, rules.Now()); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `UPDATE files
			SET status = CASE WHEN status = 'ACTIVE' THEN 'DEGRADED' ELSE status END,
				status_reason = CASE WHEN status IN ('ACTIVE', 'DEGRADED') THEN $2 ELSE status_reason END,
				updated_at = $3, version = version + 1, active_copies = active_copies - 1
			WHERE id = ANY($1::uuid[]) RETURNING COALESCE(parent_id::text, '')`, ids, reason, rules.Now())
		if err != nil {
			return err
		}
		parents, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		// The chunked files of the chunks that lost a copy follow them.
		set, err := refreshManifests(ctx, tx, parents...)
		ids = rules.ChangedIDs(ids, set)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
