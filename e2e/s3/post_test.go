//go:build linux

package s3e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/testenv"
)

// presignPost is a Python program that prints the form boto3's
// generate_presigned_post makes of its JSON argument.
const presignPost = `
import json, sys, boto3
from botocore.config import Config
a = json.loads(sys.argv[1])
c = boto3.client("s3", endpoint_url=a["endpoint"], region_name=a["region"],
                 config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
print(json.dumps(c.generate_presigned_post(a["bucket"], a["key"], Fields=a.get("fields"),
                 Conditions=a.get("conditions"), ExpiresIn=a["expires"])))
`

// boto3Python is a python3 that imports boto3: the one on PATH (a
// developer's), else Debian's, which .ci/run gives python3-boto3.
func boto3Python(t *testing.T) string {
	t.Helper()
	var candidates []string
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/usr/bin/python3")
	for _, p := range candidates {
		if exec.Command(p, "-c", "import boto3").Run() == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatalf("no python3 imports boto3 (tried %s): .ci/run installs python3-boto3", strings.Join(candidates, ", "))
	}
	t.Skip("skipping: no python3 imports boto3 (Debian's python3-boto3 gives it)")
	return ""
}

// form is what generate_presigned_post answers.
type form struct {
	URL    string            `json:"url"`
	Fields map[string]string `json:"fields"`
}

// presign runs boto3 as key for the arguments of generate_presigned_post.
func presign(t *testing.T, python string, c *cluster, key, secret string, args map[string]any) form {
	t.Helper()
	args["endpoint"], args["region"] = c.s3URL, region
	a, err := json.Marshal(args)
	require.NoError(t, err)
	home := t.TempDir()
	cmd := exec.Command(python, "-c", presignPost, string(a))
	// The developer's AWS settings must not change what boto3 signs.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AWS_ACCESS_KEY_ID=" + key,
		"AWS_SECRET_ACCESS_KEY=" + secret, "AWS_CONFIG_FILE=" + filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}
	var out, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &log
	require.NoError(t, cmd.Run(), "boto3: %s", log.String())
	var f form
	require.NoError(t, json.Unmarshal(out.Bytes(), &f), out.String())
	return f
}

// post sends the form as a browser does, its fields and then the file;
// extra are fields added after boto3's.
func (c *cluster) post(f form, filename string, file []byte, extra ...string) (int, http.Header, string) {
	c.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, v := range f.Fields {
		require.NoError(c.t, mw.WriteField(name, v))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		require.NoError(c.t, mw.WriteField(extra[i], extra[i+1]))
	}
	fw, err := mw.CreateFormFile("file", filename)
	require.NoError(c.t, err)
	_, err = fw.Write(file)
	require.NoError(c.t, err)
	require.NoError(c.t, mw.Close())
	req, err := http.NewRequest(http.MethodPost, f.URL, &body)
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func s3ErrorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct{ Code string }
	require.NoError(t, xml.Unmarshal([]byte(body), &e), body)
	return e.Code
}

// TestBrowserUploads posts forms made by boto3's generate_presigned_post
// to a real cluster: the object keeps the file's bytes, the content type
// and metadata the form carried; a file outside content-length-range, an
// expired policy and a key without rights on the bucket store nothing.
func TestBrowserUploads(t *testing.T) {
	python := boto3Python(t)
	c := startCluster(t)
	ctx := context.Background()
	root := c.sdk(rootKey, rootSecret)
	_, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("uploads")})
	require.NoError(t, err)

	photo := random(200 << 10)
	f := presign(t, python, c, rootKey, rootSecret, map[string]any{
		"bucket": "uploads", "key": "in/${filename}", "expires": 600,
		"fields": map[string]string{"Content-Type": "image/png", "x-amz-meta-album": "summer", "success_action_status": "201"},
		"conditions": []any{map[string]string{"Content-Type": "image/png"}, map[string]string{"x-amz-meta-album": "summer"},
			map[string]string{"success_action_status": "201"}, []any{"content-length-range", 1, 1 << 20}},
	})
	require.Equal(t, c.s3URL+"/uploads", f.URL)
	status, hdr, body := c.post(f, "beach.png", photo)
	require.Equal(t, http.StatusCreated, status, body)
	var pr struct{ Bucket, Key, ETag string }
	require.NoError(t, xml.Unmarshal([]byte(body), &pr), body)
	require.Equal(t, "in/beach.png", pr.Key)
	require.Equal(t, `"`+md5hex(photo)+`"`, pr.ETag)
	require.Equal(t, pr.ETag, hdr.Get("ETag"))
	out, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("uploads"), Key: aws.String("in/beach.png")})
	require.NoError(t, err)
	require.Equal(t, "image/png", aws.ToString(out.ContentType))
	require.Equal(t, map[string]string{"album": "summer"}, out.Metadata)
	require.Equal(t, sha256hex(photo), sha256hex(readAll(t, out, err)))

	// A field the policy does not name is refused, as S3 refuses it.
	status, _, body = c.post(f, "extra.png", photo, "x-amz-meta-other", "1")
	require.Equal(t, http.StatusForbidden, status, body)
	require.Equal(t, "AccessDenied", s3ErrorCode(t, body))

	small := presign(t, python, c, rootKey, rootSecret, map[string]any{
		"bucket": "uploads", "key": "small", "expires": 600, "conditions": []any{[]any{"content-length-range", 0, 1024}},
	})
	status, _, body = c.post(small, "big.bin", random(4096))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Equal(t, "EntityTooLarge", s3ErrorCode(t, body))
	status, _, body = c.post(small, "ok.bin", []byte("fits"))
	require.Equal(t, http.StatusNoContent, status, body)

	expired := presign(t, python, c, rootKey, rootSecret, map[string]any{"bucket": "uploads", "key": "late", "expires": -60})
	status, _, body = c.post(expired, "late.bin", []byte("late"))
	require.Equal(t, http.StatusForbidden, status, body)
	require.Equal(t, "AccessDenied", s3ErrorCode(t, body))
	require.Contains(t, body, "Policy expired.")

	ak, sk := c.createKey("stranger")
	foreign := presign(t, python, c, ak, sk, map[string]any{"bucket": "uploads", "key": "theirs", "expires": 600})
	status, _, body = c.post(foreign, "theirs.bin", []byte("not yours"))
	require.Equal(t, http.StatusForbidden, status, body)
	require.Equal(t, "AccessDenied", s3ErrorCode(t, body))

	list, err := root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("uploads")})
	require.NoError(t, err)
	require.Equal(t, []string{"in/beach.png", "small"}, keysOf(list))
	out, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("uploads"), Key: aws.String("small")})
	require.Equal(t, []byte("fits"), readAll(t, out, err))
}
