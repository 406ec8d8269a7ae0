package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

const uploadColumns = `upload_id, session_id, bucket, object_key, owner, content_type, headers, created_at, tags`

func scanUpload(row pgx.Row) (meta.Upload, error) {
	var u meta.Upload
	var key []byte
	if err := row.Scan(&u.ID, &u.SessionID, &u.Bucket, &key, &u.Owner, &u.ContentType, &u.Headers, &u.CreatedAt, &u.Tags); err != nil {
		return meta.Upload{}, err
	}
	u.Key, u.CreatedAt = string(key), u.CreatedAt.UTC()
	if u.Headers == nil {
		u.Headers = map[string]string{}
	}
	return u, nil
}

// CreateUpload records a multipart upload.
func (s *Store) CreateUpload(ctx context.Context, u *meta.Upload) error {
	if err := rules.CheckUpload(u); err != nil {
		return err
	}
	return s.tx(ctx, "create upload "+u.ID, func(ctx context.Context, tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM buckets WHERE name = $1 FOR SHARE`, u.Bucket).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return rules.BucketNotFound(u.Bucket)
			}
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO multipart_uploads (`+uploadColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			u.ID, u.SessionID, u.Bucket, []byte(u.Key), u.Owner, u.ContentType, u.Headers, u.CreatedAt, tagsValue(u.Tags))
		return err
	})
}

// GetUpload reads one upload.
func (s *Store) GetUpload(ctx context.Context, id string) (meta.Upload, error) {
	var u meta.Upload
	err := s.run(ctx, "get upload "+id, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		u, err = scanUpload(c.QueryRow(ctx, `SELECT `+uploadColumns+` FROM multipart_uploads WHERE upload_id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.UploadNotFound(id)
		}
		return err
	})
	return u, err
}

// DeleteUpload forgets an upload.
func (s *Store) DeleteUpload(ctx context.Context, id string) error {
	return s.run(ctx, "delete upload "+id, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `DELETE FROM multipart_uploads WHERE upload_id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return rules.UploadNotFound(id)
		}
		return nil
	})
}

// UploadsAfter lists uploads by the (bucket, key, upload id) index.
func (s *Store) UploadsAfter(ctx context.Context, bucket, prefix, afterKey, afterID string, limit int) ([]meta.Upload, error) {
	end := rules.PrefixEnd(prefix)
	if end == nil {
		end = []byte{0xff, 0xff}
	}
	var out []meta.Upload
	err := s.run(ctx, "list uploads", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+uploadColumns+` FROM multipart_uploads
			WHERE bucket = $1 AND object_key >= $2 AND object_key < $3 AND (object_key > $4 OR (object_key = $4 AND upload_id > $5))
			ORDER BY object_key, upload_id LIMIT $6`,
			bucket, []byte(prefix), end, []byte(afterKey), afterID, rules.Limit(limit))
		if err == nil {
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.Upload, error) { return scanUpload(row) })
		}
		return err
	})
	return nonNil(out), err
}
