package rules

import (
	"unicode/utf8"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// CheckBucketName rejects a name no bucket can have in either store (the
// S3 naming rules proper are the S3 layer's).
func CheckBucketName(name string) error {
	if name == "" || len(name) > meta.MaxBucketNameBytes {
		return errs.E(errs.Invalid, "bucket name must be 1 to %d bytes", meta.MaxBucketNameBytes)
	}
	return nil
}

// CheckKey rejects an object key that is empty, too long or not UTF-8.
func CheckKey(key string) error {
	switch {
	case key == "":
		return errs.E(errs.Invalid, "object key is empty")
	case len(key) > meta.MaxKeyBytes:
		return errs.E(errs.Invalid, "object key is %d bytes; at most %d are allowed", len(key), meta.MaxKeyBytes)
	case !utf8.ValidString(key):
		return errs.E(errs.Invalid, "object key is not valid UTF-8")
	}
	return nil
}

// CheckObject validates an object before it is written.
func CheckObject(o *meta.Object) error {
	if err := CheckBucketName(o.Bucket); err != nil {
		return err
	}
	if err := CheckKey(o.Key); err != nil {
		return err
	}
	if !CanonicalFileID(o.FileID) {
		return errs.E(errs.Invalid, "object %s/%s: file id %q is not a canonical UUID", o.Bucket, o.Key, o.FileID)
	}
	if o.SizeBytes < 0 {
		return errs.E(errs.Invalid, "object %s/%s: negative size", o.Bucket, o.Key)
	}
	return nil
}

// CheckAccessKey validates an access key before it is written.
func CheckAccessKey(k *meta.AccessKey) error {
	if k.AccessKey == "" || k.Secret == "" {
		return errs.E(errs.Invalid, "an access key needs an id and a secret")
	}
	return nil
}

// PrefixEnd is the smallest byte string greater than every string that
// starts with p, or nil when there is none (p is empty or all 0xff).
func PrefixEnd(p string) []byte {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			end := append([]byte(nil), b[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// BucketNotFound is the error for a bucket that does not exist.
func BucketNotFound(name string) error {
	return errs.WithCode(errs.NotFound, errs.CodeBucketNotFound, nil, "bucket %s not found", name)
}

// ObjectNotFound is the error for a key a bucket does not hold.
func ObjectNotFound(bucket, key string) error {
	return errs.WithCode(errs.NotFound, errs.CodeObjectNotFound, nil, "object %s/%s not found", bucket, key)
}

// AccessKeyNotFound is the error for an unknown access key.
func AccessKeyNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeAccessKeyNotFound, nil, "access key %s not found", id)
}

// BucketNotEmpty is the error for deleting a bucket that holds objects.
func BucketNotEmpty(name string) error {
	return errs.WithCode(errs.Conflict, errs.CodeBucketNotEmpty, nil, "bucket %s is not empty", name)
}

// BucketExists is the error for creating a bucket whose name is taken.
func BucketExists(name string) error {
	return errs.WithCode(errs.Conflict, errs.CodeBucketExists, nil, "bucket %s already exists", name)
}

// Limit bounds a page size to what a store reads at once.
func Limit(n int) int { return min(max(n, 0), 10000) }

// CheckUpload validates a multipart upload before it is written, and sets
// what the stores default.
func CheckUpload(u *meta.Upload) error {
	if u.ID == "" || u.SessionID == "" {
		return errs.E(errs.Invalid, "an upload needs an id and a session")
	}
	if err := CheckBucketName(u.Bucket); err != nil {
		return err
	}
	if err := CheckKey(u.Key); err != nil {
		return err
	}
	if u.Headers == nil {
		u.Headers = map[string]string{}
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = Now()
	}
	u.CreatedAt = Time(u.CreatedAt)
	return nil
}

// UploadNotFound is the error for an unknown multipart upload.
func UploadNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeMultipartNotFound, nil, "upload %s not found", id)
}
