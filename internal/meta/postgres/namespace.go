package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

var _ meta.Namespace = (*Store)(nil)

// CreateBucket inserts b.
func (s *Store) CreateBucket(ctx context.Context, b *meta.Bucket) error {
	if err := rules.CheckBucketName(b.Name); err != nil {
		return err
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = rules.Now()
	}
	b.CreatedAt = rules.Time(b.CreatedAt)
	err := s.run(ctx, "create bucket "+b.Name, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO buckets (name, owner, created_at) VALUES ($1, $2, $3)`, b.Name, b.Owner, b.CreatedAt)
		return err
	})
	if errs.Is(err, errs.Conflict) {
		return rules.BucketExists(b.Name)
	}
	return err
}

// GetBucket reads one bucket.
func (s *Store) GetBucket(ctx context.Context, name string) (meta.Bucket, error) {
	b := meta.Bucket{Name: name}
	err := s.run(ctx, "get bucket "+name, func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `SELECT owner, created_at, tags, cors FROM buckets WHERE name = $1`, name).Scan(&b.Owner, &b.CreatedAt, &b.Tags, &b.CORS)
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.BucketNotFound(name)
		}
		return err
	})
	b.CreatedAt = b.CreatedAt.UTC()
	return b, err
}

// ListBuckets returns every bucket in name order.
func (s *Store) ListBuckets(ctx context.Context) ([]meta.Bucket, error) {
	var out []meta.Bucket
	err := s.run(ctx, "list buckets", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT name, owner, created_at, tags, cors FROM buckets ORDER BY name`)
		if err == nil {
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.Bucket, error) {
				var b meta.Bucket
				err := row.Scan(&b.Name, &b.Owner, &b.CreatedAt, &b.Tags, &b.CORS)
				b.CreatedAt = b.CreatedAt.UTC()
				return b, err
			})
		}
		return err
	})
	return nonNil(out), err
}

// PutBucketTags replaces a bucket's tag set.
func (s *Store) PutBucketTags(ctx context.Context, name string, tags []meta.Tag) error {
	return s.run(ctx, "put tags of bucket "+name, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE buckets SET tags = $2 WHERE name = $1`, name, tagsValue(tags))
		if err == nil && tag.RowsAffected() == 0 {
			return rules.BucketNotFound(name)
		}
		return err
	})
}

// PutBucketCORS replaces a bucket's CORS configuration.
func (s *Store) PutBucketCORS(ctx context.Context, name string, cors []meta.CORSRule) error {
	var v any
	if len(cors) > 0 {
		v = cors
	}
	return s.run(ctx, "put CORS of bucket "+name, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE buckets SET cors = $2 WHERE name = $1`, name, v)
		if err == nil && tag.RowsAffected() == 0 {
			return rules.BucketNotFound(name)
		}
		return err
	})
}

// tagsValue is a tag set as its column holds it: NULL for none, else the
// JSON array pgx makes of the slice.
func tagsValue(tags []meta.Tag) any {
	if len(tags) == 0 {
		return nil
	}
	return tags
}

// nonNil makes an empty result an empty slice, as the other store answers.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// DeleteBucket removes an empty bucket. An object written at the same time
// makes the delete fail on the foreign key, which is answered the same way.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	err := s.tx(ctx, "delete bucket "+name, func(ctx context.Context, tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM objects WHERE bucket = $1 UNION ALL SELECT 1 FROM multipart_uploads WHERE bucket = $1 LIMIT 1`, name).Scan(&one)
		switch {
		case err == nil:
			return rules.BucketNotEmpty(name)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM buckets WHERE name = $1`, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return rules.BucketNotFound(name)
		}
		return nil
	})
	if errs.KindOf(err) == errs.Invalid {
		return rules.BucketNotEmpty(name)
	}
	return err
}

const objectColumns = `bucket, object_key, file_id::text, size_bytes, etag, content_type, headers, modified_at, tags`

func scanObject(row pgx.Row) (meta.Object, error) {
	var o meta.Object
	var key []byte
	if err := row.Scan(&o.Bucket, &key, &o.FileID, &o.SizeBytes, &o.ETag, &o.ContentType, &o.Headers, &o.ModifiedAt, &o.Tags); err != nil {
		return meta.Object{}, err
	}
	o.Key, o.ModifiedAt = string(key), o.ModifiedAt.UTC()
	if o.Headers == nil {
		o.Headers = map[string]string{}
	}
	return o, nil
}

// PutObject points the key at o.FileID and returns the file it held before.
func (s *Store) PutObject(ctx context.Context, o *meta.Object) (string, error) {
	if err := prepareObject(o); err != nil {
		return "", err
	}
	var replaced string
	err := s.tx(ctx, "put object "+o.Bucket+"/"+o.Key, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		replaced, err = putObject(ctx, tx, o)
		return err
	})
	if err != nil {
		return "", err
	}
	return replaced, nil
}

// prepareObject checks o and sets its ModifiedAt to the store's precision
// (now, when zero).
func prepareObject(o *meta.Object) error {
	if err := rules.CheckObject(o); err != nil {
		return err
	}
	if o.ModifiedAt.IsZero() {
		o.ModifiedAt = rules.Now()
	}
	o.ModifiedAt = rules.Time(o.ModifiedAt)
	if o.Headers == nil {
		o.Headers = map[string]string{}
	}
	return nil
}

// putObject is PutObject's write, inside tx: it returns the file the key
// held before, "" when none or when it held o's file already. The old row is
// locked first, so two writers of one key each learn the file the other
// replaced. When the key is new, an insert that loses the race to another
// one waits for it to commit; the transaction is READ COMMITTED, so the
// next look, a statement of its own, sees that row and updates it.
// o.Precondition is checked against the row locked (or the key's absence
// that the insert then proves), so it fails, writing nothing, when another
// writer's object is there.
func putObject(ctx context.Context, tx pgx.Tx, o *meta.Object) (string, error) {
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM buckets WHERE name = $1`, o.Bucket).Scan(&one); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", rules.BucketNotFound(o.Bucket)
		}
		return "", err
	}
	for {
		var replaced, etag string
		err := tx.QueryRow(ctx, `SELECT file_id::text, etag FROM objects WHERE bucket = $1 AND object_key = $2 FOR UPDATE`,
			o.Bucket, []byte(o.Key)).Scan(&replaced, &etag)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", err
		}
		// A row found is locked until the transaction ends; a key found
		// absent is inserted below only if no other writer's row came
		// first, else the look is made again, and sees that row.
		if err := o.Precondition.Check(o.Bucket, o.Key, err == nil, etag); err != nil {
			return "", err
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			tag, err := tx.Exec(ctx, `INSERT INTO objects (`+insertObjectColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
				ON CONFLICT (bucket, object_key) DO NOTHING`,
				o.Bucket, []byte(o.Key), o.FileID, o.SizeBytes, o.ETag, o.ContentType, o.Headers, o.ModifiedAt, tagsValue(o.Tags))
			if err != nil || tag.RowsAffected() == 1 {
				return "", err
			}
			continue
		}
		_, err = tx.Exec(ctx, `UPDATE objects SET file_id = $3, size_bytes = $4, etag = $5, content_type = $6,
			headers = $7, modified_at = $8, tags = $9 WHERE bucket = $1 AND object_key = $2`,
			o.Bucket, []byte(o.Key), o.FileID, o.SizeBytes, o.ETag, o.ContentType, o.Headers, o.ModifiedAt, tagsValue(o.Tags))
		if err != nil || replaced == o.FileID {
			return "", err
		}
		return replaced, nil
	}
}

const insertObjectColumns = `bucket, object_key, file_id, size_bytes, etag, content_type, headers, modified_at, tags`

// GetObject reads one key.
func (s *Store) GetObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	var o meta.Object
	err := s.run(ctx, "get object "+bucket+"/"+key, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		o, err = scanObject(c.QueryRow(ctx, `SELECT `+objectColumns+` FROM objects WHERE bucket = $1 AND object_key = $2`,
			bucket, []byte(key)))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.ObjectNotFound(bucket, key)
		}
		return err
	})
	return o, err
}

// PutObjectTags replaces the tag set of the object the key holds.
func (s *Store) PutObjectTags(ctx context.Context, bucket, key string, tags []meta.Tag) error {
	return s.run(ctx, "put tags of object "+bucket+"/"+key, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE objects SET tags = $3 WHERE bucket = $1 AND object_key = $2`,
			bucket, []byte(key), tagsValue(tags))
		if err == nil && tag.RowsAffected() == 0 {
			return rules.ObjectNotFound(bucket, key)
		}
		return err
	})
}

// DeleteObject removes the key and returns what it held.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	var o meta.Object
	err := s.run(ctx, "delete object "+bucket+"/"+key, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		o, err = scanObject(c.QueryRow(ctx, `DELETE FROM objects WHERE bucket = $1 AND object_key = $2 RETURNING `+objectColumns,
			bucket, []byte(key)))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.ObjectNotFound(bucket, key)
		}
		return err
	})
	return o, err
}

// ObjectsAfter reads one page of keys by the primary key's range.
func (s *Store) ObjectsAfter(ctx context.Context, q meta.ObjectQuery) ([]meta.Object, error) {
	end := rules.PrefixEnd(q.Prefix)
	if end == nil {
		end = []byte{0xff, 0xff}
	}
	var out []meta.Object
	err := s.run(ctx, "list objects", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, objectsAfterSQL, q.Bucket, []byte(q.After), []byte(q.Prefix), end, rules.Limit(q.Limit))
		if err == nil {
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.Object, error) { return scanObject(row) })
		}
		return err
	})
	return nonNil(out), err
}

const objectsAfterSQL = `SELECT ` + objectColumns + ` FROM objects
	WHERE bucket = $1 AND object_key > $2 AND object_key >= $3 AND object_key < $4
	ORDER BY object_key LIMIT $5`

// ObjectByFile finds the key that holds fileID.
func (s *Store) ObjectByFile(ctx context.Context, fileID string) (meta.Object, error) {
	if !rules.CanonicalFileID(fileID) {
		return meta.Object{}, errs.E(errs.NotFound, "file %s has no object key", fileID)
	}
	var o meta.Object
	err := s.run(ctx, "object of file "+fileID, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		o, err = scanObject(c.QueryRow(ctx, `SELECT `+objectColumns+` FROM objects WHERE file_id = $1`, fileID))
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.E(errs.NotFound, "file %s has no object key", fileID)
		}
		return err
	})
	return o, err
}

// CreateAccessKey inserts k.
func (s *Store) CreateAccessKey(ctx context.Context, k *meta.AccessKey) error {
	if err := rules.CheckAccessKey(k); err != nil {
		return err
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = rules.Now()
	}
	k.CreatedAt = rules.Time(k.CreatedAt)
	err := s.run(ctx, "create access key "+k.AccessKey, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO access_keys (access_key, name, secret, admin, created_at)
			VALUES ($1, $2, $3, $4, $5)`, k.AccessKey, k.Name, k.Secret, k.Admin, k.CreatedAt)
		return err
	})
	if errs.Is(err, errs.Conflict) {
		return errs.Wrap(errs.Conflict, err, "access key %s already exists", k.AccessKey)
	}
	return err
}

func scanAccessKey(row pgx.Row) (meta.AccessKey, error) {
	var k meta.AccessKey
	if err := row.Scan(&k.AccessKey, &k.Name, &k.Secret, &k.Admin, &k.CreatedAt); err != nil {
		return meta.AccessKey{}, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	return k, nil
}

// GetAccessKey reads one key.
func (s *Store) GetAccessKey(ctx context.Context, id string) (meta.AccessKey, error) {
	var k meta.AccessKey
	err := s.run(ctx, "get access key", func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		k, err = scanAccessKey(c.QueryRow(ctx, `SELECT access_key, name, secret, admin, created_at
			FROM access_keys WHERE access_key = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.AccessKeyNotFound(id)
		}
		return err
	})
	return k, err
}

// ListAccessKeys returns every key in id order.
func (s *Store) ListAccessKeys(ctx context.Context) ([]meta.AccessKey, error) {
	var out []meta.AccessKey
	err := s.run(ctx, "list access keys", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT access_key, name, secret, admin, created_at FROM access_keys ORDER BY access_key`)
		if err == nil {
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (meta.AccessKey, error) { return scanAccessKey(row) })
		}
		return err
	})
	return nonNil(out), err
}

// DeleteAccessKey removes one key.
func (s *Store) DeleteAccessKey(ctx context.Context, id string) error {
	return s.run(ctx, "delete access key "+id, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `DELETE FROM access_keys WHERE access_key = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return rules.AccessKeyNotFound(id)
		}
		return nil
	})
}
