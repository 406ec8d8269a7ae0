package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// The write path's statements, prepared once on the write connection (see
// stmtSet); a query outside writeQueries runs unprepared.
const (
	sqlInsertFile = `INSERT INTO files (id, file_name, content_type, size_bytes, checksum, status,
				status_reason, primary_node_id, replication_factor, ring_position, idempotency_key, created_at, updated_at, version,
				parent_id, chunk_part, chunk_index, chunk_offset, chunk_count, active_copies)
			VALUES (?, ?, ?, ?, NULLIF(?, ''), ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?, NULLIF(?, ''), ?, ?, 1, NULLIF(?, ''), ?, ?, ?, ?, ?)`
	sqlInsertReplica = `INSERT INTO file_replicas (file_id, node_id, status, created_at, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?)`
	sqlUpdateFile = `UPDATE files
			SET file_name = ?, content_type = ?, size_bytes = ?, checksum = NULLIF(?, ''), status = ?,
				status_reason = NULLIF(?, ''), primary_node_id = NULLIF(?, ''), replication_factor = ?,
				ring_position = ?, idempotency_key = NULLIF(?, ''), updated_at = ?, version = version + 1,
				active_copies = ?
			WHERE id = ? AND version = ?
			RETURNING created_at, version, COALESCE(parent_id, ''), chunk_count`
	sqlReplicasOf = `SELECT id, node_id, status, created_at, updated_at, version
		FROM file_replicas WHERE file_id = ?`
	sqlUpdateReplica = `UPDATE file_replicas SET status = ?, updated_at = ?, version = ? WHERE id = ?`
	sqlDeleteReplica = `DELETE FROM file_replicas WHERE id = ?`
	sqlTouchFile     = `UPDATE files SET updated_at = ? WHERE id = ?`
	sqlDeleteFile    = `DELETE FROM files WHERE id = ?`
)

// writeQueries are prepared when the store opens.
var writeQueries = []string{sqlInsertFile, sqlInsertReplica, sqlUpdateFile, sqlReplicasOf, sqlUpdateReplica, sqlDeleteReplica, sqlTouchFile, sqlDeleteFile, sqlSavepoint, sqlRelease, sqlRollbackTo,
	sqlBucketExists, sqlObjectFileID, sqlPutObject}

// fileColumns are read with COALESCE so that optional text columns, NULL when
// empty, scan into plain strings.
const fileColumns = `f.id, f.file_name, f.content_type, f.size_bytes, COALESCE(f.checksum, ''), f.status,
	COALESCE(f.status_reason, ''), COALESCE(f.primary_node_id, ''), f.replication_factor, f.ring_position,
	COALESCE(f.idempotency_key, ''), f.created_at, f.updated_at, f.version,
	COALESCE(f.parent_id, ''), f.chunk_part, f.chunk_index, f.chunk_offset, f.chunk_count`

// fileRow receives fileColumns.
type fileRow struct {
	f                meta.File
	status           string
	created, updated int64
}

func (r *fileRow) dest() []any {
	f := &r.f
	return []any{&f.ID, &f.Name, &f.ContentType, &f.SizeBytes, &f.Checksum, &r.status, &f.StatusReason,
		&f.PrimaryNodeID, &f.ReplicationFactor, &f.RingPosition, &f.IdempotencyKey, &r.created, &r.updated, &f.Version,
		&f.Chunk.ParentID, &f.Chunk.Part, &f.Chunk.Index, &f.Chunk.Offset, &f.ChunkCount}
}

func (r *fileRow) file() meta.File {
	f := r.f
	f.Status = meta.FileStatus(r.status)
	f.CreatedAt, f.UpdatedAt = fromMicros(r.created), fromMicros(r.updated)
	return f
}

// replicaRow receives a copy's columns as the copy queries return them: id,
// node_id, status, created_at, updated_at, version.
type replicaRow struct {
	r                meta.Replica
	status           string
	created, updated int64
}

func (c *replicaRow) dest() []any {
	return []any{&c.r.ID, &c.r.NodeID, &c.status, &c.created, &c.updated, &c.r.Version}
}

// replica is the copy just scanned, of the file fileID.
func (c *replicaRow) replica(fileID string) meta.Replica {
	r := c.r
	r.FileID, r.Status = fileID, meta.ReplicaStatus(c.status)
	r.CreatedAt, r.UpdatedAt = fromMicros(c.created), fromMicros(c.updated)
	return r
}

// recordQuery reads a file and its replicas in one statement, so the two are
// one snapshot; where selects the file by one argument.
func recordQuery(where string) string {
	return `SELECT ` + fileColumns + `,
			r.id, r.node_id, r.status, r.created_at, r.updated_at, r.version
		FROM files f LEFT JOIN file_replicas r ON r.file_id = f.id
		WHERE ` + where + `
		ORDER BY r.node_id`
}

// The read path's lookups, prepared on the read pool when the store opens.
var (
	sqlFileByID  = recordQuery(`f.id = ?`)
	sqlFileByKey = recordQuery(`f.idempotency_key = ?`)
	readQueries  = []string{sqlFileByID, sqlFileByKey, sqlObjectByKey}
)

// getRecord runs one of the record queries with its argument.
func (s *Store) getRecord(ctx context.Context, query string, arg any) (meta.FileRecord, bool, error) {
	rows, err := s.rs.queryPool(ctx, s.read, query, arg)
	if err != nil {
		return meta.FileRecord{}, false, err
	}
	defer rows.Close()
	var rec meta.FileRecord
	found := false
	for rows.Next() {
		var fr fileRow
		var rID, rCreated, rUpdated, rVersion sql.NullInt64
		var rNode, rStatus sql.NullString
		if err := rows.Scan(append(fr.dest(), &rID, &rNode, &rStatus, &rCreated, &rUpdated, &rVersion)...); err != nil {
			return meta.FileRecord{}, false, err
		}
		rec.File = fr.file()
		found = true
		if !rID.Valid {
			continue
		}
		rec.Replicas = append(rec.Replicas, meta.Replica{
			ID: rID.Int64, FileID: rec.ID, NodeID: rNode.String, Status: meta.ReplicaStatus(rStatus.String),
			CreatedAt: fromMicros(rCreated.Int64), UpdatedAt: fromMicros(rUpdated.Int64), Version: rVersion.Int64,
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
	rec, found, err := s.getRecord(ctx, sqlFileByID, id)
	if err != nil {
		return meta.FileRecord{}, fail(ctx, err, "get file "+id)
	}
	if !found {
		return meta.FileRecord{}, rules.FileNotFound(id)
	}
	return rec, nil
}

// FileByIdempotencyKey finds the file created with key.
func (s *Store) FileByIdempotencyKey(ctx context.Context, key string) (meta.FileRecord, error) {
	if key == "" {
		return meta.FileRecord{}, errs.E(errs.NotFound, "no file has an empty idempotency key")
	}
	rec, found, err := s.getRecord(ctx, sqlFileByKey, key)
	if err != nil {
		return meta.FileRecord{}, fail(ctx, err, "find file by idempotency key")
	}
	if !found {
		return meta.FileRecord{}, errs.WithCode(errs.NotFound, errs.CodeFileNotFound, nil, "no file has idempotency key %s", key)
	}
	return rec, nil
}

// CreateFile inserts rec and its replicas in one transaction.
func (s *Store) CreateFile(ctx context.Context, rec *meta.FileRecord) error {
	if err := rules.CheckFile(rec); err != nil {
		return err
	}
	c := rules.NewRecord(rec)
	err := s.writeTx(ctx, "create file "+c.ID, func(ctx context.Context, tx *sql.Tx) error {
		return s.insertRecord(ctx, tx, &c)
	})
	if err != nil {
		return rules.CreateFailed(c.ID, err)
	}
	// fn filled in c (versions, replica ids); rec takes it only now that the
	// COMMIT has succeeded, so a failed write, even one whose batch failed
	// to commit after fn ran, leaves rec as it was.
	*rec = c
	return nil
}

// CreateFileAndPutObject is CreateFile of rec and PutObject of o in one
// write transaction.
func (s *Store) CreateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	if err := rules.CheckFile(rec); err != nil {
		return "", err
	}
	row, err := prepareObject(o)
	if err != nil {
		return "", err
	}
	c := rules.NewRecord(rec)
	var replaced string
	err = s.writeTx(ctx, "create file "+c.ID+" and put object "+o.Bucket+"/"+o.Key, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.insertRecord(ctx, tx, &c); err != nil {
			return err
		}
		var err error
		replaced, err = s.putObject(ctx, tx, o, row)
		return err
	})
	if err != nil {
		return "", rules.CreateFailed(c.ID, err)
	}
	*rec = c
	return replaced, nil
}

// insertRecord is CreateFile's write, inside tx: it fills in c's replica
// ids and times.
func (s *Store) insertRecord(ctx context.Context, tx *sql.Tx, c *meta.FileRecord) error {
	if _, err := s.ws.exec(ctx, tx, sqlInsertFile,
		c.ID, c.Name, c.ContentType, c.SizeBytes, c.Checksum, string(c.Status), c.StatusReason,
		c.PrimaryNodeID, c.ReplicationFactor, c.RingPosition, c.IdempotencyKey, micros(c.CreatedAt), micros(c.UpdatedAt),
		c.Chunk.ParentID, c.Chunk.Part, c.Chunk.Index, c.Chunk.Offset, c.ChunkCount, c.ActiveCopies(),
	); err != nil {
		return err
	}
	for i := range c.Replicas {
		r := &c.Replicas[i]
		r.CreatedAt, r.UpdatedAt, r.Version = c.UpdatedAt, c.UpdatedAt, 1
		if err := insertReplica(ctx, s.ws, tx, r); err != nil {
			return err
		}
	}
	return nil
}

// insertReplica inserts r and sets its ID. The ID is the row's rowid
// (file_replicas.id is INTEGER PRIMARY KEY), read back without RETURNING,
// which costs SQLite a temporary table per statement.
func insertReplica(ctx context.Context, ws stmtSet, tx *sql.Tx, r *meta.Replica) error {
	res, err := ws.exec(ctx, tx, sqlInsertReplica,
		r.FileID, r.NodeID, string(r.Status), micros(r.CreatedAt), micros(r.UpdatedAt), r.Version)
	if err != nil {
		return err
	}
	r.ID, err = res.LastInsertId()
	return err
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
	err := s.writeTx(ctx, "update file "+c.ID, func(ctx context.Context, tx *sql.Tx) error {
		return s.updateFile(ctx, tx, &c, t)
	})
	if err != nil {
		return err
	}
	*rec = c // only once committed, as in CreateFile
	return nil
}

// UpdateFileAndPutObject is UpdateFile of rec and PutObject of o in one
// write transaction.
func (s *Store) UpdateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	if err := rules.CheckFile(rec); err != nil {
		if !rules.CanonicalFileID(rec.ID) {
			return "", rules.FileNotFound(rec.ID)
		}
		return "", err
	}
	row, err := prepareObject(o)
	if err != nil {
		return "", err
	}
	c := rules.CloneRecord(rec)
	t := rules.Now()
	var replaced string
	err = s.writeTx(ctx, "update file "+c.ID+" and put object "+o.Bucket+"/"+o.Key, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.updateFile(ctx, tx, &c, t); err != nil {
			return err
		}
		var err error
		replaced, err = s.putObject(ctx, tx, o, row)
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
func (s *Store) updateFile(ctx context.Context, tx *sql.Tx, c *meta.FileRecord, t time.Time) error {
	var created int64
	var parent string
	var chunks int
	err := s.ws.queryRow(ctx, tx, sqlUpdateFile,
		c.Name, c.ContentType, c.SizeBytes, c.Checksum, string(c.Status), c.StatusReason,
		c.PrimaryNodeID, c.ReplicationFactor, c.RingPosition, c.IdempotencyKey, micros(t), c.ActiveCopies(), c.ID, c.Version,
	).Scan(&created, &c.Version, &parent, &chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return staleOrMissing(ctx, tx, `SELECT EXISTS (SELECT 1 FROM files WHERE id = ?)`,
			c.ID, rules.Stale("file", c.ID, c.Version), rules.FileNotFound(c.ID))
	}
	if err != nil {
		return err
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(created), t
	if err := replaceReplicas(ctx, s.ws, tx, c, t); err != nil {
		return err
	}
	// A chunk's change moves its file's status; a manifest's own write
	// cannot set a status its chunks do not give.
	set, err := refreshManifests(ctx, tx, rules.RefreshTarget(c.ID, parent, chunks))
	rules.Refreshed(c, set)
	return err
}

// replaceReplicas makes the stored replica set of c equal to c.Replicas,
// inside the write transaction.
func replaceReplicas(ctx context.Context, ws stmtSet, tx *sql.Tx, c *meta.FileRecord, t time.Time) error {
	rows, err := ws.query(ctx, tx, sqlReplicasOf, c.ID)
	if err != nil {
		return err
	}
	var stored []meta.Replica
	var row replicaRow
	for rows.Next() {
		if err := rows.Scan(row.dest()...); err != nil {
			_ = rows.Close()
			return err
		}
		stored = append(stored, row.replica(c.ID))
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	changed, added, removed := rules.MergeReplicas(stored, c.Replicas)
	// The transaction holds the write lock, so the versions just read are
	// the stored ones.
	storedVersion := make(map[int64]int64, len(stored))
	for _, r := range stored {
		storedVersion[r.ID] = r.Version
	}
	for _, i := range changed {
		r := &c.Replicas[i]
		r.UpdatedAt, r.Version = t, storedVersion[r.ID]+1
		if _, err := ws.exec(ctx, tx, sqlUpdateReplica, string(r.Status), micros(t), r.Version, r.ID); err != nil {
			return err
		}
	}
	for _, i := range added {
		r := &c.Replicas[i]
		r.CreatedAt, r.UpdatedAt, r.Version = t, t, 1
		if err := insertReplica(ctx, ws, tx, r); err != nil {
			return err
		}
	}
	for _, id := range removed {
		if _, err := ws.exec(ctx, tx, sqlDeleteReplica, id); err != nil {
			return err
		}
	}
	return nil
}

// TouchFile sets the file's UpdatedAt to now without changing its version.
func (s *Store) TouchFile(ctx context.Context, id string) error {
	if !rules.CanonicalFileID(id) {
		return rules.FileNotFound(id)
	}
	now := rules.Now()
	return s.writeTx(ctx, "touch file "+id, func(ctx context.Context, tx *sql.Tx) error {
		res, err := s.ws.exec(ctx, tx, sqlTouchFile, micros(now), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return rules.FileNotFound(id)
		}
		return nil
	})
}

// DeleteFile removes the file and, by cascade, its replicas.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	if !rules.CanonicalFileID(id) {
		return nil
	}
	return s.writeTx(ctx, "delete file "+id, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := deleteChunks(ctx, tx, `parent_id = ?`, id); err != nil {
			return err
		}
		_, err := s.ws.exec(ctx, tx, sqlDeleteFile, id)
		return err
	})
}

// placeholders returns "?, ?, …" with n marks, for an IN list.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func stringArgs(ss []string) []any {
	args := make([]any, len(ss))
	for i, s := range ss {
		args[i] = s
	}
	return args
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
	where := listedWhere(len(statuses))
	args := stringArgs(statuses)
	if q.VisibleTo != "" {
		where += ` AND ` + sqlNotOthersObject
		args = append(args, q.VisibleTo)
	}
	files := []meta.File{}
	var total int
	err = s.readTx(ctx, "list files", func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM files f WHERE `+where, args...).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, listPageSQL(statuses, where), append(args, q.Limit, q.Offset)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var fr fileRow
			if err := rows.Scan(fr.dest()...); err != nil {
				return err
			}
			files = append(files, fr.file())
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	return files, total, nil
}

// listedWhere selects the top-level files of n statuses (the first n
// arguments).
func listedWhere(n int) string {
	return `f.status IN (` + placeholders(n) + `) AND f.parent_id IS NULL`
}

// listPageSQL reads one page (the last two arguments: limit, offset) of the
// files where selects, newest first.
func listPageSQL(statuses []string, where string) string {
	return `SELECT ` + fileColumns + ` FROM files f ` + listingIndex(statuses) + `
		WHERE ` + where + `
		ORDER BY f.created_at DESC, f.id DESC
		LIMIT ? OFFSET ?`
}

// listingIndex picks the index a page of files is read through. SQLite has
// no statistics to choose by (nothing runs ANALYZE), and left to itself it
// reads every file of the statuses asked for through files_top_status_idx
// and sorts them all for each page, a cost that grows with the store
// (BenchmarkListFiles, PERFORMANCE.md). A listing that includes ACTIVE
// files, the default one, reads files_top_created_at_idx in the page's
// order instead and stops at the page's end. One of other statuses only
// (PENDING, FAILED, DELETED: few files, scattered over time) still finds
// them by status.
func listingIndex(statuses []string) string {
	if slices.Contains(statuses, string(meta.FileActive)) {
		return `INDEXED BY files_top_created_at_idx`
	}
	return ``
}

// sqlNotOthersObject leaves out a file f that holds an object of a bucket
// whose owner is not the key given (FileQuery.VisibleTo); objects_file_id_idx
// finds the object.
const sqlNotOthersObject = `NOT EXISTS (SELECT 1 FROM objects o JOIN buckets b ON b.name = o.bucket
	WHERE o.file_id = f.id AND b.owner <> ?)`

// collectIDs runs a read query whose one column is a file ID, appending to ids.
func (s *Store) collectIDs(ctx context.Context, ids []string, query string, args ...any) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// blobRows leaves out the manifests that have nothing for the blob walks to
// do: a manifest has no blob, and only its delete is left to finish. The
// unary + keeps SQLite from answering the walks through other indexes.
const blobRows = `(+chunk_count = 0 OR +status = 'DELETED')`

// The queries whose plans must use an index (plan_test.go checks them).
const fileIDsOnNodeSQL = `SELECT DISTINCT file_id FROM file_replicas WHERE node_id = ? ORDER BY file_id`

func fileIDsByStatusSQL(statuses int) string {
	return `SELECT id FROM files
		WHERE status IN (` + placeholders(statuses) + `) AND updated_at < ? AND ` + blobRows + `
		ORDER BY active_copies, updated_at, id LIMIT ?`
}

func fileIDsInRangesSQL(intervals int) string {
	values := strings.TrimSuffix(strings.Repeat("(?, ?), ", intervals), ", ")
	return `WITH r(lo, hi) AS (VALUES ` + values + `)
		SELECT f.id FROM r JOIN files f ON f.ring_position BETWEEN r.lo AND r.hi
		WHERE ` + blobRows + `
		ORDER BY f.ring_position, f.id`
}

// FileIDsOnNode lists, in ID order, the files with any replica row on nodeID.
func (s *Store) FileIDsOnNode(ctx context.Context, nodeID string) ([]string, error) {
	ids, err := s.collectIDs(ctx, []string{}, fileIDsOnNodeSQL, nodeID)
	return ids, fail(ctx, err, "list files on node "+nodeID)
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
	if len(ss) == 0 {
		return []string{}, nil
	}
	args := append(stringArgs(ss), micros(rules.Time(updatedBefore)), limit)
	ids, err := s.collectIDs(ctx, []string{}, fileIDsByStatusSQL(len(ss)), args...)
	return ids, fail(ctx, err, "list files by status")
}

// rangeBatch is how many intervals one statement carries: two parameters
// each, far below SQLite's limit on parameters.
const rangeBatch = 250

// FileIDsInRanges lists, in ring order, the files whose position lies in any
// of the ranges. The intervals are sorted and disjoint, so batches of them
// return files in ring order and never the same file twice.
func (s *Store) FileIDsInRanges(ctx context.Context, ranges []meta.PositionRange) ([]string, error) {
	iv, err := rules.Intervals(ranges)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for len(iv) > 0 {
		batch := iv[:min(rangeBatch, len(iv))]
		iv = iv[len(batch):]
		args := make([]any, 0, 2*len(batch))
		for _, x := range batch {
			args = append(args, x.Lo, x.Hi)
		}
		ids, err = s.collectIDs(ctx, ids, fileIDsInRangesSQL(len(batch)), args...)
		if err != nil {
			return nil, fail(ctx, err, "list files in ring ranges")
		}
	}
	return ids, nil
}

// CountFilesByStatus counts files per status; every status is present, zero
// when no file has it.
func (s *Store) CountFilesByStatus(ctx context.Context) (map[meta.FileStatus]int, error) {
	counts := make(map[meta.FileStatus]int)
	for _, st := range rules.FileStatuses() {
		counts[st] = 0
	}
	rows, err := s.read.QueryContext(ctx, `SELECT status, count(*) FROM files WHERE parent_id IS NULL GROUP BY status`)
	if err != nil {
		return nil, fail(ctx, err, "count files by status")
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fail(ctx, err, "count files by status")
		}
		counts[meta.FileStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, err, "count files by status")
	}
	return counts, nil
}

// AcquireLease takes the lease when it is free, expired or already owner's,
// until now plus ttl. The embedded store serves one coordinator, so the
// process clock is the only clock.
func (s *Store) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := rules.CheckLease(name, owner, ttl); err != nil {
		return false, err
	}
	now := time.Now()
	var acquired bool
	err := s.writeTx(ctx, "acquire lease "+name, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE leases.owner = excluded.owner OR leases.expires_at <= ?`,
			name, owner, micros(now.Add(ttl)), micros(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		acquired = n == 1
		return err
	})
	if err != nil {
		return false, err
	}
	return acquired, nil
}

// PruneLeases deletes the leases that expired more than grace ago, by the
// process clock as AcquireLease.
func (s *Store) PruneLeases(ctx context.Context, grace time.Duration) (int, error) {
	if err := rules.CheckPruneGrace(grace); err != nil {
		return 0, err
	}
	var n int64
	err := s.writeTx(ctx, "prune leases", func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE expires_at <= ?`, micros(time.Now().Add(-grace)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// ReleaseLease drops the lease if owner holds it; otherwise it does nothing.
func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	return s.writeTx(ctx, "release lease "+name, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND owner = ?`, name, owner)
		return err
	})
}

// A page of FilesAfter is two statements in one read transaction, so each
// record is one snapshot: the page's files, then the copies of every file
// whose ID lies between the page's first and last (in SQLite's order, the
// page's own). One joined statement would hand back every file column once
// per copy, and decoding those columns three times was most of what a page
// cost (BenchmarkFilesAfter).
const (
	sqlFilesAfter = `SELECT ` + fileColumns + `
	FROM files f WHERE f.id > ? AND ` + blobRows + ` ORDER BY f.id LIMIT ?`
	sqlReplicasBetween = `SELECT file_id, id, node_id, status, created_at, updated_at, version
	FROM file_replicas WHERE file_id >= ? AND file_id <= ? ORDER BY file_id, node_id`
)

// FilesAfter returns the next page of files in ID order with their replicas.
func (s *Store) FilesAfter(ctx context.Context, after string, limit int) ([]meta.FileRecord, error) {
	if err := rules.CheckFilesAfter(after, limit); err != nil {
		return nil, err
	}
	out := []meta.FileRecord{}
	err := s.readTx(ctx, "list files after "+after, func(tx *sql.Tx) error {
		var err error
		if out, err = queryFiles(ctx, tx, sqlFilesAfter, after, limit); err != nil || len(out) == 0 {
			return err
		}
		return addReplicas(ctx, tx, out, sqlReplicasBetween, out[0].ID, out[len(out)-1].ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryFiles runs a query of fileColumns alone.
func queryFiles(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]meta.FileRecord, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []meta.FileRecord{}
	for rows.Next() {
		var fr fileRow
		if err := rows.Scan(fr.dest()...); err != nil {
			return nil, err
		}
		out = append(out, meta.FileRecord{File: fr.file()})
	}
	return out, rows.Err()
}

// addReplicas gives each of recs its copies, read by query: a copy's file
// ID, then its columns. Copies of files recs does not hold (a manifest a page
// left out) are passed over. Each record's copies end up in node order, the
// order every read returns, whatever order query has.
func addReplicas(ctx context.Context, tx *sql.Tx, recs []meta.FileRecord, query string, args ...any) error {
	at := make(map[string]int, len(recs))
	for i := range recs {
		at[recs[i].ID] = i
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var fileID sql.RawBytes
	var row replicaRow
	dest := append([]any{&fileID}, row.dest()...)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		i, ok := at[string(fileID)]
		if !ok {
			continue
		}
		recs[i].Replicas = append(recs[i].Replicas, row.replica(recs[i].ID))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range recs {
		rules.SortReplicas(recs[i].Replicas)
	}
	return nil
}

// GetState returns the value stored under key.
func (s *Store) GetState(ctx context.Context, key string) (string, error) {
	if err := rules.CheckStateKey(key); err != nil {
		return "", err
	}
	var v string
	err := s.read.QueryRowContext(ctx, `SELECT value FROM coordinator_state WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", rules.StateNotFound(key)
	}
	return v, fail(ctx, err, "get state "+key)
}

// PutState stores value under key.
func (s *Store) PutState(ctx context.Context, key, value string) error {
	if err := rules.CheckStateKey(key); err != nil {
		return err
	}
	return s.writeTx(ctx, "put state "+key, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO coordinator_state (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			key, value, micros(rules.Now()))
		return err
	})
}
