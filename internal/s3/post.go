package s3

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// A browser upload (PostObject) is a multipart/form-data POST to a bucket
// whose fields carry its own authentication: a policy document, signed
// with Signature V4, that says what the form may hold. It is answered
// without a signed request, as a CORS preflight is.

// maxFormFields bounds the fields before the file, policy included; S3
// allows 20 KB.
const maxFormFields = 20 << 10

var (
	errPostMalformed = s3err(http.StatusBadRequest, "MalformedPOSTRequest",
		"The body of your POST request is not well-formed multipart/form-data.")
	errPostNoFile = invalidArgument("POST requires exactly one file upload per request.")
	errPostNoKey  = invalidArgument("Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.")
	errPostTooBig = invalidArgument("The form fields before the file exceed the maximum allowed size of 20 KB.")
)

func invalidPolicy(msg string) *Error {
	return s3err(http.StatusBadRequest, "InvalidPolicyDocument", "Invalid Policy: "+msg)
}

func policyDenied(msg string) *Error {
	return s3err(http.StatusForbidden, "AccessDenied", "Invalid according to Policy: "+msg)
}

// isPostObject says whether r is a browser upload: a form POST to a bucket.
func isPostObject(r *request, q map[string][]string) bool {
	if r.Method != http.MethodPost || r.key != "" || len(q) != 0 {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// form is a browser upload's fields, by lower-case name (S3 reads them
// without case), and its file, the part that ends them.
type form struct {
	fields   map[string]string
	filename string
	file     io.Reader
}

// readForm reads the fields up to the file, which must come last (S3
// ignores anything after it); the file is left to stream.
func readForm(r *http.Request) (*form, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errPostMalformed
	}
	f := &form{fields: map[string]string{}}
	budget := int64(maxFormFields)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, errPostNoFile
		}
		if err != nil {
			return nil, errPostMalformed
		}
		name := strings.ToLower(p.FormName())
		if name == "" {
			continue
		}
		if name == "file" {
			f.filename, f.file = p.FileName(), p
			return f, nil
		}
		b, err := io.ReadAll(io.LimitReader(p, budget+1))
		if err != nil {
			return nil, errPostMalformed
		}
		if budget -= int64(len(b)); budget < 0 {
			return nil, errPostTooBig
		}
		if _, dup := f.fields[name]; dup {
			return nil, invalidArgument("The form field " + name + " is given more than once.")
		}
		f.fields[name] = string(b)
	}
}

// postPolicy is a decoded POST policy.
type postPolicy struct {
	expiration time.Time
	conds      []condition
	// lengthMin and lengthMax are content-length-range's; lengthMax < 0
	// when there is none.
	lengthMin, lengthMax int64
}

// condition is one of a policy's checks of a field: eq or starts-with.
type condition struct {
	field, op, value string
}

// parsePolicy decodes the base64 JSON policy of a form.
func parsePolicy(b64 string) (*postPolicy, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, invalidPolicy("Invalid Policy document base64 encoding.")
	}
	var doc struct {
		Expiration *string           `json:"expiration"`
		Conditions []json.RawMessage `json:"conditions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, invalidPolicy("Invalid JSON.")
	}
	if doc.Expiration == nil {
		return nil, invalidPolicy("Policy missing expiration.")
	}
	p := &postPolicy{lengthMax: -1}
	if p.expiration, err = time.Parse(time.RFC3339Nano, *doc.Expiration); err != nil {
		return nil, invalidPolicy("Invalid 'expiration' value: '" + *doc.Expiration + "'")
	}
	if doc.Conditions == nil {
		return nil, invalidPolicy("Policy missing conditions.")
	}
	for _, c := range doc.Conditions {
		if err := p.addCondition(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *postPolicy) addCondition(c json.RawMessage) error {
	var exact map[string]string
	if json.Unmarshal(c, &exact) == nil {
		if len(exact) != 1 {
			return invalidPolicy("Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.")
		}
		for k, v := range exact {
			p.conds = append(p.conds, condition{field: strings.ToLower(k), op: "eq", value: v})
		}
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(c, &list) != nil || len(list) != 3 {
		return invalidPolicy("Invalid condition: " + string(c))
	}
	var op string
	if json.Unmarshal(list[0], &op) != nil {
		return invalidPolicy("Invalid condition: " + string(c))
	}
	switch op = strings.ToLower(op); op {
	case "content-length-range":
		lo, err1 := policyInt(list[1])
		hi, err2 := policyInt(list[2])
		if err1 != nil || err2 != nil || lo < 0 || hi < lo {
			return invalidPolicy("Invalid content-length-range: " + string(c))
		}
		p.lengthMin, p.lengthMax = lo, hi
		return nil
	case "eq", "starts-with":
		var field, value string
		if json.Unmarshal(list[1], &field) != nil || json.Unmarshal(list[2], &value) != nil || !strings.HasPrefix(field, "$") {
			return invalidPolicy("Invalid condition: " + string(c))
		}
		p.conds = append(p.conds, condition{field: strings.ToLower(field[1:]), op: op, value: value})
		return nil
	}
	return invalidPolicy("Invalid condition type: " + op)
}

// policyInt reads a content-length-range bound, a number or a string of
// one (both are seen in policies).
func policyInt(m json.RawMessage) (int64, error) {
	var s string
	if json.Unmarshal(m, &s) == nil {
		return strconv.ParseInt(s, 10, 64)
	}
	var n int64
	err := json.Unmarshal(m, &n)
	return n, err
}

// uncovered are the fields S3 does not require a condition for.
func uncovered(name string) bool {
	return name == "x-amz-signature" || name == "file" || name == "policy" || strings.HasPrefix(name, "x-ignore-")
}

// check holds the form's fields (and the bucket, from the address) to the
// policy: it has not expired, every condition holds, and every field is
// named by one.
func (p *postPolicy) check(fields map[string]string, bucket string, now time.Time) error {
	if !now.Before(p.expiration) {
		return policyDenied("Policy expired.")
	}
	covered := map[string]bool{}
	for _, c := range p.conds {
		covered[c.field] = true
		v, ok := fields[c.field]
		if c.field == "bucket" {
			v, ok = bucket, true
		}
		switch {
		case c.op == "eq" && (!ok || v != c.value):
			return policyDenied("Policy Condition failed: [\"eq\", \"$" + c.field + "\", \"" + c.value + "\"]")
		case c.op == "starts-with" && (!ok || !strings.HasPrefix(v, c.value)):
			return policyDenied("Policy Condition failed: [\"starts-with\", \"$" + c.field + "\", \"" + c.value + "\"]")
		}
	}
	for name := range fields {
		if !uncovered(name) && !covered[name] {
			return policyDenied("Extra input fields: " + name)
		}
	}
	return nil
}

// lengthRange checks a streamed file against content-length-range: past
// max it fails at once, and short of min at its end, so that the upload
// fails and nothing is stored.
type lengthRange struct {
	r        io.Reader
	n        int64
	min, max int64
}

var errPostTooSmall = s3err(http.StatusBadRequest, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size")

func (l *lengthRange) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.max >= 0 && l.n > l.max {
		return 0, s3err(http.StatusBadRequest, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
	}
	if err == io.EOF && l.n < l.min {
		return n, errPostTooSmall
	}
	return n, err
}

type postResponse struct {
	XMLName  xml.Name `xml:"PostResponse"`
	Location string
	Bucket   string
	Key      string
	ETag     string
}

func (s *Server) postObject(w http.ResponseWriter, r *request) error {
	f, err := readForm(r.Request)
	if err != nil {
		return err
	}
	if _, ok := f.fields["x-amz-security-token"]; ok {
		return notImplemented("temporary credentials (x-amz-security-token)")
	}
	if _, ok := f.fields["awsaccesskeyid"]; ok {
		return notImplemented("a browser upload signed with Signature V2")
	}
	b64, ok := f.fields["policy"]
	if !ok {
		return errAccessDenied // an anonymous upload
	}
	if alg := f.fields["x-amz-algorithm"]; alg != sigv4.Algorithm {
		return invalidArgument("x-amz-algorithm must be " + sigv4.Algorithm)
	}
	// A policy that is no policy is answered as such even when signed.
	p, err := parsePolicy(b64)
	if err != nil {
		return err
	}
	ak, err := s.verifier.VerifyPolicy(r.Context(), sigv4.PolicyForm{Credential: f.fields["x-amz-credential"],
		Date: f.fields["x-amz-date"], Signature: f.fields["x-amz-signature"], Policy: b64})
	if err != nil {
		s.log.Info("S3 browser upload refused", "path", r.URL.Path, "err", err)
		return err
	}
	r.accessKey, r.admin = ak, s.o.Keys.IsAdmin(r.Context(), ak)
	key, ok := f.fields["key"]
	if !ok || key == "" {
		return errPostNoKey
	}
	// The conditions hold the key as the form sent it: a form for any
	// file name carries ${filename}, which its policy signs a prefix of.
	if err := p.check(f.fields, r.bucket, time.Now()); err != nil {
		return err
	}
	r.key = strings.ReplaceAll(key, "${filename}", f.filename)
	if err := checkKey(r.key); err != nil {
		return err
	}
	// The fields that are headers on a PutObject are read as PutObject
	// reads them, and refused as it refuses them.
	h := http.Header{}
	for name, v := range f.fields {
		h.Set(textproto.CanonicalMIMEHeaderKey(name), v)
	}
	if acl, ok := f.fields["acl"]; ok {
		h.Set("X-Amz-Acl", acl)
	}
	put := r.Request.Clone(r.Context())
	put.Header = h
	if err := refusals(&request{Request: put, bucket: r.bucket, key: r.key}); err != nil {
		return err
	}
	var tags []meta.Tag
	if v, ok := f.fields["tagging"]; ok {
		if tags, err = parseTagging(strings.NewReader(v), maxObjectTags, "Object"); err != nil {
			return err
		}
	}
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	o, _, err := s.objects.Put(r.Context(), objects.PutRequest{Bucket: r.bucket, Key: r.key,
		Body: &lengthRange{r: f.file, min: p.lengthMin, max: p.lengthMax}, ContentType: h.Get("Content-Type"),
		Headers: headersOf(h), Tags: tags})
	if err != nil {
		return err
	}
	etag := quote(o.ETag)
	w.Header().Set("ETag", etag)
	if to := f.fields["success_action_redirect"]; to != "" || f.fields["redirect"] != "" {
		if to == "" {
			to = f.fields["redirect"]
		}
		if u, err := url.Parse(to); err == nil && u.Scheme != "" {
			q := u.Query()
			q.Set("bucket", r.bucket)
			q.Set("key", r.key)
			q.Set("etag", etag)
			u.RawQuery = q.Encode()
			w.Header().Set("Location", u.String())
			w.WriteHeader(http.StatusSeeOther)
			return nil
		}
	}
	location := s.objectURL(r)
	w.Header().Set("Location", location)
	switch f.fields["success_action_status"] {
	case "200":
		w.WriteHeader(http.StatusOK)
	case "201":
		writeXML(w, http.StatusCreated, postResponse{Location: location, Bucket: r.bucket, Key: r.key, ETag: etag})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// objectURL is where r's object is read, path style.
func (s *Server) objectURL(r *request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host, Path: "/" + r.bucket + "/" + r.key}).String()
}
