// Package s3 is dfs's S3-compatible front end: it turns S3 requests (path
// style, and virtual-hosted style under a domain) into calls on the file
// service and the namespace, checks Signature V4 through the access keys,
// enforces bucket ownership and answers S3's XML, errors included. It is a
// front end beside the REST API and does not import it.
package s3

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// Keys resolves the access keys of signed requests.
type Keys interface {
	Secret(ctx context.Context, accessKey string) (string, error)
	IsAdmin(ctx context.Context, accessKey string) bool
}

// Options wires the front end.
type Options struct {
	Files     objects.Files
	Namespace meta.Namespace
	Keys      Keys
	Region    string // S3_REGION
	// Domain, when set, enables virtual-hosted addressing: a request to
	// BUCKET.Domain names BUCKET.
	Domain string
	Logger *slog.Logger
	// Sessions, when set, serves multipart uploads; without it they are
	// answered 501 NotImplemented.
	Sessions Sessions
	// Observe wraps every request, for metrics; nil means none.
	Observe func(route, method string, status int, seconds float64)
	// Shared says other coordinators use the same metadata store: a bucket
	// deleted through one must not be served from another's cache. Peers
	// then carries the deletions (redisx.Invalidations), and the bucket
	// cache answers only while it is live; with Peers nil it is not used.
	Shared bool
	Peers  Peers
}

// Peers carries cache invalidations between coordinators (see auth.Peers).
type Peers interface {
	Publish(ctx context.Context, kind, key string) error
	Handle(kind string, fn func(key string))
	Live() bool
}

// peerKind is the kind of a bucket's deletion on Peers.
const peerKind = "bucket"

// Server answers S3 requests.
type Server struct {
	o        Options
	verifier *sigv4.Verifier
	log      *slog.Logger
	buckets  bucketCache
	objects  *objects.Service
}

// New returns the S3 handler.
func New(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, log: o.Logger, verifier: &sigv4.Verifier{Region: o.Region, Secrets: o.Keys.Secret, V2: true, Domain: o.Domain},
		objects: &objects.Service{Files: o.Files, Namespace: o.Namespace, Log: o.Logger}}
	s.buckets.trusted = func() bool { return !o.Shared || (o.Peers != nil && o.Peers.Live()) }
	if o.Shared && o.Peers != nil {
		o.Peers.Handle(peerKind, func(name string) {
			if name == "" {
				s.buckets.forgetAll()
				return
			}
			s.buckets.forget(name)
		})
	}
	var h http.Handler = http.HandlerFunc(s.serve)
	h = httpx.Recover(o.Logger)(h)
	h = httpx.AccessLog(o.Logger, o.Observe)(h)
	return amzRequestID(h)
}

// amzRequestID gives every answer a request id under S3's header name too.
func amzRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := httpx.NewRequestID()
		w.Header().Set("X-Amz-Request-Id", id)
		w.Header().Set(httpx.RequestIDHeader, id)
		ctx := httpx.WithRequestID(r.Context(), id)
		// The access log and the metrics name a request by its route; an S3
		// request's route is its operation (PutObject, ListObjectsV2, …), a
		// bounded set unlike its paths, which serve writes here once it
		// knows the operation.
		ctx = context.WithValue(ctx, chi.RouteCtxKey, chi.NewRouteContext())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// request is one S3 call: who sent it and what it names.
type request struct {
	*http.Request
	accessKey string
	admin     bool
	bucket    string
	key       string
}

// address splits r into bucket and key, by host when virtual-hosted.
func (s *Server) address(r *http.Request) (bucket, key string) {
	if s.o.Domain != "" {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if b, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(s.o.Domain)); ok && b != "" {
			return b, strings.TrimPrefix(r.URL.Path, "/")
		}
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

// handler runs one S3 operation.
type handler func(http.ResponseWriter, *request) error

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	req := &request{Request: r}
	req.bucket, req.key = s.address(r)
	q := r.URL.Query()
	op, h := s.route(req, q)
	if rc := chi.RouteContext(r.Context()); rc != nil {
		rc.RoutePatterns = []string{op}
	}
	fail := func(err error) { writeError(w, r, s.log, err) }
	if r.Method == http.MethodOptions {
		// A browser's CORS preflight (the route of every OPTIONS) carries
		// no credentials, and is answered without them.
		if err := h(w, req); err != nil {
			fail(err)
		}
		return
	}
	s.corsHeaders(w, req)
	if op == "PostObject" {
		// A browser upload is authenticated by its form's signed policy,
		// which its handler reads.
		if err := h(w, req); err != nil {
			fail(err)
		}
		return
	}
	if !sigv4.Signed(r) {
		fail(errAccessDenied)
		return
	}
	ak, err := s.verifier.Verify(r)
	if err != nil {
		s.log.Info("S3 request refused", "method", r.Method, "path", r.URL.Path, "err", err)
		fail(err)
		return
	}
	req.accessKey, req.admin = ak, s.o.Keys.IsAdmin(r.Context(), ak)
	if err := refusals(req); err != nil {
		fail(err)
		return
	}
	if err := h(w, req); err != nil {
		fail(err)
	}
}

// refuse is the handler of a request dfs answers with err whatever it is.
func refuse(err error) handler { return func(http.ResponseWriter, *request) error { return err } }

// opUnsupported names, in the metrics and the log, a request that is no
// operation dfs implements.
const opUnsupported = "Unsupported"

// unsupported are the sub-resources dfs does not implement; a request for
// one is answered 501 rather than as the plain operation it would
// otherwise look like.
var unsupported = []string{
	"acl", "policy", "policyStatus", "lifecycle", "website", "logging", "notification",
	"replication", "encryption", "object-lock", "retention", "legal-hold", "torrent", "restore", "select",
	"accelerate", "analytics", "inventory", "metrics", "intelligent-tiering", "ownershipControls",
	"publicAccessBlock", "requestPayment", "versions", "attributes", "versionId", "renameObject",
	// A GET of a bucket with one of these would otherwise be ListObjects.
	"session", "metadataTable", "metadataConfiguration",
}

// grants names the header of h that asks for access beyond the owner's: a
// canned ACL other than private or bucket-owner-full-control (both what
// dfs does anyway), or an x-amz-grant-* header; "" when none does.
func grants(h http.Header) string {
	switch acl := h.Get("X-Amz-Acl"); acl {
	case "", "private", "bucket-owner-full-control":
	default:
		return "x-amz-acl: " + acl
	}
	for name := range h {
		if strings.HasPrefix(name, "X-Amz-Grant-") {
			return name
		}
	}
	return ""
}

// unhonoured names a header of r that asks for something dfs does not do
// and that a client would take as done if the request succeeded without
// it: encryption at rest, an object lock, or If-Match or If-None-Match on
// a write of an object other than those that honour them
// (conditionalWrite: UploadPart, CreateMultipartUpload, If-None-Match on
// a DELETE). "" when there is none.
func unhonoured(r *request) string {
	for name := range r.Header {
		if strings.HasPrefix(name, "X-Amz-Server-Side-Encryption") || strings.HasPrefix(name, "X-Amz-Copy-Source-Server-Side-Encryption") ||
			strings.HasPrefix(name, "X-Amz-Object-Lock-") || name == "X-Amz-Bucket-Object-Lock-Enabled" {
			return name
		}
	}
	if r.key != "" && r.Method != http.MethodGet && r.Method != http.MethodHead && !conditionalWrite(r, r.URL.Query()) {
		for _, name := range []string{"If-Match", "If-None-Match"} {
			if r.Header.Get(name) != "" {
				return name + " (a conditional write)"
			}
		}
	}
	return ""
}

// storageClasses are the classes S3 defines. dfs stores every object one
// way, STANDARD's (replicated, durable, readable at once), and says so in
// its listings.
var storageClasses = []string{"STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
	"GLACIER", "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE", "FSX_OPENZFS"}

// checkStorageClass refuses a write that asks for a storage class other
// than STANDARD: a known one is 501 (storing it as STANDARD and listing it
// so would be a wrong success), anything else InvalidStorageClass, as S3
// answers it.
func checkStorageClass(r *request) error {
	class := r.Header.Get("X-Amz-Storage-Class")
	if class == "" || class == "STANDARD" || (r.Method != http.MethodPut && r.Method != http.MethodPost) {
		return nil
	}
	if !slices.Contains(storageClasses, class) {
		return s3err(http.StatusBadRequest, "InvalidStorageClass", "The storage class you specified is not valid")
	}
	return notImplemented("the storage class " + class + " (every object is STANDARD)")
}

// refusals answers, before any operation runs, a request whose headers
// ask for what dfs does not do.
func refusals(r *request) error {
	if err := checkStorageClass(r); err != nil {
		return err
	}
	if acl := grants(r.Header); acl != "" {
		// A bucket or object is its owner's (and the admins') alone: storing
		// one sent as public-read would be a wrong success.
		return notImplemented("access control lists (" + acl + ")")
	}
	if h := unhonoured(r); h != "" {
		return notImplemented("the " + h + " header")
	}
	return nil
}

// route names r's operation, as S3's API calls it, and its handler.
func (s *Server) route(r *request, q url.Values) (string, handler) {
	switch {
	case r.Method == http.MethodOptions:
		return "PreflightRequest", s.preflight
	case r.bucket == "":
		if r.Method == http.MethodGet {
			return "ListBuckets", s.listBuckets
		}
		return opUnsupported, refuse(notImplemented(r.Method + " on the service"))
	case r.key == "":
		return s.bucketRoute(r, q)
	default:
		return s.objectRoute(r, q)
	}
}

// unsupportedSub is the handler of a request for a sub-resource dfs does
// not implement, answered 501 rather than as the plain operation it would
// otherwise look like; nil when q names none.
func unsupportedSub(q url.Values) handler {
	for _, sub := range unsupported {
		// The null version is the one version of every object; another
		// version id names what dfs never kept.
		if sub == "versionId" && q.Get(sub) == nullVersion {
			continue
		}
		if q.Has(sub) {
			return refuse(notImplemented("the ?" + sub + " sub-resource"))
		}
	}
	return nil
}

// subresource names a query parameter of q other than the signature's
// (X-Amz-*, presigned) and the SDKs' operation name (x-id); "" when none.
func subresource(q map[string][]string) string {
	for k := range q {
		if !strings.HasPrefix(strings.ToLower(k), "x-amz-") && k != "x-id" {
			return k
		}
	}
	return ""
}

func (s *Server) bucketRoute(r *request, q url.Values) (string, handler) {
	if r.Method == http.MethodGet {
		switch {
		case q.Has("acl"):
			return "GetBucketAcl", s.bucketACL
		case q.Has("versions"):
			return "ListObjectVersions", s.listVersions
		}
	}
	if h := unsupportedSub(q); h != nil {
		return opUnsupported, h
	}
	if q.Has("cors") {
		switch r.Method {
		case http.MethodGet:
			return "GetBucketCors", s.bucketCORS
		case http.MethodPut:
			return "PutBucketCors", s.putBucketCORS
		case http.MethodDelete:
			return "DeleteBucketCors", s.deleteBucketCORS
		}
	}
	if q.Has("tagging") {
		switch r.Method {
		case http.MethodGet:
			return "GetBucketTagging", s.bucketTagging
		case http.MethodPut:
			return "PutBucketTagging", s.putBucketTagging
		case http.MethodDelete:
			return "DeleteBucketTagging", s.deleteBucketTagging
		}
	}
	switch r.Method {
	case http.MethodPut, http.MethodDelete:
		// CreateBucket and DeleteBucket take no sub-resource: a PUT or DELETE
		// with one (PutBucketVersioning's ?versioning, say) would otherwise
		// create or delete the bucket and answer a wrong success.
		if sub := subresource(q); sub != "" {
			return opUnsupported, refuse(notImplemented(r.Method + " on the ?" + sub + " sub-resource of a bucket"))
		}
		if r.Method == http.MethodPut {
			return "CreateBucket", s.createBucket
		}
		return "DeleteBucket", s.deleteBucket
	case http.MethodHead:
		return "HeadBucket", func(w http.ResponseWriter, r *request) error {
			_, err := s.ownedBucket(r)
			if err == nil {
				w.WriteHeader(http.StatusOK)
			}
			return err
		}
	case http.MethodGet:
		switch {
		case q.Has("location"):
			return "GetBucketLocation", s.bucketLocation
		case q.Has("versioning"):
			return "GetBucketVersioning", s.bucketVersioning
		case q.Has("uploads"):
			return s.multipartOp("ListMultipartUploads")
		case q.Get("list-type") == "2":
			return "ListObjectsV2", func(w http.ResponseWriter, r *request) error { return s.listObjects(w, r, true) }
		default:
			return "ListObjects", func(w http.ResponseWriter, r *request) error { return s.listObjects(w, r, false) }
		}
	case http.MethodPost:
		if q.Has("delete") {
			return "DeleteObjects", s.deleteObjects
		}
		if isPostObject(r, q) {
			return "PostObject", s.postObject
		}
	}
	return opUnsupported, refuse(notImplemented(r.Method + " on a bucket"))
}

func (s *Server) objectRoute(r *request, q url.Values) (string, handler) {
	if r.Method == http.MethodGet {
		if q.Has("acl") {
			return "GetObjectAcl", s.objectACL
		}
	}
	if h := unsupportedSub(q); h != nil {
		return opUnsupported, h
	}
	if q.Has("cors") {
		// CORS rules are a bucket's; an object's GET or PUT with ?cors
		// would otherwise read or write the object.
		return opUnsupported, refuse(notImplemented("the ?cors sub-resource of an object"))
	}
	if q.Has("tagging") {
		switch r.Method {
		case http.MethodGet:
			return "GetObjectTagging", s.objectTagging
		case http.MethodPut:
			return "PutObjectTagging", s.putObjectTagging
		case http.MethodDelete:
			return "DeleteObjectTagging", s.deleteObjectTagging
		}
	}
	copying := r.Header.Get("X-Amz-Copy-Source") != ""
	switch r.Method {
	case http.MethodPut:
		switch {
		case q.Has("uploadId") && copying:
			return s.multipartOp("UploadPartCopy")
		case q.Has("uploadId"):
			return s.multipartOp("UploadPart")
		case copying:
			return "CopyObject", s.copyObject
		}
		return "PutObject", s.putObject
	case http.MethodGet, http.MethodHead:
		if q.Has("uploadId") {
			return s.multipartOp("ListParts")
		}
		op := "GetObject"
		if r.Method == http.MethodHead {
			op = "HeadObject"
		}
		if q.Has("partNumber") && q.Get("partNumber") != "1" {
			// dfs keeps no part boundaries: the whole object is its one part,
			// and answering it for part 2 would be a wrong success.
			return op, refuse(notImplemented("GetObject and HeadObject of a part other than the first (partNumber)"))
		}
		return op, s.getObject
	case http.MethodDelete:
		if q.Has("uploadId") {
			return s.multipartOp("AbortMultipartUpload")
		}
		return "DeleteObject", s.deleteObject
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return s.multipartOp("CreateMultipartUpload")
		case q.Has("uploadId"):
			return s.multipartOp("CompleteMultipartUpload")
		}
	}
	return opUnsupported, refuse(notImplemented(r.Method + " on an object"))
}

// ownedBucket reads the request's bucket and checks that its key may use
// it: the owner, or an admin.
func (s *Server) ownedBucket(r *request) (meta.Bucket, error) {
	return s.bucketFor(r.Context(), r.bucket, r.accessKey, r.admin)
}

func (s *Server) bucketFor(ctx context.Context, name, accessKey string, admin bool) (meta.Bucket, error) {
	if checkBucketName(name) != nil {
		return meta.Bucket{}, errNoSuchBucket
	}
	b, err := s.buckets.get(ctx, name, s.o.Namespace.GetBucket)
	if err != nil {
		return meta.Bucket{}, err
	}
	if b.Owner != accessKey && !admin {
		return meta.Bucket{}, errAccessDenied
	}
	return b, nil
}
