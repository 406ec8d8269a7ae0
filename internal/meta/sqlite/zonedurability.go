package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/dfs-project/dfs/internal/meta"
)

// sqlZoneDurability answers ZoneDurability in one statement. ?1 is a JSON
// object mapping each healthy node to its zone's number (meta.HealthyZones),
// so zones are compared as numbers whatever their names, and a zoneless
// node's zone is a number of its own.
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
// blob puts each readable blob under its file (fid, the rowid of the file
// or of its manifest), with no copy when cb has none for it; the chunks of
// an upload session (their parent is a part, not a manifest) are no file
// yet. fs is each file by its worst blob, loss each file's fewest copies
// left by each zone that leaves it one or none.
//
// The rows are one per zone some file would be left with one copy or none
// by (zone, one, none, 0), then one with a NULL zone: (files, fewest zones,
// collapsed files, 0).
const sqlZoneDurability = `WITH hz AS MATERIALIZED (SELECT key AS node_id, value AS zone FROM json_each(?1)),
		cb AS MATERIALIZED (
			SELECT r.file_id AS id, count(*) AS h, count(DISTINCT z.zone) AS zc,
				min(z.zone) AS z1, max(z.zone) AS z2, sum(z.zone) AS zs
			FROM file_replicas r CROSS JOIN hz z ON z.node_id = r.node_id
			WHERE r.status = 'ACTIVE'
			GROUP BY r.file_id),
		blob AS MATERIALIZED (
			SELECT f.rowid AS fid, COALESCE(cb.h, 0) AS h, COALESCE(cb.zc, 0) AS zc, cb.z1, cb.z2, cb.zs
			FROM files f LEFT JOIN cb ON cb.id = f.id
			WHERE f.parent_id IS NULL AND f.chunk_count = 0
				AND f.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')
			UNION ALL
			SELECT m.rowid, COALESCE(cb.h, 0), COALESCE(cb.zc, 0), cb.z1, cb.z2, cb.zs
			FROM files c INDEXED BY files_parent_idx CROSS JOIN files m ON m.id = c.parent_id LEFT JOIN cb ON cb.id = c.id
			WHERE c.parent_id IS NOT NULL AND c.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')
				AND m.parent_id IS NULL AND m.chunk_count > 0
				AND m.status IN ('ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED')),
		fs AS MATERIALIZED (
			SELECT fid, min(h) AS h, min(zc) AS zc,
				max(zc < min(h, (SELECT count(DISTINCT zone) FROM hz))) AS collapsed
			FROM blob GROUP BY fid),
		loss AS (
			SELECT fid, zone, min(m) AS m FROM (
				SELECT fid, z1 AS zone, CASE WHEN zc = 1 THEN 0 ELSE h - (h * z2 - zs) / (z2 - z1) END AS m
				FROM blob WHERE zc IN (1, 2)
				UNION ALL
				SELECT fid, z2, (h * z2 - zs) / (z2 - z1) FROM blob WHERE zc = 2)
			WHERE m <= 1
			GROUP BY fid, zone)
		SELECT l.zone, sum(l.m = 1 AND f.h >= 2), sum(l.m = 0 AND f.h >= 1), 0
		FROM loss l CROSS JOIN fs f ON f.fid = l.fid
		GROUP BY l.zone
		UNION ALL
		SELECT NULL, count(*), COALESCE(min(zc), 0), COALESCE(sum(collapsed), 0) FROM fs`

// ZoneDurability counts what a whole zone's failure would do now, in one
// statement.
func (s *Store) ZoneDurability(ctx context.Context, healthyZones map[string]string) (meta.ZoneDurability, error) {
	zones, index := meta.HealthyZones(healthyZones)
	list, err := json.Marshal(index)
	if err != nil {
		return meta.ZoneDurability{}, err
	}
	z := meta.ZoneDurability{Zones: zones}
	err = s.readTx(ctx, "count zone durability", func(tx *sql.Tx) error {
		return eachRow(ctx, tx, sqlZoneDurability, string(list), func(rows *sql.Rows) error {
			var zone sql.NullInt64
			var a, b, c int
			if err := rows.Scan(&zone, &a, &b, &c); err != nil {
				return err
			}
			switch {
			case !zone.Valid:
				z.Files, z.MinZones, z.Collapsed = a, b, c
			case zone.Int64 >= 0 && int(zone.Int64) < len(z.Zones):
				z.Zones[zone.Int64].FilesLeftWithOneCopy = a
				z.Zones[zone.Int64].FilesLeftWithNoCopy = b
			}
			return nil
		})
	})
	if err != nil {
		return meta.ZoneDurability{}, err
	}
	return z, nil
}
