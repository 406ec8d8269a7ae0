package meta

import (
	"context"
	"strings"
	"time"
)

// Bucket is one S3 bucket: a namespace of object keys owned by the access
// key that created it.
type Bucket struct {
	Name      string
	Owner     string // access key id of the creator
	CreatedAt time.Time
	// Tags is the bucket's tag set (PutBucketTags), nil when it has none.
	Tags []Tag
	// CORS is the bucket's CORS configuration (PutBucketCORS), nil when it
	// has none.
	CORS []CORSRule
}

// CORSRule is one rule of a bucket's CORS configuration, as S3 defines it:
// a browser request from one of AllowedOrigins with one of AllowedMethods
// (and, for a preflight, only AllowedHeaders) is allowed, and its answer
// exposes ExposeHeaders. Origins and headers may hold one "*" wildcard.
// The S3 layer checks the rules; the store keeps them as given.
type CORSRule struct {
	ID             string   `json:"id,omitempty"`
	AllowedOrigins []string `json:"origins"`
	AllowedMethods []string `json:"methods"`
	AllowedHeaders []string `json:"headers,omitempty"`
	ExposeHeaders  []string `json:"expose,omitempty"`
	// MaxAgeSeconds is how long a browser may cache a preflight's answer;
	// nil leaves it to the browser.
	MaxAgeSeconds *int `json:"maxAge,omitempty"`
}

// Tag is one key and value of an object's or a bucket's tag set. A tag set
// keeps the order it was given in; the S3 layer checks S3's limits on it.
type Tag struct {
	Key   string `json:"k"`
	Value string `json:"v"`
}

// Object is one key of a bucket and the file that holds its bytes. A file
// uploaded through the REST API has no object; an object always has its
// file (deleting the file row removes the object with it).
type Object struct {
	Bucket      string
	Key         string // any UTF-8, up to MaxKeyBytes
	FileID      string
	SizeBytes   int64
	ETag        string // without quotes: MD5 hex, or MD5-of-part-MD5s "-N"
	ContentType string
	// Headers are the stored headers given back on every read:
	// x-amz-meta-* (lower-case names), Cache-Control, Content-Disposition,
	// Content-Encoding, Content-Language and Expires.
	Headers map[string]string
	// Tags is the object's tag set, nil when it has none. It belongs to
	// this version of the key: a PutObject writes the tags it carries and
	// drops those the key held.
	Tags       []Tag
	ModifiedAt time.Time
	// Precondition, when set on an object being written, is checked in the
	// transaction that moves the key (PutObject, and an upload's final
	// write); it is never stored, and a read leaves it nil.
	Precondition *Precondition
}

// AccessKey is an S3 / REST credential. Secret is stored as the caller gives
// it: the auth layer seals it before it reaches the store.
type AccessKey struct {
	AccessKey string
	Name      string
	Secret    string
	Admin     bool
	CreatedAt time.Time
}

// Limits of the namespace, as S3 sets them.
const (
	MaxKeyBytes        = 1024
	MaxBucketNameBytes = 63
)

// ObjectQuery selects up to Limit objects of Bucket whose keys start with
// Prefix and sort after After, in byte order of keys.
type ObjectQuery struct {
	Bucket, Prefix, After string
	Limit                 int
}

// Namespace maps bucket names and object keys to files, and keeps the
// access keys. Both metadata stores implement it beside Store. Errors carry
// errs kinds: NotFound for a missing bucket, object or key, Conflict for a
// name that exists or a bucket that is not empty, Invalid for a malformed
// name or a file that does not exist.
type Namespace interface {
	// CreateBucket inserts b (CreatedAt set when zero). Conflict if it exists.
	CreateBucket(ctx context.Context, b *Bucket) error
	GetBucket(ctx context.Context, name string) (Bucket, error)
	// ListBuckets returns every bucket in name order.
	ListBuckets(ctx context.Context) ([]Bucket, error)
	// PutBucketTags replaces a bucket's tag set (nil or empty: none).
	// NotFound if the bucket is absent.
	PutBucketTags(ctx context.Context, name string, tags []Tag) error
	// PutBucketCORS replaces a bucket's CORS configuration (nil or empty:
	// none). NotFound if the bucket is absent.
	PutBucketCORS(ctx context.Context, name string, rules []CORSRule) error
	// DeleteBucket removes an empty bucket: NotFound if absent, Conflict
	// while it holds an object.
	DeleteBucket(ctx context.Context, name string) error

	// PutObject points o.Key at o.FileID in one transaction and returns the
	// file the key held before ("" if none), which the caller deletes: the
	// key moves only once the new file is complete. NotFound when the bucket
	// is absent, Invalid when the file is; with o.Precondition, its errors
	// (Precondition.Check) when what the key holds does not meet it, the key
	// then left as it was.
	PutObject(ctx context.Context, o *Object) (replaced string, err error)
	GetObject(ctx context.Context, bucket, key string) (Object, error)
	// DeleteObject removes the key and returns what it held. NotFound if
	// absent.
	DeleteObject(ctx context.Context, bucket, key string) (Object, error)
	// PutObjectTags replaces the tag set of the object the key holds now
	// (nil or empty: none). NotFound if the key is absent.
	PutObjectTags(ctx context.Context, bucket, key string, tags []Tag) error
	// DeleteObjectIf is DeleteObject if what the key holds meets p, checked
	// in the delete's transaction: NotFound when the key is absent and p
	// names ETags, Precondition (ErrPreconditionFailed) when p does not hold.
	DeleteObjectIf(ctx context.Context, bucket, key string, p Precondition) (Object, error)
	// ObjectsAfter is one page of keys in byte order, by the (bucket, key)
	// index: a range read, never a scan.
	ObjectsAfter(ctx context.Context, q ObjectQuery) ([]Object, error)
	// ObjectByFile finds the key that holds fileID. NotFound if none.
	ObjectByFile(ctx context.Context, fileID string) (Object, error)

	// CreateAccessKey inserts k (CreatedAt set when zero). Conflict if the
	// access key id exists.
	CreateAccessKey(ctx context.Context, k *AccessKey) error
	GetAccessKey(ctx context.Context, accessKey string) (AccessKey, error)
	// ListAccessKeys returns every key in access key order.
	ListAccessKeys(ctx context.Context) ([]AccessKey, error)
	// DeleteAccessKey removes a key. NotFound if absent.
	DeleteAccessKey(ctx context.Context, accessKey string) error

	// CreateUpload records a multipart upload (CreatedAt set when zero).
	// NotFound when the bucket is absent, Conflict if the id exists.
	CreateUpload(ctx context.Context, u *Upload) error
	// GetUpload reads one upload. NotFound if absent.
	GetUpload(ctx context.Context, uploadID string) (Upload, error)
	// DeleteUpload forgets an upload (completed or aborted). NotFound if
	// absent.
	DeleteUpload(ctx context.Context, uploadID string) error
	// UploadsAfter lists up to limit uploads of bucket whose keys start with
	// prefix, ordered by (key, upload id), after (afterKey, afterID): the
	// (bucket, key, upload id) index's range.
	UploadsAfter(ctx context.Context, bucket, prefix, afterKey, afterID string, limit int) ([]Upload, error)
}

// Upload is an S3 multipart upload in progress: the file service's upload
// session that holds its parts, and the object it will make.
type Upload struct {
	ID          string
	SessionID   string
	Bucket      string
	Key         string
	Owner       string
	ContentType string
	Headers     map[string]string
	// Tags are the tags the object will have (nil: none).
	Tags      []Tag
	CreatedAt time.Time
}

// ListQuery is an S3 listing: keys with Prefix after After, with keys that
// hold Delimiter after the prefix rolled up into common prefixes, at most
// MaxKeys entries (objects and prefixes together).
type ListQuery struct {
	Bucket, Prefix, Delimiter, After string
	MaxKeys                          int
}

// ListPage is one page of a listing. Next is the After of the next page
// when Truncated: the last key or common prefix given.
type ListPage struct {
	Objects   []Object
	Prefixes  []string
	Truncated bool
	Next      string
}

// afterPrefix sorts after every key that starts with p: keys are UTF-8, in
// which the byte 0xff never occurs.
func afterPrefix(p string) string { return p + "\xff" }

// List answers q from ns, one index range read per page of keys and one per
// common prefix (which it skips past in one seek rather than reading its
// keys).
func List(ctx context.Context, ns Namespace, q ListQuery) (ListPage, error) {
	var page ListPage
	if q.MaxKeys <= 0 {
		return page, nil
	}
	after := q.After
	if q.Delimiter != "" && strings.HasPrefix(after, q.Prefix) {
		// A marker that is a common prefix (the Next of a page that
		// ended on one) continues past every key under it.
		if i := strings.Index(after[len(q.Prefix):], q.Delimiter); i >= 0 && len(q.Prefix)+i+len(q.Delimiter) == len(after) {
			after = afterPrefix(after)
		}
	}
	count := 0
next:
	for {
		// One more than is left, to learn whether the listing goes on.
		limit := q.MaxKeys - count + 1
		batch, err := ns.ObjectsAfter(ctx, ObjectQuery{Bucket: q.Bucket, Prefix: q.Prefix, After: after, Limit: limit})
		if err != nil {
			return ListPage{}, err
		}
		for _, o := range batch {
			if count == q.MaxKeys {
				page.Truncated = true
				return page, nil
			}
			count++
			if q.Delimiter != "" {
				if i := strings.Index(o.Key[len(q.Prefix):], q.Delimiter); i >= 0 {
					cp := o.Key[:len(q.Prefix)+i+len(q.Delimiter)]
					page.Prefixes = append(page.Prefixes, cp)
					after, page.Next = afterPrefix(cp), cp
					continue next
				}
			}
			page.Objects = append(page.Objects, o)
			after = o.Key
			page.Next = after
		}
		// A batch read whole without a common prefix was shorter than
		// asked for: the range holds nothing more.
		return page, nil
	}
}
