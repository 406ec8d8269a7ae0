package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/objects"
)

// splitName reads "bucket/key" (or "bucket/" and "bucket" when key may be
// empty): the name forms of put, get, ls and rm, beside the file ids. A
// file id is never a name; neither is anything whose first element breaks
// S3's bucket rules.
func splitName(arg string, keyOptional bool) (bucket, key string, ok bool) {
	if files.ValidateFileID(arg) == nil {
		return "", "", false
	}
	bucket, key, found := strings.Cut(arg, "/")
	if !objects.ValidBucketName(bucket) || (!keyOptional && (!found || key == "")) {
		return "", "", false
	}
	return bucket, key, true
}

// putNamed stores FILE under bucket/key, or with recursive every file
// under the directory FILE under bucket/prefix + its path below it.
func (cc *clientCmd) putNamed(ctx context.Context, src, bucket, key, ctype string, recursive bool) int {
	if !recursive {
		if err := cc.putObject(ctx, src, bucket, key, ctype); err != nil {
			return cc.failFile(src, err)
		}
		return exitOK
	}
	failed := false
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if err := cc.putObject(ctx, p, bucket, path.Join(key, filepath.ToSlash(rel)), ctype); err != nil {
			if code := cc.failFile(p, err); code == exitUnreachable || ctx.Err() != nil {
				return err
			}
			failed = true
		}
		return nil
	})
	if err != nil || failed {
		if err != nil {
			fmt.Fprintf(cc.s.err, "dfs put: %v\n", err)
		}
		return exitFailed
	}
	return exitOK
}

func (cc *clientCmd) putObject(ctx context.Context, p, bucket, key, ctype string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	res, err := cc.c.PutObject(ctx, bucket, key, f, st.Size(), ctype)
	if err != nil {
		return err
	}
	if cc.json {
		cc.printJSON(res)
		return nil
	}
	fmt.Fprintf(cc.s.out, "%s/%s  %s  %s  %s\n", res.Bucket, res.Key, res.FileID, humanBytes(res.SizeBytes), res.Status)
	return nil
}

// lsNamed lists bucket/prefix one level deep, like `aws s3 ls`, or every
// bucket when arg is empty.
func (cc *clientCmd) lsNamed(ctx context.Context, bucket, prefix string, recursive bool) int {
	q := client.ListQuery{Prefix: prefix}
	if !recursive {
		q.Delimiter = "/"
	}
	tw := tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
	var all client.ObjectList
	for {
		page, err := cc.c.ListObjects(ctx, bucket, q)
		if err != nil {
			return cc.fail(err)
		}
		all.Objects = append(all.Objects, page.Objects...)
		all.Prefixes = append(all.Prefixes, page.Prefixes...)
		if !page.Truncated {
			break
		}
		q.After = page.Next
	}
	if cc.json {
		cc.printJSON(all)
		return exitOK
	}
	for _, p := range all.Prefixes {
		fmt.Fprintf(tw, "PRE\t%s\t\t\n", p)
	}
	for _, o := range all.Objects {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", localTime(o.ModifiedAt), humanBytes(o.SizeBytes), o.Key, o.FileID)
	}
	tw.Flush()
	return exitOK
}

func (cc *clientCmd) lsBuckets(ctx context.Context) int {
	buckets, err := cc.c.Buckets(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(buckets)
		return exitOK
	}
	for _, b := range buckets {
		fmt.Fprintf(cc.s.out, "%s  %s\n", localTime(b.CreatedAt), b.Name)
	}
	return exitOK
}

const mbHelp = `usage: dfs mb [flags] BUCKET

Creates a bucket (the same buckets as the S3 API's), owned by the key the
command runs with.
`

func runMb(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("mb", mbHelp, s)
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	b, err := cc.c.CreateBucket(ctx, pos[0])
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(b)
		return exitOK
	}
	fmt.Fprintf(cc.s.out, "bucket %s created\n", b.Name)
	return exitOK
}
