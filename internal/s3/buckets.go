package s3

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
)

var errInvalidBucketName = s3err(http.StatusBadRequest, "InvalidBucketName", "The specified bucket is not valid.")

func checkBucketName(name string) error {
	if !objects.ValidBucketName(name) {
		return errInvalidBucketName
	}
	return nil
}

type owner struct {
	ID          string
	DisplayName string
}

type bucketXML struct {
	Name         string
	CreationDate string
}

type listAllMyBucketsResult struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListAllMyBucketsResult"`
	Owner   owner
	Buckets []bucketXML `xml:"Buckets>Bucket"`
}

// s3Time is a timestamp as S3's XML writes it.
func s3Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *Server) listBuckets(w http.ResponseWriter, r *request) error {
	all, err := s.o.Namespace.ListBuckets(r.Context())
	if err != nil {
		return err
	}
	out := listAllMyBucketsResult{Owner: owner{ID: r.accessKey, DisplayName: r.accessKey}, Buckets: []bucketXML{}}
	for _, b := range all {
		if b.Owner == r.accessKey || r.admin {
			out.Buckets = append(out.Buckets, bucketXML{Name: b.Name, CreationDate: s3Time(b.CreatedAt)})
		}
	}
	writeXML(w, http.StatusOK, out)
	return nil
}

type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string
}

func (s *Server) createBucket(w http.ResponseWriter, r *request) error {
	if err := checkBucketName(r.bucket); err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		var cfg createBucketConfiguration
		if err := xml.Unmarshal(body, &cfg); err != nil {
			return errMalformedXML
		}
		if cfg.LocationConstraint != "" && cfg.LocationConstraint != s.o.Region {
			return s3err(http.StatusBadRequest, "InvalidLocationConstraint",
				"The specified location-constraint is not valid; this endpoint serves "+s.o.Region)
		}
	}
	err = s.o.Namespace.CreateBucket(r.Context(), &meta.Bucket{Name: r.bucket, Owner: r.accessKey})
	if errs.CodeOf(err) == errs.CodeBucketExists {
		if b, gerr := s.o.Namespace.GetBucket(r.Context(), r.bucket); gerr == nil && b.Owner == r.accessKey {
			return s3err(http.StatusConflict, "BucketAlreadyOwnedByYou",
				"Your previous request to create the named bucket succeeded and you already own it.")
		}
		return s3err(http.StatusConflict, "BucketAlreadyExists",
			"The requested bucket name is not available. Select a different name and try again.")
	}
	if err != nil {
		return err
	}
	s.log.Info("bucket created", "bucket", r.bucket, "owner", r.accessKey)
	w.Header().Set("Location", "/"+r.bucket)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucket(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	if err := s.abortUploads(r); err != nil {
		return err
	}
	if err := s.o.Namespace.DeleteBucket(r.Context(), r.bucket); err != nil {
		return err
	}
	s.bucketChanged(r.Context(), r.bucket, "deleted")
	s.log.Info("bucket deleted", "bucket", r.bucket, "by", r.accessKey)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// abortUploads aborts every unfinished multipart upload of a bucket that
// holds no object, parts and all: S3 deletes a general-purpose bucket
// whose only contents are such uploads. A bucket holding an object keeps
// its uploads and is refused as not empty.
func (s *Server) abortUploads(r *request) error {
	held, err := s.o.Namespace.ObjectsAfter(r.Context(), meta.ObjectQuery{Bucket: r.bucket, Limit: 1})
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return errBucketNotEmpt
	}
	afterKey, afterID := "", ""
	for {
		batch, err := s.o.Namespace.UploadsAfter(r.Context(), r.bucket, "", afterKey, afterID, 1000)
		if err != nil || len(batch) == 0 {
			return err
		}
		for _, u := range batch {
			if err := s.dropUpload(r.Context(), u); err != nil {
				return err
			}
			s.log.Info("multipart upload aborted with its bucket", "bucket", u.Bucket, "key", u.Key, "upload", u.ID)
			afterKey, afterID = u.Key, u.ID
		}
	}
}

type locationConstraint struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
	Region  string   `xml:",chardata"`
}

func (s *Server) bucketLocation(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	region := s.o.Region
	if region == "us-east-1" {
		region = "" // S3 names its first region by leaving it out
	}
	writeXML(w, http.StatusOK, locationConstraint{Region: region})
	return nil
}

type versioningConfiguration struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ VersioningConfiguration"`
}

// bucketVersioning says, truly, that versioning was never enabled.
func (s *Server) bucketVersioning(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	writeXML(w, http.StatusOK, versioningConfiguration{})
	return nil
}

// readXML decodes a small XML request body into v.
func readXML(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, 2<<20))
	if err != nil {
		return err
	}
	if xml.Unmarshal(b, v) != nil {
		return errMalformedXML
	}
	return nil
}

// readConfig decodes a bucket's or an object's configuration body (a tag
// set, CORS rules) into v, checking its Content-MD5 when the client sent
// one (BadDigest), as S3 does.
func readConfig(r *request, v any) error {
	body, err := objects.DigestReader(r.Body, r.Header.Get("Content-MD5"))
	if err != nil {
		return err
	}
	return readXML(body, v)
}

// grantee is an ACL grant's canonical user, typed as S3 types it.
type grantee struct {
	XSI         string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string
	DisplayName string
}

type grant struct {
	Grantee    grantee
	Permission string
}

type accessControlPolicy struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ AccessControlPolicy"`
	Owner   owner
	Grants  []grant `xml:"AccessControlList>Grant"`
}

// ownerACL is the one ACL a dfs bucket or object has: its bucket's owner
// holds FULL_CONTROL and nobody else anything (admin keys pass by being
// admins, not by a grant).
func ownerACL(w http.ResponseWriter, ownerKey string) {
	o := owner{ID: ownerKey, DisplayName: ownerKey}
	writeXML(w, http.StatusOK, accessControlPolicy{Owner: o, Grants: []grant{{
		Grantee:    grantee{XSI: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser", ID: o.ID, DisplayName: o.DisplayName},
		Permission: "FULL_CONTROL",
	}}})
}

// bucketACL answers GetBucketAcl.
func (s *Server) bucketACL(w http.ResponseWriter, r *request) error {
	b, err := s.ownedBucket(r)
	if err != nil {
		return err
	}
	ownerACL(w, b.Owner)
	return nil
}

// objectACL answers GetObjectAcl: an object is its bucket owner's.
func (s *Server) objectACL(w http.ResponseWriter, r *request) error {
	b, err := s.ownedBucket(r)
	if err != nil {
		return err
	}
	if _, err := s.o.Namespace.GetObject(r.Context(), r.bucket, r.key); err != nil {
		return err
	}
	ownerACL(w, b.Owner)
	return nil
}
