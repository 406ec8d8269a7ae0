package s3

import (
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/dfs-project/dfs/internal/meta"
)

// S3's limits on a CORS configuration.
const (
	maxCORSRules  = 100
	maxCORSRuleID = 255
)

// corsMethods are the methods a CORS rule may allow, as S3 spells them.
var corsMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodHead}

var (
	errNoSuchCORS = s3err(http.StatusNotFound, "NoSuchCORSConfiguration", "The CORS configuration does not exist")
	// errCORSForbidden is S3's answer to a preflight no rule allows.
	errCORSForbidden = s3err(http.StatusForbidden, "AccessForbidden",
		"CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / "+
			"Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.")
	errPreflightIncomplete = s3err(http.StatusBadRequest, "BadRequest",
		"Insufficient information. Origin request header needed.")
)

type corsRuleXML struct {
	ID            string   `xml:"ID,omitempty"`
	AllowedHeader []string `xml:"AllowedHeader,omitempty"`
	AllowedMethod []string `xml:"AllowedMethod"`
	AllowedOrigin []string `xml:"AllowedOrigin"`
	ExposeHeader  []string `xml:"ExposeHeader,omitempty"`
	MaxAgeSeconds *int     `xml:"MaxAgeSeconds,omitempty"`
}

// corsIn is a PutBucketCors body, in S3's namespace or none.
type corsIn struct {
	XMLName xml.Name      `xml:"CORSConfiguration"`
	Rules   []corsRuleXML `xml:"CORSRule"`
}

type corsOut struct {
	XMLName xml.Name      `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CORSConfiguration"`
	Rules   []corsRuleXML `xml:"CORSRule"`
}

// wildcards is the number of "*" in s; S3 allows one in an origin or a
// header.
func wildcards(s string) int { return strings.Count(s, "*") }

// checkCORS holds a configuration to S3's rules: 1 to 100 rules, each with
// an origin and a method, the methods S3 knows, one wildcard at most in
// an origin or a header.
func checkCORS(rules []corsRuleXML) error {
	if len(rules) == 0 || len(rules) > maxCORSRules {
		return errMalformedXML
	}
	for _, r := range rules {
		if len(r.AllowedOrigin) == 0 || len(r.AllowedMethod) == 0 || len(r.ID) > maxCORSRuleID ||
			(r.MaxAgeSeconds != nil && *r.MaxAgeSeconds < 0) {
			return errMalformedXML
		}
		for _, m := range r.AllowedMethod {
			if !slices.Contains(corsMethods, m) {
				return s3err(http.StatusBadRequest, "InvalidRequest", "Found unsupported HTTP method in CORS config. Unsupported method is "+m)
			}
		}
		for _, o := range r.AllowedOrigin {
			if wildcards(o) > 1 {
				return s3err(http.StatusBadRequest, "InvalidRequest", `AllowedOrigin "`+o+`" can not have more than one wildcard.`)
			}
		}
		for _, h := range r.AllowedHeader {
			if wildcards(h) > 1 {
				return s3err(http.StatusBadRequest, "InvalidRequest", `AllowedHeader "`+h+`" can not have more than one wildcard.`)
			}
		}
	}
	return nil
}

func (s *Server) bucketCORS(w http.ResponseWriter, r *request) error {
	b, err := s.ownedBucket(r)
	if err != nil {
		return err
	}
	if len(b.CORS) == 0 {
		return errNoSuchCORS
	}
	out := corsOut{Rules: make([]corsRuleXML, len(b.CORS))}
	for i, c := range b.CORS {
		out.Rules[i] = corsRuleXML{ID: c.ID, AllowedHeader: c.AllowedHeaders, AllowedMethod: c.AllowedMethods,
			AllowedOrigin: c.AllowedOrigins, ExposeHeader: c.ExposeHeaders, MaxAgeSeconds: c.MaxAgeSeconds}
	}
	writeXML(w, http.StatusOK, out)
	return nil
}

func (s *Server) putBucketCORS(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	var in corsIn
	if err := readConfig(r, &in); err != nil {
		return err
	}
	if err := checkCORS(in.Rules); err != nil {
		return err
	}
	rules := make([]meta.CORSRule, len(in.Rules))
	for i, c := range in.Rules {
		rules[i] = meta.CORSRule{ID: c.ID, AllowedOrigins: c.AllowedOrigin, AllowedMethods: c.AllowedMethod,
			AllowedHeaders: c.AllowedHeader, ExposeHeaders: c.ExposeHeader, MaxAgeSeconds: c.MaxAgeSeconds}
	}
	if err := s.o.Namespace.PutBucketCORS(r.Context(), r.bucket, rules); err != nil {
		return err
	}
	s.bucketChanged(r.Context(), r.bucket, "CORS")
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucketCORS(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	if err := s.o.Namespace.PutBucketCORS(r.Context(), r.bucket, nil); err != nil {
		return err
	}
	s.bucketChanged(r.Context(), r.bucket, "CORS")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// wildMatch reports whether s matches pattern, which holds at most one
// "*" standing for any run of characters.
func wildMatch(pattern, s string) bool {
	before, after, ok := strings.Cut(pattern, "*")
	if !ok {
		return pattern == s
	}
	return len(s) >= len(before)+len(after) && strings.HasPrefix(s, before) && strings.HasSuffix(s, after)
}

// corsRule is the first rule of rules that allows origin to send method
// with headers (lower-case); nil when none does. Origins match as
// written; headers, case-insensitive names, match in lower case.
func corsRule(rules []meta.CORSRule, origin, method string, headers []string) *meta.CORSRule {
next:
	for i := range rules {
		r := &rules[i]
		if !slices.Contains(r.AllowedMethods, method) ||
			!slices.ContainsFunc(r.AllowedOrigins, func(o string) bool { return wildMatch(o, origin) }) {
			continue
		}
		for _, h := range headers {
			if !slices.ContainsFunc(r.AllowedHeaders, func(a string) bool { return wildMatch(strings.ToLower(a), h) }) {
				continue next
			}
		}
		return r
	}
	return nil
}

// allowCORS writes the headers by which rule allows origin.
func allowCORS(h http.Header, rule *meta.CORSRule, origin string) {
	if slices.Contains(rule.AllowedOrigins, "*") {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		// A named origin may send credentials (cookies, an Authorization
		// header), which a "*" answer would forbid.
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(rule.AllowedMethods, ", "))
	if len(rule.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(rule.ExposeHeaders, ", "))
	}
	if rule.MaxAgeSeconds != nil {
		h.Set("Access-Control-Max-Age", strconv.Itoa(*rule.MaxAgeSeconds))
	}
}

// corsVary tells caches that an answer depends on the CORS request
// headers, which it does for every request to a bucket with CORS rules.
func corsVary(h http.Header) {
	h.Set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// corsBucket reads the CORS rules of r's bucket, from the bucket cache
// (which every change of them drops on every coordinator); nil when the
// bucket has none or cannot be read.
func (s *Server) corsBucket(r *request) []meta.CORSRule {
	if r.bucket == "" || checkBucketName(r.bucket) != nil {
		return nil
	}
	b, err := s.buckets.get(r.Context(), r.bucket, s.o.Namespace.GetBucket)
	if err != nil {
		return nil
	}
	return b.CORS
}

// preflight answers a browser's OPTIONS preflight from the bucket's CORS
// rules, without a signature (a browser sends none): 200 with the headers
// of the first rule that allows the origin, the method and every header
// asked for, else 403, as S3 answers.
func (s *Server) preflight(w http.ResponseWriter, r *request) error {
	origin, method := r.Header.Get("Origin"), r.Header.Get("Access-Control-Request-Method")
	if origin == "" || method == "" {
		return errPreflightIncomplete
	}
	rules := s.corsBucket(r)
	if len(rules) == 0 {
		return errCORSForbidden
	}
	var headers []string
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				headers = append(headers, h)
			}
		}
	}
	corsVary(w.Header())
	rule := corsRule(rules, origin, method, headers)
	if rule == nil {
		return errCORSForbidden
	}
	allowCORS(w.Header(), rule, origin)
	if len(headers) > 0 {
		w.Header().Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// corsHeaders gives a request from a browser (one with an Origin) the CORS
// headers of the first rule of its bucket that allows its origin and
// method, whatever the answer: a browser application reads an error only
// if it is allowed to.
func (s *Server) corsHeaders(w http.ResponseWriter, r *request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return
	}
	rules := s.corsBucket(r)
	if len(rules) == 0 {
		return
	}
	corsVary(w.Header())
	if rule := corsRule(rules, origin, r.Method, nil); rule != nil {
		allowCORS(w.Header(), rule, origin)
	}
}
