package openapi_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
	"github.com/dfs-project/dfs/internal/openapi"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
	"github.com/dfs-project/dfs/internal/rebalance"
)

// answer is a status and an error code the coordinator answers together.
type answer struct {
	status int
	code   string
}

// handlerAnswers are the status and code pairs an operation's handler can
// answer. They are taken from the code that makes them rather than listed:
// the default code of every kind, through httpx.StatusOf and the errs table,
// and the codes that override a kind's default, built the way their producers
// build them.
func handlerAnswers() map[answer]bool {
	out := map[answer]bool{}
	add := func(err error) {
		status, code := httpx.StatusOf(err)
		out[answer{status, code}] = true
	}
	for k := errs.Kind(0); !strings.HasPrefix(k.String(), "kind("); k++ {
		add(errs.E(k, "example"))
	}
	add(rules.FileNotFound("example"))
	add(rules.NodeNotFound("example"))
	add(rules.AccessKeyNotFound("example"))
	add(rules.BucketNotFound("example"))
	add(rules.ObjectNotFound("example", "example"))
	add(rules.BucketExists("example"))
	add(rules.Unavailable(nil, "example"))
	// internal/files keeps this error unexported: an upload to an empty ring.
	add(errs.WithCode(errs.Unavailable, errs.CodeNoHealthyNodes, nil, "no storage node is on the ring"))
	add(rebalance.Refusal(rebalance.DrainPlan{Node: "example", Reasons: []string{"example"}}))
	// The upload sessions' own codes (internal/files).
	add(errs.WithCode(errs.NotFound, errs.CodeUploadNotFound, nil, "example"))
	add(errs.WithCode(errs.Invalid, errs.CodeMissingPart, nil, "example"))
	add(errs.WithCode(errs.Invalid, errs.CodePartOrder, nil, "example"))
	add(errs.WithCode(errs.Invalid, errs.CodeChecksumMismatch, nil, "example"))
	return out
}

// codeBelongs says where a code can come from, for the codes only some
// operations answer; any other code may come from any operation.
var codeBelongs = map[string]func(method, path string, op *openapi3.Operation) bool{
	// The router's own answer to a path no route serves. A handler's
	// not-found always names what is missing (FILE_NOT_FOUND, NODE_NOT_FOUND).
	errs.CodeNotFound:     func(string, string, *openapi3.Operation) bool { return false },
	errs.CodeFileNotFound: func(_, path string, _ *openapi3.Operation) bool { return strings.Contains(path, "{fileId}") },
	errs.CodeNodeNotFound: func(_, path string, _ *openapi3.Operation) bool { return strings.Contains(path, "{nodeId}") },
	errs.CodeAccessKeyNotFound: func(_, path string, _ *openapi3.Operation) bool {
		return strings.Contains(path, "{accessKey}")
	},
	errs.CodeBucketNotFound: func(_, path string, _ *openapi3.Operation) bool { return strings.Contains(path, "{bucket}/") },
	errs.CodeObjectNotFound: func(_, path string, _ *openapi3.Operation) bool { return strings.HasSuffix(path, "/object") },
	errs.CodeBucketExists:   func(m, p string, _ *openapi3.Operation) bool { return m+" "+p == "PUT /api/buckets/{bucket}" },
	// Only a route behind requireToken checks a token, and the document
	// says so with a security requirement.
	errs.CodeUnauthorized: func(_, _ string, op *openapi3.Operation) bool { return op.Security != nil && len(*op.Security) > 0 },
	errs.CodeNoHealthyNodes: func(m, p string, _ *openapi3.Operation) bool {
		return uploads(m, p) || m+" "+p == partPut
	},
	errs.CodeFileTooLarge: func(m, p string, _ *openapi3.Operation) bool {
		return uploads(m, p) || m+" "+p == partPut
	},
	errs.CodeUploadNotFound:      func(_, path string, _ *openapi3.Operation) bool { return strings.Contains(path, "{uploadId}") },
	errs.CodeMissingPart:         func(_, path string, _ *openapi3.Operation) bool { return strings.HasSuffix(path, "/complete") },
	errs.CodePartOrder:           func(_, path string, _ *openapi3.Operation) bool { return strings.HasSuffix(path, "/complete") },
	errs.CodeRangeNotSatisfiable: func(m, p string, _ *openapi3.Operation) bool { return downloads(m, p) },
	errs.CodeUnsafeDrain:         func(m, p string, _ *openapi3.Operation) bool { return m+" "+p == "DELETE /api/nodes/{nodeId}" },
	// Only a named object's write and delete take If-Match or If-None-Match.
	errs.CodePreconditionFailed: func(m, p string, _ *openapi3.Operation) bool {
		return m+" "+p == "PUT /api/buckets/{bucket}/object" || m+" "+p == "DELETE /api/buckets/{bucket}/object"
	},
}

// partPut is the operation that sends one part of an upload session.
const partPut = "PUT /api/uploads/{uploadId}/parts/{partNumber}"

// uploads and downloads say whether an operation stores or serves a file's
// bytes: by id, or as a named object.
func uploads(m, p string) bool {
	return m+" "+p == "POST /api/files" || m+" "+p == "PUT /api/buckets/{bucket}/object"
}

func downloads(m, p string) bool {
	return m+" "+p == "GET /api/files/{fileId}" || m+" "+p == "GET /api/buckets/{bucket}/object"
}

const errorSchema = "#/components/schemas/Error"

// example is one example of a document, named for the problems it has.
type example struct {
	where  string
	value  any
	schema *openapi3.SchemaRef
}

// examplesOf lists the examples of a media type, the singular one and the
// named ones alike.
func examplesOf(where string, mt *openapi3.MediaType) []example {
	var out []example
	if mt.Example != nil {
		out = append(out, example{where, mt.Example, mt.Schema})
	}
	names := make([]string, 0, len(mt.Examples))
	for name := range mt.Examples {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if ref := mt.Examples[name]; ref != nil && ref.Value != nil {
			out = append(out, example{where + " example " + name, ref.Value.Value, mt.Schema})
		}
	}
	return out
}

// exampleProblems lists everything wrong with the examples of doc: a body
// without an example, an example its schema refuses, and an error example
// whose status is not its response's or whose code the operation cannot
// answer with that status.
func exampleProblems(doc *openapi3.T) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	answers := handlerAnswers()
	templates := pathTemplates(doc)
	check := func(e example) bool {
		if e.schema == nil || e.schema.Value == nil {
			bad("%s: no schema to check the example against", e.where)
			return false
		}
		if err := e.schema.Value.VisitJSON(e.value); err != nil {
			bad("%s: the example does not match its schema: %v", e.where, err)
			return false
		}
		return true
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				for mediaType, mt := range rb.Value.Content {
					where := name + " request " + mediaType
					exs := examplesOf(where, mt)
					if len(exs) == 0 {
						bad("%s: no example", where)
					}
					for _, e := range exs {
						check(e)
					}
				}
			}
			for statusText, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(statusText)
				if err != nil || ref.Value == nil {
					bad("%s %s: not a status with a response", name, statusText)
					continue
				}
				if status >= 400 && (len(ref.Value.Content) == 0 || ref.Value.Content.Get("application/json") == nil) {
					bad("%s %d: an error answer without a JSON body", name, status)
				}
				for mediaType, mt := range ref.Value.Content {
					where := fmt.Sprintf("%s %d %s", name, status, mediaType)
					exs := examplesOf(where, mt)
					if len(exs) == 0 {
						bad("%s: no example", where)
					}
					for _, e := range exs {
						if !check(e) || mt.Schema.Ref != errorSchema {
							continue
						}
						var body httpx.ErrorBody
						raw, _ := json.Marshal(e.value)
						if err := json.Unmarshal(raw, &body); err != nil {
							bad("%s: not an error body: %v", e.where, err)
							continue
						}
						if body.Status != status {
							bad("%s: status %d under the %d response", e.where, body.Status, status)
						}
						if !answers[answer{status, body.Error}] {
							bad("%s: %s never comes with status %d", e.where, body.Error, status)
						} else if belongs, ok := codeBelongs[body.Error]; ok && !belongs(method, path, op) {
							bad("%s: %s is not an answer of %s", e.where, body.Error, name)
						}
						if !slices.ContainsFunc(templates, func(t *regexp.Regexp) bool { return t.MatchString(body.Path) }) {
							bad("%s: path %q is not a path of the API", e.where, body.Path)
						}
					}
				}
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// pathTemplates turns the document's paths into patterns, a parameter
// matching one path segment.
func pathTemplates(doc *openapi3.T) []*regexp.Regexp {
	param := regexp.MustCompile(`\\\{[^\\]*\\\}`)
	var out []*regexp.Regexp
	for path := range doc.Paths.Map() {
		out = append(out, regexp.MustCompile("^"+param.ReplaceAllString(regexp.QuoteMeta(path), "[^/]+")+"$"))
	}
	return out
}

func TestEveryExampleIsTrue(t *testing.T) {
	doc, err := openapitest.Document()
	require.NoError(t, err)
	require.Empty(t, exampleProblems(doc))
}

// The checks above must catch what they are for: each change below breaks
// the document in one way and must be reported for it.
func TestExampleChecksFail(t *testing.T) {
	tests := []struct {
		name   string
		change func(doc map[string]any)
		want   string
	}{
		{"a status no answer has", func(doc map[string]any) {
			set(doc, 599, "components", "examples", "InvalidFileId", "value", "status")
		}, "status 599 under the 400 response"},
		{"a code of another status", func(doc map[string]any) {
			set(doc, "FILE_NOT_FOUND", "components", "examples", "InvalidFileId", "value", "error")
		}, "FILE_NOT_FOUND never comes with status 400"},
		{"a node's code on a file route", func(doc map[string]any) {
			set(doc, "NODE_NOT_FOUND", "components", "examples", "FileNotFound", "value", "error")
		}, "NODE_NOT_FOUND is not an answer of GET /api/files/{fileId}"},
		{"an upload's code elsewhere", func(doc map[string]any) {
			set(doc, "NO_HEALTHY_NODES", "components", "examples", "MetadataUnavailable", "value", "error")
		}, "NO_HEALTHY_NODES is not an answer of GET /api/nodes"},
		{"the router's code under an operation", func(doc map[string]any) {
			set(doc, "NOT_FOUND", "components", "examples", "NodeNotFound", "value", "error")
		}, "NOT_FOUND is not an answer of GET /api/nodes/{nodeId}"},
		{"a path the API does not have", func(doc map[string]any) {
			set(doc, "/api/blobs/x", "components", "examples", "FileNotFound", "value", "path")
		}, `path "/api/blobs/x" is not a path of the API`},
		{"a success example against its schema", func(doc map[string]any) {
			set(doc, "DONE", "paths", "/api/files", "post", "responses", "201", "content", "application/json",
				"examples", "active", "value", "status")
		}, "POST /api/files 201 application/json example active: the example does not match its schema"},
		{"a request example against its schema", func(doc map[string]any) {
			set(doc, "node-4", "paths", "/api/nodes/register", "post", "requestBody", "content", "application/json",
				"example", "port")
		}, "POST /api/nodes/register request application/json: the example does not match its schema"},
		{"an answer without an example", func(doc map[string]any) {
			del(doc, "paths", "/api/nodes/ring", "get", "responses", "200", "content", "application/json", "example")
		}, "GET /api/nodes/ring 200 application/json: no example"},
		{"a request without an example", func(doc map[string]any) {
			del(doc, "paths", "/api/files", "post", "requestBody", "content", "multipart/form-data", "example")
		}, "POST /api/files request multipart/form-data: no example"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var raw map[string]any
			require.NoError(t, json.Unmarshal(openapi.Document(), &raw))
			tc.change(raw)
			b, err := json.Marshal(raw)
			require.NoError(t, err)
			doc, err := openapi3.NewLoader().LoadFromData(b)
			require.NoError(t, err)
			require.Contains(t, strings.Join(exampleProblems(doc), "\n"), tc.want)
		})
	}
}

// set stores v at the end of keys in a decoded JSON document.
func set(doc map[string]any, v any, keys ...string) {
	parent(doc, keys)[keys[len(keys)-1]] = v
}

// del removes the member at the end of keys in a decoded JSON document.
func del(doc map[string]any, keys ...string) {
	m := parent(doc, keys)
	if _, ok := m[keys[len(keys)-1]]; !ok {
		panic("no member " + strings.Join(keys, "/"))
	}
	delete(m, keys[len(keys)-1])
}

func parent(doc map[string]any, keys []string) map[string]any {
	m := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			panic("no object at " + k + " of " + strings.Join(keys, "/"))
		}
		m = next
	}
	return m
}
