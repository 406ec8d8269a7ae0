package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// DeleteObjectIf removes the key if what it holds meets p. The row is
// locked by the look that checks p, so no write of the key comes between
// the check and the delete.
func (s *Store) DeleteObjectIf(ctx context.Context, bucket, key string, p meta.Precondition) (meta.Object, error) {
	var o meta.Object
	err := s.tx(ctx, "delete object "+bucket+"/"+key+" if it meets its precondition", func(ctx context.Context, tx pgx.Tx) error {
		var etag string
		err := tx.QueryRow(ctx, `SELECT etag FROM objects WHERE bucket = $1 AND object_key = $2 FOR UPDATE`,
			bucket, []byte(key)).Scan(&etag)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := p.Check(bucket, key, err == nil, etag); err != nil {
			return err
		}
		o, err = scanObject(tx.QueryRow(ctx, `DELETE FROM objects WHERE bucket = $1 AND object_key = $2 RETURNING `+objectColumns,
			bucket, []byte(key)))
		if errors.Is(err, pgx.ErrNoRows) {
			return rules.ObjectNotFound(bucket, key)
		}
		return err
	})
	return o, err
}
