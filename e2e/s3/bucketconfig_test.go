//go:build linux

package s3e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv"
)

// awsCLI runs Debian's awscli (or the aws on PATH) against url as the root
// key and returns its stdout; a failure fails the test.
func awsCLI(t *testing.T, url string) func(args ...string) string {
	home := t.TempDir()
	cfg := filepath.Join(home, "aws-config")
	require.NoError(t, os.WriteFile(cfg, []byte("[default]\ns3 =\n  addressing_style = path\n"), 0o600))
	tl := tool{t, []string{"HOME=" + home, "AWS_ACCESS_KEY_ID=" + rootKey, "AWS_SECRET_ACCESS_KEY=" + rootSecret,
		"AWS_DEFAULT_REGION=" + region, "AWS_CONFIG_FILE=" + cfg, "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}}
	return func(args ...string) string {
		t.Helper()
		return tl.run("aws", append([]string{"--endpoint-url", url}, args...)...)
	}
}

// awsCLIFails runs the aws CLI expecting a failure and returns its log.
func awsCLIFails(t *testing.T, url string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	tl := tool{t, []string{"HOME=" + home, "AWS_ACCESS_KEY_ID=" + rootKey, "AWS_SECRET_ACCESS_KEY=" + rootSecret,
		"AWS_DEFAULT_REGION=" + region, "AWS_CONFIG_FILE=" + filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}}
	out, log, err := tl.try("aws", append([]string{"--endpoint-url", url}, args...)...)
	require.Error(t, err, "aws %s succeeded:\n%s", strings.Join(args, " "), out)
	return log
}

type cliTagSet struct {
	TagSet []struct{ Key, Value string }
}

func (s cliTagSet) pairs() []string {
	var out []string
	for _, t := range s.TagSet {
		out = append(out, t.Key+"="+t.Value)
	}
	return out
}

// TestBucketAndObjectConfig drives object and bucket tagging and CORS
// through two coordinators sharing PostgreSQL and Redis, with aws-sdk-go-v2,
// the aws CLI and a browser's preflight and presigned GET: what one
// coordinator writes, the other serves at once, though it caches bucket
// records.
func TestBucketAndObjectConfig(t *testing.T) {
	shared := []string{"DATABASE_URL=" + testenv.NewPostgresDB(t), "REDIS_URL=" + redistest.Start(t).URL()}
	c := startCluster(t, shared...)
	p := c.startPeer(t, shared...)
	a, b := c.sdk(rootKey, rootSecret), c.sdkAt(p.s3URL)
	cliA, cliB := awsCLI(t, c.s3URL), awsCLI(t, p.s3URL)
	ctx := context.Background()
	_, err := a.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("conf")})
	require.NoError(t, err)

	t.Run("ObjectTags", func(t *testing.T) {
		_, err := a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("conf"), Key: aws.String("report.csv"),
			Body: strings.NewReader("a,b\n"), Tagging: aws.String("project=dfs&stage=draft")})
		require.NoError(t, err)
		head, err := b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("conf"), Key: aws.String("report.csv")})
		require.NoError(t, err)
		require.EqualValues(t, 2, aws.ToInt32(head.TagCount), "the other coordinator counts the tags")

		var got cliTagSet
		require.NoError(t, json.Unmarshal([]byte(cliB("s3api", "get-object-tagging", "--bucket", "conf", "--key", "report.csv")), &got))
		require.Equal(t, []string{"project=dfs", "stage=draft"}, got.pairs())

		cliB("s3api", "put-object-tagging", "--bucket", "conf", "--key", "report.csv",
			"--tagging", `{"TagSet":[{"Key":"stage","Value":"final"},{"Key":"owner","Value":"Zoë"}]}`)
		out, err := a.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("conf"), Key: aws.String("report.csv")})
		require.NoError(t, err)
		require.Len(t, out.TagSet, 2)
		require.Equal(t, "final", aws.ToString(out.TagSet[0].Value))
		require.Equal(t, "Zoë", aws.ToString(out.TagSet[1].Value))

		log := awsCLIFails(t, c.s3URL, "s3api", "put-object-tagging", "--bucket", "conf", "--key", "report.csv",
			"--tagging", `{"TagSet":[{"Key":"aws:system","Value":"x"}]}`)
		require.Contains(t, log, "InvalidTag")

		// A new version of the key, without tags, has none.
		_, err = b.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("conf"), Key: aws.String("report.csv"), Body: strings.NewReader("c,d\n")})
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(cliA("s3api", "get-object-tagging", "--bucket", "conf", "--key", "report.csv")), &got))
		require.Empty(t, got.TagSet)

		// x-amz-tagging on PutObject, and CopyObject's tagging directive,
		// as the CLI sends them.
		body := filepath.Join(t.TempDir(), "cli.txt")
		require.NoError(t, os.WriteFile(body, []byte("from the CLI"), 0o600))
		cliA("s3api", "put-object", "--bucket", "conf", "--key", "cli.txt", "--body", body, "--tagging", "src=cli&kind=text")
		require.NoError(t, json.Unmarshal([]byte(cliB("s3api", "get-object-tagging", "--bucket", "conf", "--key", "cli.txt")), &got))
		require.Equal(t, []string{"src=cli", "kind=text"}, got.pairs())
		cliB("s3api", "copy-object", "--bucket", "conf", "--key", "copied.txt", "--copy-source", "conf/cli.txt")
		require.NoError(t, json.Unmarshal([]byte(cliA("s3api", "get-object-tagging", "--bucket", "conf", "--key", "copied.txt")), &got))
		require.Equal(t, []string{"src=cli", "kind=text"}, got.pairs(), "a copy takes the source's tags")
		cliB("s3api", "copy-object", "--bucket", "conf", "--key", "copied.txt", "--copy-source", "conf/cli.txt",
			"--tagging-directive", "REPLACE", "--tagging", "dst=copy")
		require.NoError(t, json.Unmarshal([]byte(cliA("s3api", "get-object-tagging", "--bucket", "conf", "--key", "copied.txt")), &got))
		require.Equal(t, []string{"dst=copy"}, got.pairs(), "or those it is given")

		cliA("s3api", "put-object-tagging", "--bucket", "conf", "--key", "report.csv", "--tagging", `{"TagSet":[{"Key":"k","Value":"v"}]}`)
		cliA("s3api", "delete-object-tagging", "--bucket", "conf", "--key", "report.csv")
		out, err = b.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("conf"), Key: aws.String("report.csv")})
		require.NoError(t, err)
		require.Empty(t, out.TagSet)
	})

	t.Run("BucketTags", func(t *testing.T) {
		log := awsCLIFails(t, p.s3URL, "s3api", "get-bucket-tagging", "--bucket", "conf")
		require.Contains(t, log, "NoSuchTagSet")
		cliA("s3api", "put-bucket-tagging", "--bucket", "conf", "--tagging", `{"TagSet":[{"Key":"team","Value":"storage"}]}`)
		var got cliTagSet
		require.NoError(t, json.Unmarshal([]byte(cliB("s3api", "get-bucket-tagging", "--bucket", "conf")), &got))
		require.Equal(t, []string{"team=storage"}, got.pairs())

		// The peer has just read the bucket, which it caches for seconds; a
		// change through the first coordinator must be what it serves
		// next, however soon (the SDK's calls take milliseconds).
		for _, team := range []string{"platform", "data", "ops"} {
			_, err := a.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String("conf"),
				Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String(team)}}}})
			require.NoError(t, err)
			out, err := b.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("conf")})
			require.NoError(t, err)
			require.Len(t, out.TagSet, 1)
			require.Equal(t, team, aws.ToString(out.TagSet[0].Value), "the other coordinator serves the new tags at once")
		}

		cliB("s3api", "delete-bucket-tagging", "--bucket", "conf")
		_, err = a.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("conf")})
		require.Equal(t, "NoSuchTagSet", code(t, err))
	})

	t.Run("CORS", func(t *testing.T) {
		log := awsCLIFails(t, c.s3URL, "s3api", "get-bucket-cors", "--bucket", "conf")
		require.Contains(t, log, "NoSuchCORSConfiguration")
		cliA("s3api", "put-bucket-cors", "--bucket", "conf", "--cors-configuration",
			`{"CORSRules":[{"ID":"app","AllowedOrigins":["https://app.example.com"],"AllowedMethods":["GET","PUT"],`+
				`"AllowedHeaders":["*"],"ExposeHeaders":["ETag"],"MaxAgeSeconds":600}]}`)
		var got struct {
			CORSRules []struct {
				ID                                                            string
				AllowedOrigins, AllowedMethods, AllowedHeaders, ExposeHeaders []string
				MaxAgeSeconds                                                 int
			}
		}
		require.NoError(t, json.Unmarshal([]byte(cliB("s3api", "get-bucket-cors", "--bucket", "conf")), &got))
		require.Len(t, got.CORSRules, 1)
		r := got.CORSRules[0]
		require.Equal(t, "app", r.ID)
		require.Equal(t, []string{"https://app.example.com"}, r.AllowedOrigins)
		require.Equal(t, []string{"GET", "PUT"}, r.AllowedMethods)
		require.Equal(t, []string{"*"}, r.AllowedHeaders)
		require.Equal(t, []string{"ETag"}, r.ExposeHeaders)
		require.Equal(t, 600, r.MaxAgeSeconds)

		status, h := rawPreflight(t, c, p.s3URL+"/conf/upload.bin", "https://app.example.com", "PUT", "content-type,x-amz-date")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "https://app.example.com", h.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "GET, PUT", h.Get("Access-Control-Allow-Methods"))
		require.Equal(t, "content-type, x-amz-date", h.Get("Access-Control-Allow-Headers"))
		require.Equal(t, "600", h.Get("Access-Control-Max-Age"))
		status, _ = rawPreflight(t, c, p.s3URL+"/conf/upload.bin", "https://evil.test", "PUT", "")
		require.Equal(t, http.StatusForbidden, status)

		// The peer has the bucket cached; rules changed through the first
		// coordinator are what its next preflight is answered from.
		_, err := a.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String("conf"), CORSConfiguration: &types.CORSConfiguration{
			CORSRules: []types.CORSRule{{AllowedOrigins: []string{"https://evil.test"}, AllowedMethods: []string{"PUT"}}}}})
		require.NoError(t, err)
		status, _ = rawPreflight(t, c, p.s3URL+"/conf/upload.bin", "https://evil.test", "PUT", "")
		require.Equal(t, http.StatusOK, status, "the other coordinator answers from the new rules at once")
		status, _ = rawPreflight(t, c, p.s3URL+"/conf/upload.bin", "https://app.example.com", "PUT", "")
		require.Equal(t, http.StatusForbidden, status)

		// A presigned URL, as a browser application is handed one, read
		// cross-origin through the other coordinator.
		_, err = a.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String("conf"), CORSConfiguration: &types.CORSConfiguration{
			CORSRules: []types.CORSRule{{AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"GET"},
				ExposeHeaders: []string{"ETag", "Content-Length"}}}}})
		require.NoError(t, err)
		_, err = a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("conf"), Key: aws.String("photo.jpg"), Body: strings.NewReader("jpeg")})
		require.NoError(t, err)
		signed, err := s3.NewPresignClient(b).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("conf"), Key: aws.String("photo.jpg")})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodGet, signed.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://app.example.com")
		resp, err := c.http.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "jpeg", string(body))
		require.Equal(t, "https://app.example.com", resp.Header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "ETag, Content-Length", resp.Header.Get("Access-Control-Expose-Headers"))
		require.Contains(t, resp.Header.Get("Vary"), "Origin")

		_, err = b.DeleteBucketCors(ctx, &s3.DeleteBucketCorsInput{Bucket: aws.String("conf")})
		require.NoError(t, err)
		status, _ = rawPreflight(t, c, c.s3URL+"/conf/photo.jpg", "https://app.example.com", "GET", "")
		require.Equal(t, http.StatusForbidden, status, "the first coordinator answers from no rules at once")
		log = awsCLIFails(t, c.s3URL, "s3api", "get-bucket-cors", "--bucket", "conf")
		require.Contains(t, log, "NoSuchCORSConfiguration")
	})
}

// rawPreflight sends a browser's preflight: an unsigned OPTIONS with
// Origin and Access-Control-Request-Method (and -Headers when given).
func rawPreflight(t *testing.T, c *cluster, url, origin, method, headers string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	resp, err := c.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}
