package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// nodeColumns are the columns a node is written to, and selectNodeColumns
// the same read back, with a NULL disk_id (unknown) or zone as "" and a NULL
// weight as 0.
const (
	nodeColumns = `node_id, host, port, status, registered_at, last_check_at, last_healthy_at,
	consecutive_failures, consecutive_successes, disk_id, zone, weight, zone_override, weight_override, version`
	selectNodeColumns = `node_id, host, port, status, registered_at, last_check_at, last_healthy_at,
	consecutive_failures, consecutive_successes, COALESCE(disk_id, ''), COALESCE(zone, ''), COALESCE(weight, 0),
	zone_override, weight_override, version`
)

func scanNode(row pgx.Row) (meta.Node, error) {
	var n meta.Node
	var status string
	if err := row.Scan(&n.ID, &n.Host, &n.Port, &status, &n.RegisteredAt, &n.LastCheckAt, &n.LastHealthyAt,
		&n.ConsecutiveFailures, &n.ConsecutiveSuccesses, &n.DiskID, &n.Zone, &n.Weight, &n.ZoneOverride, &n.WeightOverride, &n.Version); err != nil {
		return meta.Node{}, err
	}
	n.Status = meta.NodeStatus(status)
	rules.NormalizeNode(&n)
	return n, nil
}

// CreateNode inserts n with version 1. A zero RegisteredAt becomes now.
func (s *Store) CreateNode(ctx context.Context, n *meta.Node) error {
	if err := rules.CheckNode(n); err != nil {
		return err
	}
	c := *n
	if c.RegisteredAt.IsZero() {
		c.RegisteredAt = rules.Now()
	}
	rules.NormalizeNode(&c)
	c.Version = 1
	err := s.run(ctx, "create node "+c.ID, func(ctx context.Context, conn *pgxpool.Conn) error {
		_, err := conn.Exec(ctx, `INSERT INTO storage_nodes (`+nodeColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), NULLIF($11, ''), NULLIF($12, 0::float8), $13, $14, $15)`,
			c.ID, c.Host, c.Port, string(c.Status), c.RegisteredAt, c.LastCheckAt, c.LastHealthyAt,
			c.ConsecutiveFailures, c.ConsecutiveSuccesses, c.DiskID, c.Zone, c.Weight, c.ZoneOverride, c.WeightOverride, c.Version)
		return err
	})
	if errs.Is(err, errs.Conflict) {
		return errs.Wrap(errs.Conflict, err, "storage node %s already exists", c.ID)
	}
	if err != nil {
		return err
	}
	*n = c
	return nil
}

// GetNode returns the node with the given ID.
func (s *Store) GetNode(ctx context.Context, id string) (meta.Node, error) {
	var n meta.Node
	err := s.run(ctx, "get node "+id, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		n, err = scanNode(conn.QueryRow(ctx, `SELECT `+selectNodeColumns+` FROM storage_nodes WHERE node_id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.NodeNotFound(id)
		}
		return err
	})
	return n, err
}

// ListNodes returns every node ordered by ID.
func (s *Store) ListNodes(ctx context.Context) ([]meta.Node, error) {
	nodes := []meta.Node{}
	err := s.run(ctx, "list nodes", func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `SELECT `+selectNodeColumns+` FROM storage_nodes ORDER BY node_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			n, err := scanNode(rows)
			if err != nil {
				return err
			}
			nodes = append(nodes, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// UpdateNode writes every field of n if the stored version is n.Version, then
// increments n.Version.
func (s *Store) UpdateNode(ctx context.Context, n *meta.Node) error {
	if err := rules.CheckNode(n); err != nil {
		return err
	}
	c := *n
	rules.NormalizeNode(&c)
	err := s.run(ctx, "update node "+c.ID, func(ctx context.Context, conn *pgxpool.Conn) error {
		err := conn.QueryRow(ctx, `UPDATE storage_nodes
			SET host = $3, port = $4, status = $5, registered_at = $6, last_check_at = $7, last_healthy_at = $8,
				consecutive_failures = $9, consecutive_successes = $10, disk_id = NULLIF($11, ''), zone = NULLIF($12, ''), weight = NULLIF($13, 0::float8),
				zone_override = $14, weight_override = $15, version = version + 1
			WHERE node_id = $1 AND version = $2
			RETURNING version`,
			c.ID, c.Version, c.Host, c.Port, string(c.Status), c.RegisteredAt, c.LastCheckAt, c.LastHealthyAt,
			c.ConsecutiveFailures, c.ConsecutiveSuccesses, c.DiskID, c.Zone, c.Weight, c.ZoneOverride, c.WeightOverride).Scan(&c.Version)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.staleOrMissing(ctx, conn, `SELECT EXISTS (SELECT 1 FROM storage_nodes WHERE node_id = $1)`,
				c.ID, rules.Stale("storage node", c.ID, c.Version), rules.NodeNotFound(c.ID))
		}
		return err
	})
	if err != nil {
		return err
	}
	*n = c
	return nil
}

// staleOrMissing tells, after an update matched no row, whether the row
// exists (the caller's version is stale) or not.
func (s *Store) staleOrMissing(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, existsSQL, id string, stale, missing error) error {
	var exists bool
	if err := q.QueryRow(ctx, existsSQL, id).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return stale
	}
	return missing
}
