package s3

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/dfs-project/dfs/internal/meta"
)

type contentXML struct {
	Key          string
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
	Owner        *owner `xml:",omitempty"`
}

type prefixXML struct {
	Prefix string
}

// listBucketResult is both versions' answer; fields a version does not
// have are left empty and omitted.
type listBucketResult struct {
	XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string
	Prefix                string
	Delimiter             string `xml:",omitempty"`
	Marker                *string
	NextMarker            string `xml:",omitempty"`
	ContinuationToken     *string
	NextContinuationToken string `xml:",omitempty"`
	StartAfter            *string
	KeyCount              *int
	MaxKeys               int
	EncodingType          string `xml:",omitempty"`
	IsTruncated           bool
	Contents              []contentXML
	CommonPrefixes        []prefixXML
}

// maxKeys is S3's page size and its upper bound.
const maxKeys = 1000

func (s *Server) listObjects(w http.ResponseWriter, r *request, v2 bool) error {
	b, err := s.ownedBucket(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	n := maxKeys
	if v := q.Get("max-keys"); v != "" {
		n, err = strconv.Atoi(v)
		if err != nil || n < 0 {
			return invalidArgument("max-keys must be a non-negative integer")
		}
		n = min(n, maxKeys)
	}
	enc, err := encodingType(q.Get("encoding-type"))
	if err != nil {
		return err
	}
	lq := meta.ListQuery{Bucket: r.bucket, Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), MaxKeys: n}
	out := listBucketResult{Name: r.bucket, Prefix: lq.Prefix, Delimiter: lq.Delimiter, MaxKeys: n, EncodingType: enc}
	fetchOwner := !v2 || q.Get("fetch-owner") == "true"
	if v2 {
		// Sent, they are given back, even empty, as S3 does.
		if q.Has("start-after") {
			sa := q.Get("start-after")
			out.StartAfter, lq.After = &sa, sa
		}
		if q.Has("continuation-token") {
			t := q.Get("continuation-token")
			out.ContinuationToken = &t
		}
		if t := q.Get("continuation-token"); t != "" {
			after, err := base64.RawURLEncoding.DecodeString(t)
			if err != nil {
				return invalidArgument("The continuation token provided is incorrect")
			}
			lq.After = string(after)
		}
	} else {
		marker := q.Get("marker")
		out.Marker, lq.After = &marker, marker
	}
	page, err := meta.List(r.Context(), s.o.Namespace, lq)
	if err != nil {
		return err
	}
	esc := keyEncoder(enc)
	for _, o := range page.Objects {
		c := contentXML{Key: esc(o.Key), LastModified: s3Time(o.ModifiedAt), ETag: quote(o.ETag), Size: o.SizeBytes, StorageClass: "STANDARD"}
		if fetchOwner {
			c.Owner = &owner{ID: b.Owner, DisplayName: b.Owner}
		}
		out.Contents = append(out.Contents, c)
	}
	for _, p := range page.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{Prefix: esc(p)})
	}
	out.IsTruncated = page.Truncated
	if v2 {
		count := len(page.Objects) + len(page.Prefixes)
		out.KeyCount = &count
		if page.Truncated {
			out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(page.Next))
		}
	} else if page.Truncated {
		out.NextMarker = esc(page.Next)
	}
	if enc == "url" {
		out.Prefix, out.Delimiter = esc(out.Prefix), esc(out.Delimiter)
		for _, p := range []*string{out.Marker, out.StartAfter} {
			if p != nil {
				*p = esc(*p)
			}
		}
	}
	writeXML(w, http.StatusOK, out)
	return nil
}

// encodingType checks a listing's encoding-type: none, or url.
func encodingType(enc string) (string, error) {
	if enc != "" && enc != "url" {
		return "", invalidArgument("encoding-type must be url")
	}
	return enc, nil
}

// keyEncoder encodes the keys of a listing as its encoding-type asks.
func keyEncoder(enc string) func(string) string {
	if enc != "url" {
		return func(s string) string { return s }
	}
	return urlEncode
}

// urlEncode is S3's encoding-type=url: every byte but the unreserved ones
// percent-encoded, except '/' and '*', which S3 leaves as they are (a
// prefix foo/ stays foo/). A space is %20, which every decoder reads back
// as a space (a '+' would stay a '+' under path unescaping).
func urlEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '/', c == '*':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

type versionXML struct {
	Key          string
	VersionID    string `xml:"VersionId"`
	IsLatest     bool
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
	Owner        owner
}

type listVersionsResult struct {
	XMLName             xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
	Name                string
	Prefix              string
	KeyMarker           string
	VersionIDMarker     string `xml:"VersionIdMarker"`
	NextKeyMarker       string `xml:",omitempty"`
	NextVersionIDMarker string `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int
	Delimiter           string `xml:",omitempty"`
	EncodingType        string `xml:",omitempty"`
	IsTruncated         bool
	Versions            []versionXML `xml:"Version"`
	CommonPrefixes      []prefixXML
}

// nullVersion is the version id S3 gives an object of a bucket that never
// had versioning: dfs keeps one version of each key, this one.
const nullVersion = "null"

// listVersions answers ListObjectVersions as S3 does for a bucket without
// versioning: every object once, as its null version and the latest. A
// key marker with a version id marker continues after that key, its only
// version.
func (s *Server) listVersions(w http.ResponseWriter, r *request) error {
	b, err := s.ownedBucket(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	n, err := intQuery(r, "max-keys", maxKeys)
	if err != nil {
		return err
	}
	n = min(n, maxKeys)
	enc, err := encodingType(q.Get("encoding-type"))
	if err != nil {
		return err
	}
	out := listVersionsResult{Name: r.bucket, Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), KeyMarker: q.Get("key-marker"),
		VersionIDMarker: q.Get("version-id-marker"), MaxKeys: n, EncodingType: enc}
	page, err := meta.List(r.Context(), s.o.Namespace, meta.ListQuery{Bucket: r.bucket, Prefix: out.Prefix, Delimiter: out.Delimiter,
		After: out.KeyMarker, MaxKeys: n})
	if err != nil {
		return err
	}
	esc := keyEncoder(enc)
	for _, o := range page.Objects {
		out.Versions = append(out.Versions, versionXML{Key: esc(o.Key), VersionID: nullVersion, IsLatest: true, LastModified: s3Time(o.ModifiedAt),
			ETag: quote(o.ETag), Size: o.SizeBytes, StorageClass: "STANDARD", Owner: owner{ID: b.Owner, DisplayName: b.Owner}})
	}
	for _, p := range page.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{Prefix: esc(p)})
	}
	if out.IsTruncated = page.Truncated; page.Truncated {
		out.NextKeyMarker = esc(page.Next)
		if len(page.Objects) > 0 && page.Objects[len(page.Objects)-1].Key == page.Next {
			out.NextVersionIDMarker = nullVersion
		}
	}
	out.Prefix, out.Delimiter, out.KeyMarker = esc(out.Prefix), esc(out.Delimiter), esc(out.KeyMarker)
	writeXML(w, http.StatusOK, out)
	return nil
}
