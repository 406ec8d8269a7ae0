package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// The chunks of one parent are read as a FilesAfter page is: the chunks by
// part and index, then their copies, in one read or write transaction so
// that they are one snapshot.
const (
	sqlChunksOf = `SELECT ` + fileColumns + `
	FROM files f WHERE f.parent_id = ? ORDER BY f.chunk_part, f.chunk_index, f.id`
	sqlChunkReplicas = `SELECT r.file_id, r.id, r.node_id, r.status, r.created_at, r.updated_at, r.version
	FROM files f JOIN file_replicas r ON r.file_id = f.id WHERE f.parent_id = ?`
)

// ChunksOf returns the chunks of parentID by part and index.
func (s *Store) ChunksOf(ctx context.Context, parentID string) ([]meta.FileRecord, error) {
	var out []meta.FileRecord
	err := s.readTx(ctx, "list chunks of "+parentID, func(tx *sql.Tx) error {
		var err error
		out, err = chunksOf(ctx, tx, parentID)
		return err
	})
	if err != nil {
		return nil, fail(ctx, err, "list chunks of "+parentID)
	}
	return out, nil
}

// chunksOf reads the chunks of parentID with their copies inside tx.
func chunksOf(ctx context.Context, tx *sql.Tx, parentID string) ([]meta.FileRecord, error) {
	chunks, err := queryFiles(ctx, tx, sqlChunksOf, parentID)
	if err != nil || len(chunks) == 0 {
		return chunks, err
	}
	return chunks, addReplicas(ctx, tx, chunks, sqlChunkReplicas, parentID)
}

// deleteChunks marks the chunks selected by where (over files, one
// arguments after the time) DELETED, their copies DELETING, inside tx, and
// returns their IDs.
func deleteChunks(ctx context.Context, tx *sql.Tx, where string, args ...any) ([]string, error) {
	now := micros(rules.Now())
	rows, err := tx.QueryContext(ctx, `UPDATE files SET status = 'DELETED', status_reason = NULL,
			updated_at = ?, version = version + 1, active_copies = 0
		WHERE parent_id IS NOT NULL AND status <> 'DELETED' AND `+where+` RETURNING id`, append([]any{now}, args...)...)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE file_replicas SET status = 'DELETING', updated_at = ?, version = version + 1
			WHERE file_id = ? AND status <> 'DELETING'`, now, id); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// partChunks selects the chunks of the attempts of one session.
const partChunks = `parent_id IN (SELECT part_id FROM upload_parts WHERE session_id = ?)`

const sessionColumns = `id, file_name, content_type, expected_sha256, created_at, expires_at`

func scanSession(row interface{ Scan(...any) error }) (meta.UploadSession, error) {
	var u meta.UploadSession
	var created, expires int64
	err := row.Scan(&u.ID, &u.FileName, &u.ContentType, &u.ExpectedSHA256, &created, &expires)
	u.CreatedAt, u.ExpiresAt = fromMicros(created), fromMicros(expires)
	return u, err
}

// CreateSession inserts an upload session.
func (s *Store) CreateSession(ctx context.Context, u *meta.UploadSession) error {
	if err := rules.CheckSession(u); err != nil {
		return err
	}
	c := *u
	if c.CreatedAt.IsZero() {
		c.CreatedAt = rules.Now()
	}
	c.CreatedAt, c.ExpiresAt = rules.Time(c.CreatedAt), rules.Time(c.ExpiresAt)
	err := s.writeTx(ctx, "create upload session "+c.ID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO upload_sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
			c.ID, c.FileName, c.ContentType, c.ExpectedSHA256, micros(c.CreatedAt), micros(c.ExpiresAt))
		return err
	})
	if err != nil {
		return err
	}
	*u = c
	return nil
}

// GetSession returns a session and its finished parts by number.
func (s *Store) GetSession(ctx context.Context, id string) (meta.UploadSession, []meta.UploadPart, error) {
	if !rules.CanonicalFileID(id) {
		return meta.UploadSession{}, nil, rules.SessionNotFound(id)
	}
	var u meta.UploadSession
	parts := []meta.UploadPart{}
	err := s.readTx(ctx, "get upload session "+id, func(tx *sql.Tx) error {
		var err error
		u, err = scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM upload_sessions WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return rules.SessionNotFound(id)
		}
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT part_id, number, size_bytes, sha256, md5, created_at
			FROM upload_parts WHERE session_id = ? AND done = 1 ORDER BY number, created_at`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p := meta.UploadPart{SessionID: id, Done: true}
			var created int64
			if err := rows.Scan(&p.PartID, &p.Number, &p.SizeBytes, &p.SHA256, &p.MD5, &created); err != nil {
				return err
			}
			p.CreatedAt = fromMicros(created)
			parts = append(parts, p)
		}
		return rows.Err()
	})
	if errs.Is(err, errs.NotFound) {
		return meta.UploadSession{}, nil, err
	}
	if err != nil {
		return meta.UploadSession{}, nil, fail(ctx, err, "get upload session "+id)
	}
	return u, parts, nil
}

// ListSessions returns a page of sessions in ID order.
func (s *Store) ListSessions(ctx context.Context, after string, limit int) ([]meta.UploadSession, error) {
	if err := rules.CheckFilesAfter(after, limit); err != nil {
		return nil, err
	}
	out := []meta.UploadSession{}
	rows, err := s.read.QueryContext(ctx, `SELECT `+sessionColumns+` FROM upload_sessions WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fail(ctx, err, "list upload sessions")
	}
	defer rows.Close()
	for rows.Next() {
		u, err := scanSession(rows)
		if err != nil {
			return nil, fail(ctx, err, "list upload sessions")
		}
		out = append(out, u)
	}
	return out, fail(ctx, rows.Err(), "list upload sessions")
}

// ExpiredSessions lists sessions that expired before t, oldest first.
func (s *Store) ExpiredSessions(ctx context.Context, t time.Time, limit int) ([]string, error) {
	if limit < 1 {
		return nil, errs.E(errs.Invalid, "limit %d is below 1", limit)
	}
	ids, err := s.collectIDs(ctx, []string{}, `SELECT id FROM upload_sessions WHERE expires_at < ? ORDER BY expires_at, id LIMIT ?`,
		micros(rules.Time(t)), limit)
	return ids, fail(ctx, err, "list expired upload sessions")
}

// BeginPart records an unfinished attempt at a part.
func (s *Store) BeginPart(ctx context.Context, p *meta.UploadPart) error {
	if err := rules.CheckPart(p); err != nil {
		return err
	}
	c := *p
	c.Done = false
	c.CreatedAt = rules.Now()
	err := s.writeTx(ctx, "begin part of "+c.SessionID, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO upload_parts (part_id, session_id, number, created_at)
			SELECT ?, id, ?, ? FROM upload_sessions WHERE id = ?`, c.PartID, c.Number, micros(c.CreatedAt), c.SessionID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			return rules.SessionNotFound(c.SessionID)
		}
		return err
	})
	if err != nil {
		return err
	}
	*p = c
	return nil
}

// FinishPart marks an attempt done and drops the other attempts at its number.
func (s *Store) FinishPart(ctx context.Context, p *meta.UploadPart) ([]string, error) {
	if err := rules.CheckPart(p); err != nil {
		return nil, err
	}
	var dropped []string
	err := s.writeTx(ctx, "finish part of "+p.SessionID, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE upload_parts SET done = 1, size_bytes = ?, sha256 = ?, md5 = ?
			WHERE part_id = ? AND session_id = ? AND number = ?`, p.SizeBytes, p.SHA256, p.MD5, p.PartID, p.SessionID, p.Number)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return errs.E(errs.NotFound, "part %d of upload session %s is gone", p.Number, p.SessionID)
		}
		// Only finished attempts: one still in flight (a retry sent while
		// the first send was under way) replaces this one when it finishes.
		others := `parent_id IN (SELECT part_id FROM upload_parts WHERE session_id = ? AND number = ? AND part_id <> ? AND done = 1)`
		if dropped, err = deleteChunks(ctx, tx, others, p.SessionID, p.Number, p.PartID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM upload_parts WHERE session_id = ? AND number = ? AND part_id <> ? AND done = 1`,
			p.SessionID, p.Number, p.PartID)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.Done = true
	return dropped, nil
}

// CompleteSession turns finished attempts into a file's chunks.
func (s *Store) CompleteSession(ctx context.Context, sessionID string, manifest *meta.FileRecord, partIDs []string) ([]string, error) {
	if err := rules.CheckFile(manifest); err != nil {
		return nil, err
	}
	c := rules.CloneRecord(manifest)
	t := rules.Now()
	c.CreatedAt, c.UpdatedAt, c.Version = t, t, 1
	c.Chunk = meta.ChunkRef{}
	var dropped []string
	err := s.writeTx(ctx, "complete upload session "+sessionID, func(ctx context.Context, tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM upload_sessions WHERE id = ?)`, sessionID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return rules.SessionNotFound(sessionID)
		}
		if _, err := s.ws.exec(ctx, tx, sqlInsertFile,
			c.ID, c.Name, c.ContentType, c.SizeBytes, c.Checksum, string(c.Status), c.StatusReason,
			c.PrimaryNodeID, c.ReplicationFactor, c.RingPosition, c.IdempotencyKey, micros(c.CreatedAt), micros(c.UpdatedAt),
			"", 0, 0, 0, c.ChunkCount, c.ActiveCopies(),
		); err != nil {
			return err
		}
		var offset int64
		for i, pid := range partIDs {
			var size int64
			err := tx.QueryRowContext(ctx, `SELECT size_bytes FROM upload_parts WHERE part_id = ? AND session_id = ? AND done = 1`,
				pid, sessionID).Scan(&size)
			if errors.Is(err, sql.ErrNoRows) {
				return errs.E(errs.Invalid, "part %s is not a finished part of upload session %s", pid, sessionID)
			}
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE files SET parent_id = ?, chunk_part = ?, chunk_offset = chunk_offset + ?,
					updated_at = ?, version = version + 1 WHERE parent_id = ?`, c.ID, i+1, offset, micros(t), pid); err != nil {
				return err
			}
			offset += size
		}
		var err error
		if dropped, err = deleteChunks(ctx, tx, partChunks, sessionID); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM upload_sessions WHERE id = ?`, sessionID); err != nil {
			return err
		}
		// The chunks may have changed since the caller read them.
		set, err := refreshManifests(ctx, tx, c.ID)
		rules.Refreshed(&c, set)
		return err
	})
	if errs.Is(err, errs.Conflict) {
		return nil, errs.Wrap(errs.Conflict, err, "file %s or its idempotency key already exists", c.ID)
	}
	if err != nil {
		return nil, err
	}
	*manifest = c
	return dropped, nil
}

// DeleteSession removes a session and marks its chunks DELETED.
func (s *Store) DeleteSession(ctx context.Context, id string) ([]string, error) {
	if !rules.CanonicalFileID(id) {
		return nil, nil
	}
	var dropped []string
	err := s.writeTx(ctx, "delete upload session "+id, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if dropped, err = deleteChunks(ctx, tx, partChunks, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM upload_sessions WHERE id = ?`, id)
		return err
	})
	return dropped, err
}

// refreshManifests sets the stored status of each chunked file among ids
// (other IDs, part IDs included, are skipped) to the one its chunks give,
// inside tx, and returns the statuses and reasons set. PENDING and DELETED
// manifests are left to their upload and their delete. The version does not
// move: the status is the store's to keep, re-derived in every transaction
// that changes a chunk or the manifest, so no writer's change is lost.
func refreshManifests(ctx context.Context, tx *sql.Tx, ids ...string) (map[string]rules.ManifestState, error) {
	out := map[string]rules.ManifestState{}
	for _, id := range ids {
		if _, done := out[id]; done || id == "" {
			continue
		}
		var status string
		var count int
		switch err := tx.QueryRowContext(ctx, `SELECT status, chunk_count FROM files WHERE id = ?`, id).Scan(&status, &count); {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, err
		case !rules.Derived(status, count):
			continue
		}
		m, err := deriveManifest(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		out[id] = m
	}
	return out, nil
}

// deriveManifest stores the status the chunks of manifest id give.
func deriveManifest(ctx context.Context, tx *sql.Tx, id string) (rules.ManifestState, error) {
	chunks, err := chunksOf(ctx, tx, id)
	if err != nil {
		return rules.ManifestState{}, err
	}
	m := rules.ManifestState{}
	m.Status, m.Reason = meta.ManifestStatus(chunks)
	res, err := tx.ExecContext(ctx, `UPDATE files SET status = ?, status_reason = NULLIF(?, ''), updated_at = ?
		WHERE id = ? AND (status <> ? OR COALESCE(status_reason, '') <> ?)`,
		string(m.Status), m.Reason, micros(rules.Now()), id, string(m.Status), m.Reason)
	if err == nil {
		var n int64
		n, err = res.RowsAffected()
		m.Changed = n > 0
	}
	return m, err
}
