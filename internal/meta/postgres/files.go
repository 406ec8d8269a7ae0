package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// fileColumns are read with COALESCE so that optional text columns, NULL when
// empty, scan into plain strings.
const fileColumns = `f.id::text, f.file_name, f.content_type, f.size_bytes, COALESCE(f.checksum, ''), f.status,
	COALESCE(f.status_reason, ''), COALESCE(f.primary_node_id, ''), f.replication_factor, f.ring_position,
	COALESCE(f.idempotency_key, ''), f.created_at, f.updated_at, f.version,
	COALESCE(f.parent_id::text, ''), f.chunk_part, f.chunk_index, f.chunk_offset, f.chunk_count`

func fileDest(f *meta.File, status *string) []any {
	return []any{&f.ID, &f.Name, &f.ContentType, &f.SizeBytes, &f.Checksum, status, &f.StatusReason,
		&f.PrimaryNodeID, &f.ReplicationFactor, &f.RingPosition, &f.IdempotencyKey, &f.CreatedAt, &f.UpdatedAt, &f.Version,
		&f.Chunk.ParentID, &f.Chunk.Part, &f.Chunk.Index, &f.Chunk.Offset, &f.ChunkCount}
}

func finishFile(f *meta.File, status string) {
	f.Status = meta.FileStatus(status)
	f.CreatedAt = rules.Time(f.CreatedAt)
	f.UpdatedAt = rules.Time(f.UpdatedAt)
}

// getRecord reads a file and its replicas in one statement, so the two are
// one snapshot. where selects the file by $1.
func getRecord(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, where string, arg any) (meta.FileRecord, bool, error) {
	rows, err := q.Query(ctx, `SELECT `+fileColumns+`,
			r.id, r.node_id, r.status, r.created_at, r.updated_at, r.version
		FROM files f LEFT JOIN file_replicas r ON r.file_id = f.id
		WHERE `+where+`
		ORDER BY r.node_id`, arg)
	if err != nil {
		return meta.FileRecord{}, false, err
	}
	defer rows.Close()
	var rec meta.FileRecord
	found := false
	for rows.Next() {
		var status string
		var rID, rVersion *int64
		var rNode, rStatus *string
		var rCreated, rUpdated *time.Time
		dest := append(fileDest(&rec.File, &status), &rID, &rNode, &rStatus, &rCreated, &rUpdated, &rVersion)
		if err := rows.Scan(dest...); err != nil {
			return meta.FileRecord{}, false, err
		}
		finishFile(&rec.File, status)
		found = true
		if rID == nil {
			continue
		}
		rec.Replicas = append(rec.Replicas, meta.Replica{
			ID: *rID, FileID: rec.ID, NodeID: *rNode, Status: meta.ReplicaStatus(*rStatus),
			CreatedAt: rules.Time(*rCreated), UpdatedAt: rules.Time(*rUpdated), Version: *rVersion,
		})
	}
	return rec, found, rows.Err()
}

// GetFile returns the file with its replicas ordered by node ID. An ID that
// is not a canonical UUID names no file.
func (s *Store) GetFile(ctx context.Context, id string) (meta.FileRecord, error) {
	if !rules.CanonicalFileID(id) {
		return meta.FileRecord{}, rules.FileNotFound(id)
	}
	var rec meta.FileRecord
	err := s.run(ctx, "get file "+id, func(ctx context.Context, c *pgxpool.Conn) error {
		var found bool
		var err error
		rec, found, err = getRecord(ctx, c, `f.id = $1`, id)
		if err == nil && !found {
			return rules.FileNotFound(id)
		}
		return err
	})
	return rec, err
}

// FileByIdempotencyKey finds the file created with key.
func (s *Store) FileByIdempotencyKey(ctx context.Context, key string) (meta.FileRecord, error) {
	if key == "" {
		return meta.FileRecord{}, errs.E(errs.NotFound, "no file has an empty idempotency key")
	}
	var rec meta.FileRecord
	err := s.run(ctx, "find file by idempotency key", func(ctx context.Context, c *pgxpool.Conn) error {
		var found bool
		var err error
		rec, found, err = getRecord(ctx, c, `f.idempotency_key = $1`, key)
		if err == nil && !found {
			return errs.WithCode(errs.NotFound, errs.CodeFileNotFound, nil, "no file has idempotency key %s", key)
		}
		return err
	})
	return rec, err
}

// CreateFile inserts rec and its replicas in one transaction.
func (s *Store) CreateFile(ctx context.Context, rec *meta.FileRecord) error {
	if err := rules.CheckFile(rec); err != nil {
		return err
	}
	c := rules.NewRecord(rec)
	err := s.tx(ctx, "create file "+c.ID, func(ctx context.Context, tx pgx.Tx) error {
		return tx.SendBatch(ctx, insertRecord(&c)).Close()
	})
	if err != nil {
		return rules.CreateFailed(c.ID, err)
	}
	*rec = c
	return nil
}

// CreateFileAndPutObject is CreateFile of rec and PutObject of o in one
// transaction.
func (s *Store) CreateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	if err := rules.CheckFile(rec); err != nil {
		return "", err
	}
	if err := prepareObject(o); err != nil {
		return "", err
	}
	c := rules.NewRecord(rec)
	var replaced string
	err := s.tx(ctx, "create file "+c.ID+" and put object "+o.Bucket+"/"+o.Key, func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.SendBatch(ctx, insertRecord(&c)).Close(); err != nil {
			return err
		}
		var err error
		replaced, err = putObject(ctx, tx, o)
		return err
	})
	if err != nil {
		return "", rules.CreateFailed(c.ID, err)
	}
	*rec = c
	return replaced, nil
}

// insertRecord is the batch of CreateFile's inserts; running it fills in
// c's replica ids.
func insertRecord(c *meta.FileRecord) *pgx.Batch {
	b := &pgx.Batch{}
	insertFile(b, c)
	for i := range c.Replicas {
		r := &c.Replicas[i]
		r.CreatedAt, r.UpdatedAt, r.Version = c.UpdatedAt, c.UpdatedAt, 1
		insertReplica(b, r)
	}
	return b
}

// insertFile queues the insert of c's file row.
func insertFile(b *pgx.Batch, c *meta.FileRecord) {
	b.Queue(`INSERT INTO files (id, file_name, content_type, size_bytes, checksum, status, status_reason,
			primary_node_id, replication_factor, ring_position, idempotency_key, created_at, updated_at, version,
			parent_id, chunk_part, chunk_index, chunk_offset, chunk_count, active_copies)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, NULLIF($7, ''), NULLIF($8, ''), $9, $10, NULLIF($11, ''), $12, $13, 1,
			NULLIF($14, '')::uuid, $15, $16, $17, $18, $19)`,
		c.ID, c.Name, c.ContentType, c.SizeBytes, c.Checksum, string(c.Status), c.StatusReason,
		c.PrimaryNodeID, c.ReplicationFactor, c.RingPosition, c.IdempotencyKey, c.CreatedAt, c.UpdatedAt,
		c.Chunk.ParentID, c.Chunk.Part, c.Chunk.Index, c.Chunk.Offset, c.ChunkCount, c.ActiveCopies())
}

func insertReplica(b *pgx.Batch, r *meta.Replica) {
	b.Queue(`INSERT INTO file_replicas (file_id, node_id, status, created_at, updated_at, version)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		r.FileID, r.NodeID, string(r.Status), r.CreatedAt, r.UpdatedAt, r.Version,
	).QueryRow(func(row pgx.Row) error { return row.Scan(&r.ID) })
}

// UpdateFile writes rec's fields (all but ID and CreatedAt) and replaces its
// replica set, if the stored version is rec.Version.
func (s *Store) UpdateFile(ctx context.Context, rec *meta.FileRecord) error {
	if err := rules.CheckFile(rec); err != nil {
		if !rules.CanonicalFileID(rec.ID) {
			return rules.FileNotFound(rec.ID)
		}
		return err
	}
	c := rules.CloneRecord(rec)
	t := rules.Now()
	err := s.tx(ctx, "update file "+c.ID, func(ctx context.Context, tx pgx.Tx) error {
		return s.updateFile(ctx, tx, &c, t)
	})
	if err != nil {
		return err
	}
	*rec = c
	return nil
}

// UpdateFileAndPutObject is UpdateFile of rec and PutObject of o in one
// transaction.
func (s *Store) UpdateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	if err := rules.CheckFile(rec); err != nil {
		if !rules.CanonicalFileID(rec.ID) {
			return "", rules.FileNotFound(rec.ID)
		}
		return "", err
	}
	if err := prepareObject(o); err != nil {
		return "", err
	}
	c := rules.CloneRecord(rec)
	t := rules.Now()
	var replaced string
	err := s.tx(ctx, "update file "+c.ID+" and put object "+o.Bucket+"/"+o.Key, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.updateFile(ctx, tx, &c, t); err != nil {
			return err
		}
		var err error
		replaced, err = putObject(ctx, tx, o)
		return err
	})
	if err != nil {
		return "", err
	}
	*rec = c
	return replaced, nil
}

// updateFile is UpdateFile's write, inside tx: it fills in c's new version,
// times and replica ids.
func (s *Store) updateFile(ctx context.Context, tx pgx.Tx, c *meta.FileRecord, t time.Time) error {
	var parent string
	var chunks int
	err := tx.QueryRow(ctx, `UPDATE files
		SET file_name = $3, content_type = $4, size_bytes = $5, checksum = NULLIF($6, ''), status = $7,
			status_reason = NULLIF($8, ''), primary_node_id = NULLIF($9, ''), replication_factor = $10,
			ring_position = $11, idempotency_key = NULLIF($12, ''), updated_at = $13, version = version + 1,
			active_copies = $14
		WHERE id = $1 AND version = $2
		RETURNING created_at, version, COALESCE(parent_id::text, ''), chunk_count`,
		c.ID, c.Version, c.Name, c.ContentType, c.SizeBytes, c.Checksum, string(c.Status), c.StatusReason,
		c.PrimaryNodeID, c.ReplicationFactor, c.RingPosition, c.IdempotencyKey, t, c.ActiveCopies(),
	).Scan(&c.CreatedAt, &c.Version, &parent, &chunks)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.staleOrMissing(ctx, tx, `SELECT EXISTS (SELECT 1 FROM files WHERE id = $1)`,
			c.ID, rules.Stale("file", c.ID, c.Version), rules.FileNotFound(c.ID))
	}
	if err != nil {
		return err
	}
	c.CreatedAt, c.UpdatedAt = rules.Time(c.CreatedAt), t
	if err := replaceReplicas(ctx, tx, c, t); err != nil {
		return err
	}
	// A chunk's change moves its file's status; a manifest's own write
	// cannot set a status its chunks do not give.
	set, err := refreshManifests(ctx, tx, rules.RefreshTarget(c.ID, parent, chunks))
	rules.Refreshed(c, set)
	return err
}

// replaceReplicas makes the stored replica set of c equal to c.Replicas. The
// file row is already updated in this transaction, so it is locked and no
// other writer changes the file's replicas meanwhile.
func replaceReplicas(ctx context.Context, tx pgx.Tx, c *meta.FileRecord, t time.Time) error {
	rows, err := tx.Query(ctx, `SELECT id, node_id, status, created_at, updated_at, version
		FROM file_replicas WHERE file_id = $1`, c.ID)
	if err != nil {
		return err
	}
	stored, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.Replica, error) {
		r := meta.Replica{FileID: c.ID}
		var status string
		err := row.Scan(&r.ID, &r.NodeID, &status, &r.CreatedAt, &r.UpdatedAt, &r.Version)
		r.Status = meta.ReplicaStatus(status)
		r.CreatedAt, r.UpdatedAt = rules.Time(r.CreatedAt), rules.Time(r.UpdatedAt)
		return r, err
	})
	if err != nil {
		return err
	}
	changed, added, removed := rules.MergeReplicas(stored, c.Replicas)
	b := &pgx.Batch{}
	for _, i := range changed {
		r := &c.Replicas[i]
		r.UpdatedAt = t
		b.Queue(`UPDATE file_replicas SET status = $2, updated_at = $3, version = version + 1
			WHERE id = $1 RETURNING version`, r.ID, string(r.Status), t,
		).QueryRow(func(row pgx.Row) error { return row.Scan(&r.Version) })
	}
	for _, i := range added {
		r := &c.Replicas[i]
		r.CreatedAt, r.UpdatedAt, r.Version = t, t, 1
		insertReplica(b, r)
	}
	if len(removed) > 0 {
		b.Queue(`DELETE FROM file_replicas WHERE id = ANY($1)`, removed)
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// TouchFile sets the file's UpdatedAt to now without changing its version.
func (s *Store) TouchFile(ctx context.Context, id string) error {
	if !rules.CanonicalFileID(id) {
		return rules.FileNotFound(id)
	}
	return s.run(ctx, "touch file "+id, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE files SET updated_at = $2 WHERE id = $1`, id, rules.Now())
		if err == nil && tag.RowsAffected() == 0 {
			return rules.FileNotFound(id)
		}
		return err
	})
}

// DeleteFile removes the file and, by cascade, its replicas.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	if !rules.CanonicalFileID(id) {
		return nil
	}
	return s.tx(ctx, "delete file "+id, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := deleteChunks(ctx, tx, `parent_id = $2`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM files WHERE id = $1`, id)
		return err
	})
}

// ListFiles returns one page of files, newest first, and how many match.
func (s *Store) ListFiles(ctx context.Context, q meta.FileQuery) ([]meta.File, int, error) {
	statuses, err := rules.ListStatuses(q.Statuses)
	if err != nil {
		return nil, 0, err
	}
	if err := rules.CheckPage(q); err != nil {
		return nil, 0, err
	}
	// $2 is the key the list is for; an empty one sees every file.
	where := `f.status = ANY($1) AND f.parent_id IS NULL AND ($2 = '' OR NOT EXISTS (
		SELECT 1 FROM objects o JOIN buckets b ON b.name = o.bucket WHERE o.file_id = f.id AND b.owner <> $2))`
	files := []meta.File{}
	var total int
	err = s.snapshot(ctx, "list files", func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM files f WHERE `+where, statuses, q.VisibleTo).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+fileColumns+` FROM files f
			WHERE `+where+`
			ORDER BY f.created_at DESC, f.id DESC
			OFFSET $3 LIMIT $4`, statuses, q.VisibleTo, q.Offset, q.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f meta.File
			var status string
			if err := rows.Scan(fileDest(&f, &status)...); err != nil {
				return err
			}
			finishFile(&f, status)
			files = append(files, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	return files, total, nil
}

// blobRows leaves out the manifests that have nothing for the blob walks to
// do: a manifest has no blob, and only its delete is left to finish.
const blobRows = `(chunk_count = 0 OR status = 'DELETED')`

// collectIDs runs a query whose one column is a file ID.
func (s *Store) collectIDs(ctx context.Context, op, query string, args ...any) ([]string, error) {
	ids := []string{}
	err := s.run(ctx, op, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		ids = append(ids, got...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// FileIDsOnNode lists, in ID order, the files with any replica row on nodeID.
func (s *Store) FileIDsOnNode(ctx context.Context, nodeID string) ([]string, error) {
	return s.collectIDs(ctx, "list files on node "+nodeID,
		`SELECT DISTINCT file_id::text FROM file_replicas WHERE node_id = $1 ORDER BY 1`, nodeID)
}

// FileIDsByStatus lists up to limit files in statuses last updated before
// updatedBefore, fewest ACTIVE copies first, then oldest.
func (s *Store) FileIDsByStatus(ctx context.Context, statuses []meta.FileStatus, updatedBefore time.Time, limit int) ([]string, error) {
	ss, err := rules.StatusStrings(statuses)
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, errs.E(errs.Invalid, "limit %d is below 1", limit)
	}
	return s.collectIDs(ctx, "list files by status",
		`SELECT id::text FROM files WHERE status = ANY($1) AND updated_at < $2 AND `+blobRows+`
		ORDER BY active_copies, updated_at, id LIMIT $3`, ss, rules.Time(updatedBefore), limit)
}

// FileIDsInRanges lists, in ring order, the files whose position lies in any
// of the ranges. The ranges travel as two arrays, so one statement serves any
// number of them and the planner can use the ring_position index per interval.
func (s *Store) FileIDsInRanges(ctx context.Context, ranges []meta.PositionRange) ([]string, error) {
	iv, err := rules.Intervals(ranges)
	if err != nil {
		return nil, err
	}
	if len(iv) == 0 {
		return []string{}, nil
	}
	lo, hi := make([]int64, len(iv)), make([]int64, len(iv))
	for i, x := range iv {
		lo[i], hi[i] = x.Lo, x.Hi
	}
	return s.collectIDs(ctx, "list files in ring ranges",
		`SELECT f.id::text FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi)
		JOIN files f ON f.ring_position BETWEEN r.lo AND r.hi
		WHERE `+blobRows+`
		ORDER BY f.ring_position, f.id`, lo, hi)
}

// CountFilesByStatus counts files per status; every status is present, zero
// when no file has it.
func (s *Store) CountFilesByStatus(ctx context.Context) (map[meta.FileStatus]int, error) {
	counts := make(map[meta.FileStatus]int)
	for _, st := range rules.FileStatuses() {
		counts[st] = 0
	}
	err := s.run(ctx, "count files by status", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT status, count(*) FROM files WHERE parent_id IS NULL GROUP BY status`)
		if err != nil {
			return err
		}
		var status string
		var n int
		_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
			counts[meta.FileStatus(status)] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// AcquireLease takes the lease when it is free, expired or already owner's,
// until the database's now plus ttl.
func (s *Store) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := rules.CheckLease(name, owner, ttl); err != nil {
		return false, err
	}
	var got bool
	err := s.run(ctx, "acquire lease "+name, func(ctx context.Context, c *pgxpool.Conn) error {
		var tag pgconn.CommandTag
		var err error
		tag, err = c.Exec(ctx, `INSERT INTO leases (name, owner, expires_at)
			VALUES ($1, $2, clock_timestamp() + $3 * interval '1 microsecond')
			ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
			WHERE leases.owner = EXCLUDED.owner OR leases.expires_at <= clock_timestamp()`,
			name, owner, ttl.Microseconds())
		got = tag.RowsAffected() == 1
		return err
	})
	return got, err
}

// PruneLeases deletes the leases that expired more than grace ago, by the
// database's clock as AcquireLease.
func (s *Store) PruneLeases(ctx context.Context, grace time.Duration) (int, error) {
	if err := rules.CheckPruneGrace(grace); err != nil {
		return 0, err
	}
	var n int64
	err := s.run(ctx, "prune leases", func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `DELETE FROM leases WHERE expires_at <= clock_timestamp() - $1 * interval '1 microsecond'`,
			grace.Microseconds())
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// ReleaseLease drops the lease if owner holds it; otherwise it does nothing.
func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	return s.run(ctx, "release lease "+name, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND owner = $2`, name, owner)
		return err
	})
}

// FilesAfter returns the next page of files in ID order with their replicas,
// read in one statement so that each record is one snapshot.
func (s *Store) FilesAfter(ctx context.Context, after string, limit int) ([]meta.FileRecord, error) {
	if err := rules.CheckFilesAfter(after, limit); err != nil {
		return nil, err
	}
	where, args := blobRows, []any{limit}
	if after != "" {
		where, args = `id > $2::uuid AND `+blobRows, append(args, after)
	}
	out := []meta.FileRecord{}
	err := s.run(ctx, "list files after "+after, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = queryRecords(ctx, c, `SELECT `+fileColumns+`,
				r.id, r.node_id, r.status, r.created_at, r.updated_at, r.version
			FROM (SELECT * FROM files WHERE `+where+` ORDER BY id LIMIT $1) f
			LEFT JOIN file_replicas r ON r.file_id = f.id
			ORDER BY f.id, r.node_id`, args...)
		return err
	})
	return out, err
}

// querier is a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryRecords runs a query of fileColumns and one replica's columns per
// row, ordered by file, and gathers each file's replicas.
func queryRecords(ctx context.Context, c querier, query string, args ...any) ([]meta.FileRecord, error) {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []meta.FileRecord{}
	for rows.Next() {
		var f meta.File
		var status string
		var rID, rVersion *int64
		var rNode, rStatus *string
		var rCreated, rUpdated *time.Time
		if err := rows.Scan(append(fileDest(&f, &status), &rID, &rNode, &rStatus, &rCreated, &rUpdated, &rVersion)...); err != nil {
			return nil, err
		}
		finishFile(&f, status)
		if n := len(out); n == 0 || out[n-1].ID != f.ID {
			out = append(out, meta.FileRecord{File: f})
		}
		if rID == nil {
			continue
		}
		rec := &out[len(out)-1]
		rec.Replicas = append(rec.Replicas, meta.Replica{
			ID: *rID, FileID: f.ID, NodeID: *rNode, Status: meta.ReplicaStatus(*rStatus),
			CreatedAt: rules.Time(*rCreated), UpdatedAt: rules.Time(*rUpdated), Version: *rVersion,
		})
	}
	return out, rows.Err()
}

// GetState returns the value stored under key.
func (s *Store) GetState(ctx context.Context, key string) (string, error) {
	if err := rules.CheckStateKey(key); err != nil {
		return "", err
	}
	var v string
	err := s.run(ctx, "get state "+key, func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `SELECT value FROM coordinator_state WHERE key = $1`, key).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.StateNotFound(key)
		}
		return err
	})
	return v, err
}

// PutState stores value under key.
func (s *Store) PutState(ctx context.Context, key, value string) error {
	if err := rules.CheckStateKey(key); err != nil {
		return err
	}
	return s.run(ctx, "put state "+key, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO coordinator_state (key, value, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
			key, value, rules.Now())
		return err
	})
}
