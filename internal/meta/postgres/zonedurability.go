package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/dfs-project/dfs/internal/meta"
)

// sqlZoneDurability answers ZoneDurability in one statement. $1 and $2 are
// the healthy nodes and their zones' numbers (meta.HealthyZones), side by
// side, so zones are compared as numbers whatever their names, and a
// zoneless node's zone is a number of its own.
//
// Unlike Durability this reads every healthy copy: which zones a file's
// copies are in is kept nowhere else. cb is one pass over the copies,
// grouped by blob (a whole file or a chunk): its healthy copies (h), their
// distinct zones (zc), the lowest and highest zone (z1, z2) and the sum of
// the copies' zone numbers (zs). A zone's failure leaves a blob h - n
// copies, n being its copies in the zone, which is 1 or 0 only when zc is
// 1 or 2: with three zones or more every zone leaves at least two. With two,
// z1 holds n1 = (h * z2 - zs) / (z2 - z1) of them and z2 the rest, so no
// second grouping by zone is needed.
//
// blob puts each readable blob under its file (fid, the file or its
// manifest), with no copy when cb has none for it; the chunks of an upload
// session (their parent is a part, not a manifest) are no file yet. fs is
// each file by its worst blob, loss each file's fewest copies left by each
// zone that leaves it one or none.
//
// The rows are one per zone some file would be left with one copy or none
// by (zone, one, none, 0), then one with a NULL zone: (files, fewest zones,
// collapsed files, 0).
const sqlZoneDurability = `WITH hz AS MATERIALIZED (SELECT * FROM unnest($1::text[], $2::int[]) AS hz (node_id, zone)),
		cb AS MATERIALIZED (
			SELECT r.file_id AS id, count(*)::int AS h, count(DISTINCT z.zone)::int AS zc,
				min(z.zone) AS z1, max(z.zone) AS z2, sum(z.zone)::int AS zs
			FROM file_replicas r JOIN hz z ON z.node_id = r.node_id
			WHERE r.status = 'ACTIVE'
			GROUP BY r.file_id),
		blob AS MATERIALIZED (
			SELECT f.id AS fid, COALESCE(cb.h, 0) AS h, COALESCE(cb.zc, 0) AS zc, cb.z1, cb.z2, cb.zs
			FROM files f LEFT JOIN cb ON cb.id = f.id
			WHERE f.parent_id IS NULL AND f.chunk_count = 0
				AND f.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')
			UNION ALL
			SELECT m.id, COALESCE(cb.h, 0), COALESCE(cb.zc, 0), cb.z1, cb.z2, cb.zs
			FROM files c JOIN files m ON m.id = c.parent_id LEFT JOIN cb ON cb.id = c.id
			WHERE c.parent_id IS NOT NULL AND c.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')
				AND m.parent_id IS NULL AND m.chunk_count > 0
				AND m.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')),
		fs AS MATERIALIZED (
			SELECT fid, min(h) AS h, min(zc) AS zc,
				bool_or(zc < LEAST(h, (SELECT count(DISTINCT zone) FROM hz))) AS collapsed
			FROM blob GROUP BY fid),
		loss AS (
			SELECT fid, zone, min(m) AS m FROM (
				SELECT fid, z1 AS zone, CASE WHEN zc = 1 THEN 0 ELSE h - (h * z2 - zs) / (z2 - z1) END AS m
				FROM blob WHERE zc IN (1, 2)
				UNION ALL
				SELECT fid, z2, (h * z2 - zs) / (z2 - z1) FROM blob WHERE zc = 2) x
			WHERE m <= 1
			GROUP BY fid, zone)
		SELECT l.zone, count(*) FILTER (WHERE l.m = 1 AND f.h >= 2), count(*) FILTER (WHERE l.m = 0 AND f.h >= 1), 0::bigint
		FROM loss l JOIN fs f ON f.fid = l.fid
		GROUP BY l.zone
		UNION ALL
		SELECT NULL, count(*), COALESCE(min(zc), 0), count(*) FILTER (WHERE collapsed) FROM fs`

// ZoneDurability counts what a whole zone's failure would do now, in one
// statement.
func (s *Store) ZoneDurability(ctx context.Context, healthyZones map[string]string) (meta.ZoneDurability, error) {
	zones, index := meta.HealthyZones(healthyZones)
	nodes, numbers := make([]string, 0, len(index)), make([]int32, 0, len(index))
	for node, i := range index {
		nodes, numbers = append(nodes, node), append(numbers, int32(i))
	}
	var z meta.ZoneDurability
	err := s.snapshot(ctx, "count zone durability", func(ctx context.Context, tx pgx.Tx) error {
		// A retried transaction starts from nothing.
		z = meta.ZoneDurability{Zones: make([]meta.ZoneRisk, len(zones))}
		copy(z.Zones, zones)
		rows, err := tx.Query(ctx, sqlZoneDurability, nodes, numbers)
		if err != nil {
			return err
		}
		var zone *int32
		var a, b, c int
		_, err = pgx.ForEachRow(rows, []any{&zone, &a, &b, &c}, func() error {
			switch {
			case zone == nil:
				z.Files, z.MinZones, z.Collapsed = a, b, c
			case *zone >= 0 && int(*zone) < len(z.Zones):
				z.Zones[*zone].FilesLeftWithOneCopy = a
				z.Zones[*zone].FilesLeftWithNoCopy = b
			}
			return nil
		})
		return err
	})
	if err != nil {
		return meta.ZoneDurability{}, err
	}
	return z, nil
}
