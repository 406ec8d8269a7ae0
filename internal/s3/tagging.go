package s3

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
)

// S3's limits on tag sets.
const (
	maxObjectTags    = 10
	maxBucketTags    = 50
	maxTagKeyChars   = 128
	maxTagValueChars = 256
)

func invalidTag(msg string) *Error { return s3err(http.StatusBadRequest, "InvalidTag", msg) }

var errNoSuchTagSet = s3err(http.StatusNotFound, "NoSuchTagSet", "The TagSet does not exist")

// checkTags holds a tag set to S3's rules: at most limit tags, keys of 1 to
// 128 Unicode characters that do not start with aws: and are distinct,
// values of at most 256.
func checkTags(tags []meta.Tag, limit int, what string) error {
	if len(tags) > limit {
		return invalidTag(what + " tags cannot be greater than " + strconv.Itoa(limit))
	}
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		switch {
		case !utf8.ValidString(t.Key) || !utf8.ValidString(t.Value):
			return invalidTag("A tag is not valid UTF-8")
		case t.Key == "" || utf8.RuneCountInString(t.Key) > maxTagKeyChars:
			return invalidTag("The TagKey you have provided is invalid: it must be 1 to 128 characters")
		case utf8.RuneCountInString(t.Value) > maxTagValueChars:
			return invalidTag("The TagValue you have provided is too long: at most 256 characters are allowed")
		case strings.HasPrefix(strings.ToLower(t.Key), "aws:"):
			return invalidTag("Your TagKey cannot be prefixed with aws:")
		case seen[t.Key]:
			return invalidTag("Cannot provide multiple Tags with the same key")
		}
		seen[t.Key] = true
	}
	return nil
}

// headerTags reads x-amz-tagging, a URL query ("a=1&b=2") kept in its
// order; nil when the header is absent or empty.
func headerTags(h http.Header) ([]meta.Tag, error) {
	v := h.Get("X-Amz-Tagging")
	if v == "" {
		return nil, nil
	}
	var tags []meta.Tag
	for pair := range strings.SplitSeq(v, "&") {
		if pair == "" {
			continue
		}
		k, val, _ := strings.Cut(pair, "=")
		key, kerr := url.QueryUnescape(k)
		value, verr := url.QueryUnescape(val)
		if kerr != nil || verr != nil {
			return nil, invalidArgument("x-amz-tagging must be URL-query-encoded (key1=value1&key2=value2)")
		}
		tags = append(tags, meta.Tag{Key: key, Value: value})
	}
	if err := checkTags(tags, maxObjectTags, "Object"); err != nil {
		return nil, err
	}
	return tags, nil
}

// tagXML is one tag as S3's XML writes it.
type tagXML struct {
	Key   string
	Value string
}

// taggingIn is a PutObjectTagging or PutBucketTagging body, in S3's
// namespace or none.
type taggingIn struct {
	XMLName xml.Name `xml:"Tagging"`
	TagSet  *struct {
		Tag []struct {
			Key   *string
			Value *string
		}
	}
}

type tagging struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ Tagging"`
	TagSet  struct {
		Tag []tagXML
	}
}

// readTagging decodes a tagging body and holds it to S3's rules: a TagSet,
// every tag with a Key and a Value.
func readTagging(r *request, limit int, what string) ([]meta.Tag, error) {
	body, err := objects.DigestReader(r.Body, r.Header.Get("Content-MD5"))
	if err != nil {
		return nil, err
	}
	return parseTagging(body, limit, what)
}

// parseTagging decodes a Tagging document (a body, or a browser upload's
// tagging field) and holds it to S3's rules.
func parseTagging(body io.Reader, limit int, what string) ([]meta.Tag, error) {
	var in taggingIn
	if err := readXML(body, &in); err != nil {
		return nil, err
	}
	if in.TagSet == nil {
		return nil, errMalformedXML
	}
	var tags []meta.Tag
	for _, t := range in.TagSet.Tag {
		if t.Key == nil || t.Value == nil {
			return nil, errMalformedXML
		}
		tags = append(tags, meta.Tag{Key: *t.Key, Value: *t.Value})
	}
	if err := checkTags(tags, limit, what); err != nil {
		return nil, err
	}
	return tags, nil
}

func writeTagging(w http.ResponseWriter, tags []meta.Tag) {
	out := tagging{}
	out.TagSet.Tag = make([]tagXML, len(tags))
	for i, t := range tags {
		out.TagSet.Tag[i] = tagXML(t)
	}
	writeXML(w, http.StatusOK, out)
}

// tagCount gives a GET or HEAD of a tagged object its number of tags, as
// S3 does; an object without tags has no header.
func tagCount(w http.ResponseWriter, o meta.Object) {
	if len(o.Tags) > 0 {
		w.Header().Set("X-Amz-Tagging-Count", strconv.Itoa(len(o.Tags)))
	}
}

// objectTagging answers GetObjectTagging.
func (s *Server) objectTagging(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	o, err := s.o.Namespace.GetObject(r.Context(), r.bucket, r.key)
	if err != nil {
		return err
	}
	writeTagging(w, o.Tags)
	return nil
}

// putObjectTagging answers PutObjectTagging: the tag set of the object the
// key holds is replaced whole.
func (s *Server) putObjectTagging(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	tags, err := readTagging(r, maxObjectTags, "Object")
	if err != nil {
		return err
	}
	if err := s.o.Namespace.PutObjectTags(r.Context(), r.bucket, r.key, tags); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// deleteObjectTagging answers DeleteObjectTagging.
func (s *Server) deleteObjectTagging(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	if err := s.o.Namespace.PutObjectTags(r.Context(), r.bucket, r.key, nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// bucketTagging answers GetBucketTagging: NoSuchTagSet when the bucket
// has none.
func (s *Server) bucketTagging(w http.ResponseWriter, r *request) error {
	b, err := s.ownedBucket(r)
	if err != nil {
		return err
	}
	if len(b.Tags) == 0 {
		return errNoSuchTagSet
	}
	writeTagging(w, b.Tags)
	return nil
}

// putBucketTagging answers PutBucketTagging (an empty TagSet removes the
// tags, as DeleteBucketTagging does).
func (s *Server) putBucketTagging(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	tags, err := readTagging(r, maxBucketTags, "Bucket")
	if err != nil {
		return err
	}
	if err := s.o.Namespace.PutBucketTags(r.Context(), r.bucket, tags); err != nil {
		return err
	}
	s.bucketChanged(r.Context(), r.bucket, "tags")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteBucketTagging answers DeleteBucketTagging.
func (s *Server) deleteBucketTagging(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	if err := s.o.Namespace.PutBucketTags(r.Context(), r.bucket, nil); err != nil {
		return err
	}
	s.bucketChanged(r.Context(), r.bucket, "tags")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// bucketChanged drops a bucket from this coordinator's cache and every
// other's (Options.Peers) once its record has changed or gone, so that no
// coordinator answers from what it held before; what names the change,
// for the log.
func (s *Server) bucketChanged(ctx context.Context, name, what string) {
	s.buckets.forget(name)
	if s.o.Shared && s.o.Peers != nil {
		if err := s.o.Peers.Publish(ctx, peerKind, name); err != nil {
			s.log.Warn("the other coordinators were not told of a changed bucket; one whose notices still arrive may serve its old record from its cache for its TTL",
				"bucket", name, "change", what, "ttl", bucketTTL, "err", err)
		}
	}
}
