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
	err := s.writeTx(ctx, "create bucket "+b.Name, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO buckets (name, owner, created_at) VALUES (?, ?, ?)`,
			b.Name, b.Owner, micros(b.CreatedAt))
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
	var created int64
	var tags, cors sql.NullString
	err := s.read.QueryRowContext(ctx, `SELECT owner, created_at, tags, cors FROM buckets WHERE name = ?`, name).Scan(&b.Owner, &created, &tags, &cors)
	if errors.Is(err, sql.ErrNoRows) {
		return meta.Bucket{}, rules.BucketNotFound(name)
	}
	if err != nil {
		return meta.Bucket{}, fail(ctx, err, "get bucket "+name)
	}
	b.CreatedAt = fromMicros(created)
	return b, readBucketLists(&b, tags, cors)
}

// ListBuckets returns every bucket in name order.
func (s *Store) ListBuckets(ctx context.Context) ([]meta.Bucket, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT name, owner, created_at, tags, cors FROM buckets ORDER BY name`)
	return fail2[[]meta.Bucket](ctx, "list buckets")(collect(rows, err, func(row scanner) (meta.Bucket, error) {
		var b meta.Bucket
		var created int64
		var tags, cors sql.NullString
		if err := row.Scan(&b.Name, &b.Owner, &created, &tags, &cors); err != nil {
			return b, err
		}
		b.CreatedAt = fromMicros(created)
		return b, readBucketLists(&b, tags, cors)
	}))
}

// readBucketLists decodes a bucket row's tags and CORS rules into b.
func readBucketLists(b *meta.Bucket, tags, cors sql.NullString) error {
	var err error
	if b.Tags, err = readTags(tags, "bucket "+b.Name); err != nil {
		return err
	}
	b.CORS, err = readList[meta.CORSRule](cors, "bucket "+b.Name+": stored CORS rules")
	return err
}

// collect reads every row of a query with scan.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// fail2 gives a (result, error) pair's error its kind, as fail does.
func fail2[T any](ctx context.Context, op string) func(T, error) (T, error) {
	return func(v T, err error) (T, error) { return v, fail(ctx, err, op) }
}

// DeleteBucket removes an empty bucket.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	return s.writeTx(ctx, "delete bucket "+name, func(ctx context.Context, tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM objects WHERE bucket = ? UNION ALL SELECT 1 FROM multipart_uploads WHERE bucket = ? LIMIT 1`, name, name).Scan(&one)
		switch {
		case err == nil:
			return rules.BucketNotEmpty(name)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return deleteOne(ctx, tx, `DELETE FROM buckets WHERE name = ?`, name, rules.BucketNotFound(name))
	})
}

// deleteOne runs a DELETE of one row by its key; no row is missing.
func deleteOne(ctx context.Context, tx *sql.Tx, query, key string, missing error) error {
	res, err := tx.ExecContext(ctx, query, key)
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

const objectColumns = `bucket, object_key, file_id, size_bytes, etag, content_type, headers, modified_at, tags`

func scanObject(row scanner) (meta.Object, error) {
	var o meta.Object
	var key []byte
	var headers string
	var modified int64
	var tags sql.NullString
	if err := row.Scan(&o.Bucket, &key, &o.FileID, &o.SizeBytes, &o.ETag, &o.ContentType, &headers, &modified, &tags); err != nil {
		return meta.Object{}, err
	}
	o.Key, o.ModifiedAt = string(key), fromMicros(modified)
	if err := json.Unmarshal([]byte(headers), &o.Headers); err != nil {
		return meta.Object{}, errs.Wrap(errs.Corrupt, err, "object %s/%s: stored headers", o.Bucket, o.Key)
	}
	var err error
	o.Tags, err = readTags(tags, "object "+o.Bucket+"/"+o.Key)
	return o, err
}

// PutObject points the key at o.FileID and returns the file it held before.
func (s *Store) PutObject(ctx context.Context, o *meta.Object) (string, error) {
	row, err := prepareObject(o)
	if err != nil {
		return "", err
	}
	var replaced string
	err = s.writeTx(ctx, "put object "+o.Bucket+"/"+o.Key, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		replaced, err = s.putObject(ctx, tx, o, row)
		return err
	})
	if err != nil {
		return "", err
	}
	return replaced, nil
}

// objectJSON is what an object's row holds as JSON: its headers and its
// tags (nil: NULL).
type objectJSON struct {
	headers string
	tags    any
}

// prepareObject checks o, sets its ModifiedAt to the store's precision
// (now, when zero) and returns its headers and tags as stored.
func prepareObject(o *meta.Object) (objectJSON, error) {
	if err := rules.CheckObject(o); err != nil {
		return objectJSON{}, err
	}
	if o.ModifiedAt.IsZero() {
		o.ModifiedAt = rules.Now()
	}
	o.ModifiedAt = rules.Time(o.ModifiedAt)
	if o.Headers == nil {
		o.Headers = map[string]string{}
	}
	headers, err := json.Marshal(o.Headers)
	if err != nil {
		return objectJSON{}, errs.Wrap(errs.Invalid, err, "object headers")
	}
	tags, err := tagsValue(o.Tags)
	if err != nil {
		return objectJSON{}, err
	}
	return objectJSON{headers: string(headers), tags: tags}, nil
}

// putObject is PutObject's write, inside tx: it returns the file the key
// held before, "" when none or when it held o's file already. It fails,
// writing nothing, when o.Precondition does not hold.
func (s *Store) putObject(ctx context.Context, tx *sql.Tx, o *meta.Object, row objectJSON) (string, error) {
	var one int
	if err := s.ws.queryRow(ctx, tx, sqlBucketExists, o.Bucket).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", rules.BucketNotFound(o.Bucket)
		}
		return "", err
	}
	var replaced, etag string
	err := s.ws.queryRow(ctx, tx, sqlObjectFileID, o.Bucket, []byte(o.Key)).Scan(&replaced, &etag)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	// The committer runs one write at a time: what was just read is what
	// the key holds until this transaction ends.
	if err := o.Precondition.Check(o.Bucket, o.Key, err == nil, etag); err != nil {
		return "", err
	}
	if _, err := s.ws.exec(ctx, tx, sqlPutObject,
		o.Bucket, []byte(o.Key), o.FileID, o.SizeBytes, o.ETag, o.ContentType, row.headers, micros(o.ModifiedAt), row.tags); err != nil {
		return "", err
	}
	if replaced == o.FileID {
		return "", nil
	}
	return replaced, nil
}

// PutObject's statements, prepared on the write pool when the store opens
// (writeQueries): every S3 PutObject runs all three, in its upload's final write
// (UpdateFileAndPutObject) or alone.
var (
	sqlBucketExists = `SELECT 1 FROM buckets WHERE name = ?`
	sqlObjectFileID = `SELECT file_id, etag FROM objects WHERE bucket = ? AND object_key = ?`
	sqlPutObject    = `INSERT INTO objects (` + objectColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (bucket, object_key) DO UPDATE SET file_id = excluded.file_id, size_bytes = excluded.size_bytes,
		etag = excluded.etag, content_type = excluded.content_type, headers = excluded.headers,
		modified_at = excluded.modified_at, tags = excluded.tags`
)

// GetObject reads one key.
func (s *Store) GetObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	o, err := scanObject(s.rs.queryRowPool(ctx, s.read, sqlObjectByKey, bucket, []byte(key)))
	if errors.Is(err, sql.ErrNoRows) {
		return meta.Object{}, rules.ObjectNotFound(bucket, key)
	}
	return o, fail(ctx, err, "get object "+bucket+"/"+key)
}

// DeleteObject removes the key and returns what it held.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	var o meta.Object
	err := s.writeTx(ctx, "delete object "+bucket+"/"+key, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		o, err = scanObject(tx.QueryRowContext(ctx, `DELETE FROM objects WHERE bucket = ? AND object_key = ?
			RETURNING `+objectColumns, bucket, []byte(key)))
		if errors.Is(err, sql.ErrNoRows) {
			return rules.ObjectNotFound(bucket, key)
		}
		return err
	})
	return o, err
}

// sqlObjectByKey is the read every S3 GetObject and HeadObject makes,
// prepared on the read pool with the file lookups.
var sqlObjectByKey = `SELECT ` + objectColumns + ` FROM objects WHERE bucket = ? AND object_key = ?`

// ObjectsAfter reads one page of keys by the primary key's range.
func (s *Store) ObjectsAfter(ctx context.Context, q meta.ObjectQuery) ([]meta.Object, error) {
	end := rules.PrefixEnd(q.Prefix)
	if end == nil {
		end = []byte{0xff, 0xff}
	}
	rows, err := s.read.QueryContext(ctx, objectsAfterSQL, q.Bucket, []byte(q.After), []byte(q.Prefix), end, rules.Limit(q.Limit))
	return fail2[[]meta.Object](ctx, "list objects")(collect(rows, err, scanObject))
}

const objectsAfterSQL = `SELECT ` + objectColumns + ` FROM objects
	WHERE bucket = ? AND object_key > ? AND object_key >= ? AND object_key < ?
	ORDER BY object_key LIMIT ?`

// ObjectByFile finds the key that holds fileID.
func (s *Store) ObjectByFile(ctx context.Context, fileID string) (meta.Object, error) {
	o, err := scanObject(s.read.QueryRowContext(ctx, `SELECT `+objectColumns+` FROM objects WHERE file_id = ?`, fileID))
	if errors.Is(err, sql.ErrNoRows) {
		return meta.Object{}, errs.E(errs.NotFound, "file %s has no object key", fileID)
	}
	return o, fail(ctx, err, "object of file "+fileID)
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
	err := s.writeTx(ctx, "create access key "+k.AccessKey, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO access_keys (access_key, name, secret, admin, created_at)
			VALUES (?, ?, ?, ?, ?)`, k.AccessKey, k.Name, k.Secret, k.Admin, micros(k.CreatedAt))
		return err
	})
	if errs.Is(err, errs.Conflict) {
		return errs.Wrap(errs.Conflict, err, "access key %s already exists", k.AccessKey)
	}
	return err
}

func scanAccessKey(row scanner) (meta.AccessKey, error) {
	var k meta.AccessKey
	var created int64
	if err := row.Scan(&k.AccessKey, &k.Name, &k.Secret, &k.Admin, &created); err != nil {
		return meta.AccessKey{}, err
	}
	k.CreatedAt = fromMicros(created)
	return k, nil
}

// GetAccessKey reads one key.
func (s *Store) GetAccessKey(ctx context.Context, id string) (meta.AccessKey, error) {
	k, err := scanAccessKey(s.read.QueryRowContext(ctx, `SELECT access_key, name, secret, admin, created_at
		FROM access_keys WHERE access_key = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return meta.AccessKey{}, rules.AccessKeyNotFound(id)
	}
	return k, fail(ctx, err, "get access key")
}

// ListAccessKeys returns every key in id order.
func (s *Store) ListAccessKeys(ctx context.Context) ([]meta.AccessKey, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT access_key, name, secret, admin, created_at FROM access_keys ORDER BY access_key`)
	return fail2[[]meta.AccessKey](ctx, "list access keys")(collect(rows, err, scanAccessKey))
}

// DeleteAccessKey removes one key.
func (s *Store) DeleteAccessKey(ctx context.Context, id string) error {
	return s.writeTx(ctx, "delete access key "+id, func(ctx context.Context, tx *sql.Tx) error {
		return deleteOne(ctx, tx, `DELETE FROM access_keys WHERE access_key = ?`, id, rules.AccessKeyNotFound(id))
	})
}
