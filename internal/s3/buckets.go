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
	if err := s.o.Namespace.DeleteBucket(r.Context(), r.bucket); err != nil {
		return err
	}
	s.buckets.forget(r.bucket)
	s.log.Info("bucket deleted", "bucket", r.bucket, "by", r.accessKey)
	w.WriteHeader(http.StatusNoContent)
	return nil
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
