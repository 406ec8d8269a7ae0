package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// BumpMembershipEpoch adds one to the membership epoch. It is a write like
// any other, through the committer: members of a batch run one after
// another, so concurrent bumps each return a value of their own.
func (s *Store) BumpMembershipEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	err := s.writeTx(ctx, "bump membership epoch", func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE rebalance_epochs SET membership = membership + 1 WHERE id = 1 RETURNING membership`).Scan(&epoch)
		if errors.Is(err, sql.ErrNoRows) {
			return rules.NoEpochs()
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return epoch, nil
}

// Epochs reads the membership and rebalanced epochs (committed values only,
// like every read of the store).
func (s *Store) Epochs(ctx context.Context) (meta.Epochs, error) {
	var e meta.Epochs
	err := s.read.QueryRowContext(ctx, `SELECT membership, rebalanced FROM rebalance_epochs WHERE id = 1`).Scan(&e.Membership, &e.Rebalanced)
	if errors.Is(err, sql.ErrNoRows) {
		return meta.Epochs{}, rules.NoEpochs()
	}
	if err != nil {
		return meta.Epochs{}, fail(ctx, err, "read epochs")
	}
	return e, nil
}

// CompleteRebalance raises the rebalanced epoch to epoch, capped by the
// membership epoch, in one statement.
func (s *Store) CompleteRebalance(ctx context.Context, epoch int64) error {
	if err := rules.CheckEpoch(epoch); err != nil {
		return err
	}
	return s.writeTx(ctx, "complete rebalance", func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE rebalance_epochs
			SET rebalanced = max(rebalanced, min(?, membership)) WHERE id = 1`, epoch)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			return rules.NoEpochs()
		}
		return err
	})
}

// MarkNodeCopiesLost marks the node's ACTIVE copies FAILED and their files
// DEGRADED (see meta.Store), in one write transaction.
func (s *Store) MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error) {
	ids := []string{}
	err := s.writeTx(ctx, "mark copies on "+nodeID+" lost", func(ctx context.Context, tx *sql.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, `SELECT r.file_id FROM file_replicas r JOIN files f ON f.id = r.file_id
			WHERE r.node_id = ? AND r.status = 'ACTIVE' AND f.status NOT IN ('PENDING', 'DELETED')
			ORDER BY r.file_id`, nodeID)
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
		now := micros(rules.Now())
		var parents []string
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE file_replicas SET status = 'FAILED', updated_at = ?, version = version + 1
				WHERE file_id = ? AND node_id = ?`, now, id, nodeID); err != nil {
				return err
			}
			var parent string
			if err := tx.QueryRowContext(ctx, `UPDATE files
				SET status = CASE WHEN status = 'ACTIVE' THEN 'DEGRADED' ELSE status END,
					status_reason = CASE WHEN status IN ('ACTIVE', 'DEGRADED') THEN ? ELSE status_reason END,
					updated_at = ?, version = version + 1, active_copies = active_copies - 1
				WHERE id = ? RETURNING COALESCE(parent_id, '')`, reason, now, id).Scan(&parent); err != nil {
				return err
			}
			parents = append(parents, parent)
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
