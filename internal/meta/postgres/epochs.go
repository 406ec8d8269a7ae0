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
