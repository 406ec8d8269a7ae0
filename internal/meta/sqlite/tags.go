package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// tagsValue is a tag set as its column holds it: NULL for none, else a
// JSON array.
func tagsValue(tags []meta.Tag) (any, error) { return jsonList(tags, "tags") }

// jsonList is a list as a JSON column holds it: NULL for none.
func jsonList[T any](list []T, what string) (any, error) {
	if len(list) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "%s", what)
	}
	return string(b), nil
}

// readTags decodes a tags column; what names the row, for the error.
func readTags(col sql.NullString, what string) ([]meta.Tag, error) {
	return readList[meta.Tag](col, what+": stored tags")
}

// readList decodes a JSON list column that jsonList wrote.
func readList[T any](col sql.NullString, what string) ([]T, error) {
	if !col.Valid {
		return nil, nil
	}
	var list []T
	if err := json.Unmarshal([]byte(col.String), &list); err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "%s", what)
	}
	return list, nil
}

// PutObjectTags replaces the tag set of the object the key holds.
func (s *Store) PutObjectTags(ctx context.Context, bucket, key string, tags []meta.Tag) error {
	v, err := tagsValue(tags)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, "put tags of object "+bucket+"/"+key, func(ctx context.Context, tx *sql.Tx) error {
		return updateOne(ctx, tx, `UPDATE objects SET tags = ? WHERE bucket = ? AND object_key = ?`,
			rules.ObjectNotFound(bucket, key), v, bucket, []byte(key))
	})
}

// PutBucketTags replaces a bucket's tag set.
func (s *Store) PutBucketTags(ctx context.Context, name string, tags []meta.Tag) error {
	v, err := tagsValue(tags)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, "put tags of bucket "+name, func(ctx context.Context, tx *sql.Tx) error {
		return updateOne(ctx, tx, `UPDATE buckets SET tags = ? WHERE name = ?`, rules.BucketNotFound(name), v, name)
	})
}

// PutBucketCORS replaces a bucket's CORS configuration.
func (s *Store) PutBucketCORS(ctx context.Context, name string, cors []meta.CORSRule) error {
	v, err := jsonList(cors, "CORS rules")
	if err != nil {
		return err
	}
	return s.writeTx(ctx, "put CORS of bucket "+name, func(ctx context.Context, tx *sql.Tx) error {
		return updateOne(ctx, tx, `UPDATE buckets SET cors = ? WHERE name = ?`, rules.BucketNotFound(name), v, name)
	})
}

// updateOne runs an UPDATE of one row by its key; no row is missing.
func updateOne(ctx context.Context, tx *sql.Tx, query string, missing error, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return missing
	}
	return nil
}
