package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// sqlChunksOf reads the chunks of one parent with their replicas.
const sqlChunksOf = `SELECT ` + fileColumns + `,
		r.id, r.node_id, r.status, r.created_at, r.updated_at, r.version
	FROM files f LEFT JOIN file_replicas r ON r.file_id = f.id
	WHERE f.parent_id = $1
	ORDER BY f.chunk_part, f.chunk_index, f.id, r.node_id`

// ChunksOf returns the chunks of parentID by part and index, with their
// replicas, read in one statement so that they are one snapshot.
func (s *Store) ChunksOf(ctx context.Context, parentID string) ([]meta.FileRecord, error) {
	out := []meta.FileRecord{}
	if !rules.CanonicalFileID(parentID) {
		return out, nil
	}
	err := s.run(ctx, "list chunks of "+parentID, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = queryRecords(ctx, c, sqlChunksOf, parentID)
		return err
	})
	return out, err
}

// deleteChunks marks the chunks selected by where (over files; its
// arguments start at $2, $1 being the time) DELETED, their copies DELETING,
// inside tx, and returns their IDs.
func deleteChunks(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]string, error) {
	now := rules.Now()
	rows, err := tx.Query(ctx, `UPDATE files SET status = 'DELETED', status_reason = NULL,
			updated_at = $1, version = version + 1, active_copies = 0
		WHERE parent_id IS NOT NULL AND status <> 'DELETED' AND `+where+` RETURNING id::text`, append([]any{now}, args...)...)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	_, err = tx.Exec(ctx, `UPDATE file_replicas SET status = 'DELETING', updated_at = $1, version = version + 1
		WHERE file_id = ANY($2::uuid[]) AND status <> 'DELETING'`, now, ids)
	return ids, err
}

// partChunks selects the chunks of the attempts of the session $2.
const partChunks = `parent_id IN (SELECT part_id FROM upload_parts WHERE session_id = $2)`

const sessionColumns = `id::text, file_name, content_type, expected_sha256, created_at, expires_at`

func scanSession(row pgx.Row) (meta.UploadSession, error) {
	var u meta.UploadSession
	err := row.Scan(&u.ID, &u.FileName, &u.ContentType, &u.ExpectedSHA256, &u.CreatedAt, &u.ExpiresAt)
	u.CreatedAt, u.ExpiresAt = rules.Time(u.CreatedAt), rules.Time(u.ExpiresAt)
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
	err := s.run(ctx, "create upload session "+c.ID, func(ctx context.Context, conn *pgxpool.Conn) error {
		_, err := conn.Exec(ctx, `INSERT INTO upload_sessions (id, file_name, content_type, expected_sha256, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, c.ID, c.FileName, c.ContentType, c.ExpectedSHA256, c.CreatedAt, c.ExpiresAt)
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
	var parts []meta.UploadPart
	err := s.snapshot(ctx, "get upload session "+id, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		u, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM upload_sessions WHERE id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.SessionNotFound(id)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT part_id::text, number, size_bytes, sha256, md5, created_at
			FROM upload_parts WHERE session_id = $1 AND done ORDER BY number, created_at`, id)
		if err != nil {
			return err
		}
		parts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.UploadPart, error) {
			p := meta.UploadPart{SessionID: id, Done: true}
			err := row.Scan(&p.PartID, &p.Number, &p.SizeBytes, &p.SHA256, &p.MD5, &p.CreatedAt)
			p.CreatedAt = rules.Time(p.CreatedAt)
			return p, err
		})
		return err
	})
	if err != nil {
		return meta.UploadSession{}, nil, err
	}
	if parts == nil {
		parts = []meta.UploadPart{}
	}
	return u, parts, nil
}

// ListSessions returns a page of sessions in ID order.
func (s *Store) ListSessions(ctx context.Context, after string, limit int) ([]meta.UploadSession, error) {
	if err := rules.CheckFilesAfter(after, limit); err != nil {
		return nil, err
	}
	where, args := `TRUE`, []any{limit}
	if after != "" {
		where, args = `id > $2::uuid`, append(args, after)
	}
	out := []meta.UploadSession{}
	err := s.run(ctx, "list upload sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+sessionColumns+` FROM upload_sessions WHERE `+where+` ORDER BY id LIMIT $1`, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.UploadSession, error) { return scanSession(row) })
		return err
	})
	if out == nil {
		out = []meta.UploadSession{}
	}
	return out, err
}

// ExpiredSessions lists sessions that expired before t, oldest first.
func (s *Store) ExpiredSessions(ctx context.Context, t time.Time, limit int) ([]string, error) {
	if limit < 1 {
		return nil, errs.E(errs.Invalid, "limit %d is below 1", limit)
	}
	return s.collectIDs(ctx, "list expired upload sessions",
		`SELECT id::text FROM upload_sessions WHERE expires_at < $1 ORDER BY expires_at, id LIMIT $2`, rules.Time(t), limit)
}

// BeginPart records an unfinished attempt at a part.
func (s *Store) BeginPart(ctx context.Context, p *meta.UploadPart) error {
	if err := rules.CheckPart(p); err != nil {
		return err
	}
	c := *p
	c.Done = false
	c.CreatedAt = rules.Now()
	err := s.run(ctx, "begin part of "+c.SessionID, func(ctx context.Context, conn *pgxpool.Conn) error {
		tag, err := conn.Exec(ctx, `INSERT INTO upload_parts (part_id, session_id, number, created_at)
			SELECT $1, id, $2, $3 FROM upload_sessions WHERE id = $4`, c.PartID, c.Number, c.CreatedAt, c.SessionID)
		if err == nil && tag.RowsAffected() == 0 {
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
	err := s.tx(ctx, "finish part of "+p.SessionID, func(ctx context.Context, tx pgx.Tx) error {
		// Finishes of one session run one at a time, so that two attempts
		// at a number finishing together cannot each miss the other's
		// commit and both stay.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM upload_sessions WHERE id = $1 FOR UPDATE`, p.SessionID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.E(errs.NotFound, "upload session %s is gone", p.SessionID)
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE upload_parts SET done = true, size_bytes = $1, sha256 = $2, md5 = $3
			WHERE part_id = $4 AND session_id = $5 AND number = $6`, p.SizeBytes, p.SHA256, p.MD5, p.PartID, p.SessionID, p.Number)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errs.E(errs.NotFound, "part %d of upload session %s is gone", p.Number, p.SessionID)
		}
		// Only finished attempts: one still in flight (a retry sent while
		// the first send was under way) replaces this one when it finishes.
		others := `parent_id IN (SELECT part_id FROM upload_parts WHERE session_id = $2 AND number = $3 AND part_id <> $4 AND done)`
		if dropped, err = deleteChunks(ctx, tx, others, p.SessionID, p.Number, p.PartID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM upload_parts WHERE session_id = $1 AND number = $2 AND part_id <> $3 AND done`,
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
	if !rules.CanonicalFileID(sessionID) {
		return nil, rules.SessionNotFound(sessionID)
	}
	c := rules.CloneRecord(manifest)
	t := rules.Now()
	c.CreatedAt, c.UpdatedAt, c.Version = t, t, 1
	c.Chunk = meta.ChunkRef{}
	var dropped []string
	err := s.tx(ctx, "complete upload session "+sessionID, func(ctx context.Context, tx pgx.Tx) error {
		// The row lock makes a second completion of the same session wait
		// for the first and then find the session gone.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM upload_sessions WHERE id = $1 FOR UPDATE`, sessionID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.SessionNotFound(sessionID)
		}
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		insertFile(b, &c)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		var offset int64
		for i, pid := range partIDs {
			if !rules.CanonicalFileID(pid) {
				return errs.E(errs.Invalid, "part %q is not a finished part of upload session %s", pid, sessionID)
			}
			var size int64
			err := tx.QueryRow(ctx, `SELECT size_bytes FROM upload_parts WHERE part_id = $1 AND session_id = $2 AND done`,
				pid, sessionID).Scan(&size)
			if errors.Is(err, pgx.ErrNoRows) {
				return errs.E(errs.Invalid, "part %s is not a finished part of upload session %s", pid, sessionID)
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE files SET parent_id = $1, chunk_part = $2, chunk_offset = chunk_offset + $3,
					updated_at = $4, version = version + 1 WHERE parent_id = $5`, c.ID, i+1, offset, t, pid); err != nil {
				return err
			}
			offset += size
		}
		if dropped, err = deleteChunks(ctx, tx, partChunks, sessionID); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `DELETE FROM upload_sessions WHERE id = $1`, sessionID); err != nil {
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
	err := s.tx(ctx, "delete upload session "+id, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if dropped, err = deleteChunks(ctx, tx, partChunks, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM upload_sessions WHERE id = $1`, id)
		return err
	})
	return dropped, err
}

// refreshManifests sets the stored status of each chunked file among ids
// (other IDs, part IDs included, are skipped) to the one its chunks give,
// inside tx, and returns the statuses and reasons set. Each manifest's row
// is locked first, in ID order (a writer locks a chunk, then its file), so
// the chunks read are the committed ones plus this transaction's. PENDING
// and DELETED manifests are left to their upload and their delete. The
// version does not move: the status is the store's to keep, re-derived in
// every transaction that changes a chunk or the manifest, so no writer's
// change is lost.
func refreshManifests(ctx context.Context, tx pgx.Tx, ids ...string) (map[string]rules.ManifestState, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	out := map[string]rules.ManifestState{}
	for _, id := range ids {
		if !rules.CanonicalFileID(id) {
			continue
		}
		var status string
		var count int
		err := tx.QueryRow(ctx, `SELECT status, chunk_count FROM files WHERE id = $1 FOR UPDATE`, id).Scan(&status, &count)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !rules.Derived(status, count) {
			continue
		}
		chunks, err := queryRecords(ctx, tx, sqlChunksOf, id)
		if err != nil {
			return nil, err
		}
		st, why := meta.ManifestStatus(chunks)
		tag, err := tx.Exec(ctx, `UPDATE files SET status = $2, status_reason = NULLIF($3, ''), updated_at = $4
			WHERE id = $1 AND (status <> $2 OR COALESCE(status_reason, '') <> $3)`,
			id, string(st), why, rules.Now())
		if err != nil {
			return nil, err
		}
		n := tag.RowsAffected()
		out[id] = rules.ManifestState{Status: st, Reason: why, Changed: n > 0}
	}
	return out, nil
}
