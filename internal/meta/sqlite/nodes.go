package sqlite

import (
	"context"
	"database/sql"
	"errors"

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

type scanner interface{ Scan(dest ...any) error }

func scanNode(row scanner) (meta.Node, error) {
	var n meta.Node
	var status string
	var registered int64
	var lastCheck, lastHealthy sql.NullInt64
	var zoneOverride sql.NullString
	var weightOverride sql.NullFloat64
	if err := row.Scan(&n.ID, &n.Host, &n.Port, &status, &registered, &lastCheck, &lastHealthy,
		&n.ConsecutiveFailures, &n.ConsecutiveSuccesses, &n.DiskID, &n.Zone, &n.Weight, &zoneOverride, &weightOverride, &n.Version); err != nil {
		return meta.Node{}, err
	}
	if zoneOverride.Valid {
		n.ZoneOverride = &zoneOverride.String
	}
	if weightOverride.Valid {
		n.WeightOverride = &weightOverride.Float64
	}
	n.Status = meta.NodeStatus(status)
	n.RegisteredAt = fromMicros(registered)
	n.LastCheckAt, n.LastHealthyAt = fromMicrosPtr(lastCheck), fromMicrosPtr(lastHealthy)
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
	err := s.writeTx(ctx, "create node "+c.ID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO storage_nodes (`+nodeColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''), NULLIF(?, 0.0), ?, ?, ?)`,
			c.ID, c.Host, c.Port, string(c.Status), micros(c.RegisteredAt), microsPtr(c.LastCheckAt), microsPtr(c.LastHealthyAt),
			c.ConsecutiveFailures, c.ConsecutiveSuccesses, c.DiskID, c.Zone, c.Weight, c.ZoneOverride, c.WeightOverride, c.Version)
		return err
	})
	if err != nil {
		if errs.Is(err, errs.Conflict) {
			return errs.Wrap(errs.Conflict, err, "storage node %s already exists", c.ID)
		}
		return err
	}
	*n = c
	return nil
}

// GetNode returns the node with the given ID.
func (s *Store) GetNode(ctx context.Context, id string) (meta.Node, error) {
	n, err := scanNode(s.read.QueryRowContext(ctx, `SELECT `+selectNodeColumns+` FROM storage_nodes WHERE node_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return meta.Node{}, rules.NodeNotFound(id)
	}
	if err != nil {
		return meta.Node{}, fail(ctx, err, "get node "+id)
	}
	return n, nil
}

// ListNodes returns every node ordered by ID.
func (s *Store) ListNodes(ctx context.Context) ([]meta.Node, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+selectNodeColumns+` FROM storage_nodes ORDER BY node_id`)
	if err != nil {
		return nil, fail(ctx, err, "list nodes")
	}
	defer rows.Close()
	nodes := []meta.Node{}
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fail(ctx, err, "list nodes")
		}
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, err, "list nodes")
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
	err := s.writeTx(ctx, "update node "+c.ID, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE storage_nodes
			SET host = ?, port = ?, status = ?, registered_at = ?, last_check_at = ?, last_healthy_at = ?,
				consecutive_failures = ?, consecutive_successes = ?, disk_id = NULLIF(?, ''), zone = NULLIF(?, ''), weight = NULLIF(?, 0.0),
				zone_override = ?, weight_override = ?, version = version + 1
			WHERE node_id = ? AND version = ?
			RETURNING version`,
			c.Host, c.Port, string(c.Status), micros(c.RegisteredAt), microsPtr(c.LastCheckAt), microsPtr(c.LastHealthyAt),
			c.ConsecutiveFailures, c.ConsecutiveSuccesses, c.DiskID, c.Zone, c.Weight, c.ZoneOverride, c.WeightOverride, c.ID, c.Version).Scan(&c.Version)
		if errors.Is(err, sql.ErrNoRows) {
			return staleOrMissing(ctx, tx, `SELECT EXISTS (SELECT 1 FROM storage_nodes WHERE node_id = ?)`,
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
func staleOrMissing(ctx context.Context, tx *sql.Tx, existsSQL, id string, stale, missing error) error {
	var exists bool
	if err := tx.QueryRowContext(ctx, existsSQL, id).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return stale
	}
	return missing
}
