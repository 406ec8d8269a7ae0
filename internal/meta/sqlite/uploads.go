package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

const uploadColumns = `upload_id, session_id, bucket, object_key, owner, content_type, headers, created_at, tags`

func scanUpload(row scanner) (meta.Upload, error) {
	var u meta.Upload
	var key []byte
	var headers string
	var created int64
	var tags sql.NullString
	if err := row.Scan(&u.ID, &u.SessionID, &u.Bucket, &key, &u.Owner, &u.ContentType, &headers, &created, &tags); err != nil {
		return meta.Upload{}, err
	}
	u.Key, u.CreatedAt = string(key), fromMicros(created)
	if err := json.Unmarshal([]byte(headers), &u.Headers); err != nil {
		return meta.Upload{}, errs.Wrap(errs.Corrupt, err, "upload %s: stored headers", u.ID)
	}
	var err error
	u.Tags, err = readTags(tags, "upload "+u.ID)
	return u, err
}

// CreateUpload records a multipart upload.
func (s *Store) CreateUpload(ctx context.Context, u *meta.Upload) error {
	if err := rules.CheckUpload(u); err != nil {
		return err
	}
	headers, err := json.Marshal(u.Headers)
	if err != nil {
		return errs.Wrap(errs.Invalid, err, "upload headers")
	}
	tags, err := tagsValue(u.Tags)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, "create upload "+u.ID, func(ctx context.Context, tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM buckets WHERE name = ?`, u.Bucket).Scan(&one); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return rules.BucketNotFound(u.Bucket)
			}
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO multipart_uploads (`+uploadColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			u.ID, u.SessionID, u.Bucket, []byte(u.Key), u.Owner, u.ContentType, string(headers), micros(u.CreatedAt), tags)
		return err
	})
}

// GetUpload reads one upload.
func (s *Store) GetUpload(ctx context.Context, id string) (meta.Upload, error) {
	u, err := scanUpload(s.read.QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM multipart_uploads WHERE upload_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return meta.Upload{}, rules.UploadNotFound(id)
	}
	return u, fail(ctx, err, "get upload "+id)
}

// DeleteUpload forgets an upload.
func (s *Store) DeleteUpload(ctx context.Context, id string) error {
	return s.writeTx(ctx, "delete upload "+id, func(ctx context.Context, tx *sql.Tx) error {
		return deleteOne(ctx, tx, `DELETE FROM multipart_uploads WHERE upload_id = ?`, id, rules.UploadNotFound(id))
	})
}

// UploadsAfter lists uploads by the (bucket, key, upload id) index.
func (s *Store) UploadsAfter(ctx context.Context, bucket, prefix, afterKey, afterID string, limit int) ([]meta.Upload, error) {
	end := rules.PrefixEnd(prefix)
	if end == nil {
		end = []byte{0xff, 0xff}
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+uploadColumns+` FROM multipart_uploads
		WHERE bucket = ? AND object_key >= ? AND object_key < ? AND (object_key > ? OR (object_key = ? AND upload_id > ?))
		ORDER BY object_key, upload_id LIMIT ?`,
		bucket, []byte(prefix), end, []byte(afterKey), []byte(afterKey), afterID, rules.Limit(limit))
	return fail2[[]meta.Upload](ctx, "list uploads")(collect(rows, err, scanUpload))
}
