package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/errs"
)

// interruptible returns a context that a Ctrl-C or SIGTERM cancels, so that
// a transfer stops cleanly and leaves nothing half-written behind.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

const putHelp = `usage: dfs put [flags] FILE…
       dfs put [flags] FILE BUCKET/KEY
       dfs put -r [flags] DIR BUCKET/PREFIX

The second form stores FILE under a name in a bucket (see dfs mb), replacing
what the key held; the third stores every file under DIR, keyed
PREFIX/<its path below DIR>. They are the objects the S3 API serves.

Uploads each FILE and prints one line per file: its id, status, name, size,
primary node and replica nodes. "-" reads standard input. A DEGRADED file
(fewer copies than the replication factor) is stored but warned about on
stderr. A failed file does not stop the others; the exit status is then 1.
With -json each upload's result is printed as the API answered it. When
stderr is a terminal, files of 1 MiB or more get a progress bar there.

A file larger than 8 MiB (the coordinator's default CHUNK_SIZE) is sent as
the parts of an upload session, -parallel at a time, each retried on its
own. While it runs, FILE.dfs-upload beside it records the session; after an
interruption, -resume continues it, sending only the parts the coordinator
does not hold (the file must be unchanged). -key sends a file whole.
`

func runPut(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("put", putHelp, s)
	key := cc.fs.String("key", "", "Idempotency-Key for the upload: a repeat with the same key and bytes stores nothing new (one FILE only)")
	ctype := cc.fs.String("type", "", "content type of the files (default: guessed from each name)")
	name := cc.fs.String("name", "", "stored file name (default: the FILE's base name; \"stdin\" for -) (one FILE only)")
	quiet := cc.fs.Bool("q", false, "no progress bar")
	recursive := cc.fs.Bool("r", false, "with a DIR and a bucket/prefix: store every file under DIR, keyed by its path below it")
	parallel := cc.fs.Int("parallel", 4, "parts of a large file sent at once")
	resume := cc.fs.Bool("resume", false, "continue an interrupted upload of a large file (recorded in FILE.dfs-upload)")
	partSize := new(int64)
	*partSize = 16 << 20
	cc.fs.Func("part-size", "bytes per part of a large file, as 16MiB or 16777216 (default 16MiB)", func(v string) error {
		l := envconf.FromMap(map[string]string{"-part-size": v})
		*partSize = l.Size("-part-size", 0)
		return l.Err()
	})
	paths, code, done := cc.parse(args, 1, -1)
	if done {
		return code
	}
	if *parallel < 1 || *parallel > 64 {
		return cc.usageError("-parallel must be between 1 and 64, got %d", *parallel)
	}
	if *partSize < 1<<20 || *partSize > 5<<30 {
		return cc.usageError("-part-size must be between 1MiB and 5GiB, got %d", *partSize)
	}
	cc.parts = partOptions{parallel: *parallel, size: *partSize, resume: *resume}
	if len(paths) == 2 {
		if b, k, ok := splitName(paths[1], *recursive); ok {
			if _, err := os.Stat(paths[1]); err != nil {
				return cc.putNamed(ctx, paths[0], b, k, *ctype, *recursive)
			}
		}
	}
	if *recursive {
		return cc.usageError("-r needs a DIR and a bucket/prefix")
	}
	if len(paths) > 1 && (*key != "" || *name != "") {
		return cc.usageError("-key and -name need exactly one FILE, got %d", len(paths))
	}
	if err := checkIdempotencyKey(*key); err != nil {
		return cc.usageError("-key: %v", err)
	}
	if *ctype != "" {
		if _, _, err := mime.ParseMediaType(*ctype); err != nil {
			return cc.usageError("-type %q is not a content type such as text/plain: %v", *ctype, err)
		}
	}
	ctx, stop := interruptible(ctx)
	defer stop()

	failed := false
	for _, path := range paths {
		if err := cc.putOne(ctx, path, *name, client.UploadOptions{ContentType: *ctype, IdempotencyKey: *key}, !*quiet); err != nil {
			code := cc.failFile(path, err)
			if code == exitUnreachable || ctx.Err() != nil {
				return code
			}
			failed = true
		}
	}
	if failed {
		return exitFailed
	}
	return exitOK
}

// checkIdempotencyKey applies API.md's rule for an Idempotency-Key (1–255
// printable ASCII characters, no spaces), so that a bad -key is a usage
// error rather than a refused upload; "" means no key.
func checkIdempotencyKey(key string) error {
	if len(key) > 255 {
		return errors.New("longer than 255 characters")
	}
	for _, c := range key {
		if c < '!' || c > '~' {
			return fmt.Errorf("%q: only printable ASCII without spaces", key)
		}
	}
	return nil
}

func (cc *clientCmd) putOne(ctx context.Context, path, name string, opts client.UploadOptions, draw bool) error {
	var (
		r    io.Reader
		size int64 = -1
	)
	if path == "-" {
		r = cc.s.in
		if name == "" {
			name = "stdin"
		}
		// A redirected file has a size, which lets the coordinator refuse
		// an oversize upload at once; a pipe is sent chunked.
		if f, ok := r.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				if off, err := f.Seek(0, io.SeekCurrent); err == nil {
					size = st.Size() - off
				}
			}
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return errs.Wrap(errs.Invalid, err, "")
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return errs.Wrap(errs.Invalid, err, "")
		}
		if !st.Mode().IsRegular() {
			return errs.E(errs.Invalid, "%s is not a regular file", path)
		}
		r, size = f, st.Size()
		if name == "" {
			name = filepath.Base(path)
		}
	}
	p := newProgress(cc.s.err, draw && isTerminal(cc.s.err), name, size, "storing the copies…")
	var res client.UploadResult
	var err error
	whole := true
	if f, ok := r.(*os.File); ok && path != "-" && size > minChunkSize && opts.IdempotencyKey == "" {
		st, serr := f.Stat()
		if serr != nil {
			return errs.Wrap(errs.Invalid, serr, "")
		}
		res, err = cc.putParts(ctx, path, name, f, st, opts.ContentType, cc.parts.parallel, cc.parts.size, cc.parts.resume, p)
		whole = errors.Is(err, errFitsOneChunk)
		if err != nil && !whole && ctx.Err() != nil {
			p.done(false)
			return errs.Wrap(errs.Other, ctx.Err(), "%s: interrupted; the parts stored so far are kept: `dfs put -resume %s` sends the rest", path, path)
		}
	}
	if whole {
		res, err = cc.c.Upload(ctx, name, p.reader(r), size, opts)
	}
	p.done(err == nil)
	switch {
	case err != nil && ctx.Err() != nil && size >= 0 && p.n.Load() >= size:
		// The coordinator finishes an upload whose body it has whole.
		return errs.Wrap(errs.Other, ctx.Err(), "%s: interrupted after the last byte was sent: the coordinator may still store it (`dfs ls` will show it)", path)
	case err != nil && ctx.Err() != nil:
		return errs.Wrap(errs.Other, ctx.Err(), "%s: interrupted; it was not stored", path)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	}
	if cc.json {
		cc.printJSON(res)
	} else {
		fmt.Fprintf(cc.s.out, "%s  %s  %s  %s  %s\n",
			res.FileID, res.Status, res.FileName, humanBytes(res.SizeBytes), cc.copiesOf(ctx, res))
	}
	if res.Replayed {
		fmt.Fprintf(cc.s.err, "dfs put: %s: already stored under this idempotency key; nothing new was stored\n", path)
	}
	if res.Status == client.FileDegraded {
		fmt.Fprintf(cc.s.err, "dfs put: warning: %s is stored with fewer copies than %d: %s\n", path, res.ReplicationFactor, res.Reason)
	}
	return nil
}

const getHelp = `usage: dfs get [flags] ID|BUCKET/KEY

Downloads a file into the current directory under its stored name, or to
-o PATH (a directory keeps the stored name; "-" writes to stdout). An
existing file is never replaced without -f. The bytes go to a temporary
file beside the target, are checked against the file's SHA-256, and only
then take the target's name: a failed or interrupted download leaves
nothing behind. (Bytes written to stdout cannot be taken back: there a
failed download is told by the exit status.) With -json the outcome is printed as {fileId, path,
sizeBytes, checksum, verified, servedBy}. When stderr is a terminal, files
of 1 MiB or more get a progress bar there.
`

func runGet(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("get", getHelp, s)
	out := cc.fs.String("o", "", "where to save the file: a path, a directory, or - for stdout")
	force := cc.fs.Bool("f", false, "replace an existing file")
	quiet := cc.fs.Bool("q", false, "no progress bar")
	proxied := cc.fs.Bool("via-coordinator", false, "read every byte through the coordinator instead of from the storage nodes directly")
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	if *out == "-" && cc.json {
		return cc.usageError("-json and -o - would both write to stdout")
	}
	id := pos[0]
	ctx, stop := interruptible(ctx)
	defer stop()
	if b, k, ok := splitName(id, false); ok {
		o, err := cc.c.Object(ctx, b, k)
		if err != nil {
			return cc.fail(err)
		}
		id = o.FileID
	}

	md, err := cc.c.Metadata(ctx, id)
	if err != nil {
		return cc.fail(err)
	}
	draw := !*quiet && isTerminal(cc.s.err)
	if *out == "-" {
		p := newProgress(cc.s.err, draw, md.FileName, md.SizeBytes, "")
		_, err := fetch(ctx, cc.c, id, p.writer(cc.s.out), *proxied)
		p.done(err == nil)
		if err != nil {
			return cc.fail(err)
		}
		return exitOK
	}

	dest := targetPath(*out, md.FileName, id)
	if !*force {
		if _, err := os.Lstat(dest); err == nil {
			return cc.fail(errs.E(errs.Conflict, "%s exists; use -f to replace it, or -o to save elsewhere", dest))
		}
	}
	p := newProgress(cc.s.err, draw, md.FileName, md.SizeBytes, "")
	info, err := download(ctx, cc.c, id, dest, *force, *proxied, p)
	p.done(err == nil)
	if err != nil && ctx.Err() != nil {
		return cc.fail(errs.Wrap(errs.Other, ctx.Err(), "interrupted; nothing was saved"))
	}
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(struct {
			FileID    string `json:"fileId"`
			Path      string `json:"path"`
			SizeBytes int64  `json:"sizeBytes"`
			Checksum  string `json:"checksum"`
			Verified  bool   `json:"verified"`
			ServedBy  string `json:"servedBy,omitempty"`
			FromCache bool   `json:"fromCache,omitempty"`
		}{id, dest, info.Bytes, info.Checksum, info.Verified, info.ServedBy, info.FromCache})
		return exitOK
	}
	check := "not checked: the coordinator sent no checksum"
	if info.Verified {
		check = "SHA-256 verified"
	}
	from := "served by " + info.ServedBy
	switch {
	case info.Direct:
		from = "read from the storage nodes directly"
	case info.FromCache:
		from = "from the coordinator's content cache"
	}
	fmt.Fprintf(cc.s.out, "saved %s (%s, %s, %s)\n", dest, humanBytes(info.Bytes), check, from)
	return exitOK
}

// targetPath is where a download goes: -o as given, or inside it when it is
// a directory, under the stored name reduced to one path element.
func targetPath(out, stored, id string) string {
	name := filepath.Base(stored)
	if name == "." || name == ".." || name == string(filepath.Separator) {
		name = id
	}
	if out == "" {
		return name
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return filepath.Join(out, name)
	}
	return out
}

// download writes the file to a temporary file beside dest and gives it
// dest's name once every byte is in and checked. Without force an existing
// dest is never replaced, even one created while the bytes were moving.
func download(ctx context.Context, c *client.Client, id, dest string, force, proxied bool, p *progress) (client.DownloadInfo, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*.dfs-part")
	if err != nil {
		return client.DownloadInfo{}, errs.Wrap(errs.Other, err, "cannot write beside %s", dest)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	info, err := fetch(ctx, c, id, p.writer(tmp), proxied)
	if err != nil {
		return info, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return info, errs.Wrap(errs.Other, err, "write %s", tmp.Name())
	}
	if err := tmp.Sync(); err != nil {
		return info, errs.Wrap(errs.Other, err, "write %s", tmp.Name())
	}
	if err := tmp.Close(); err != nil {
		return info, errs.Wrap(errs.Other, err, "write %s", tmp.Name())
	}
	if err := commit(tmp.Name(), dest, force); err != nil {
		return info, err
	}
	committed = true
	return info, nil
}

// fetch writes file id to w: from the storage nodes directly, through the
// URLs the coordinator signs, unless proxied asks for every byte through the
// coordinator (DownloadDirect falls back to it by itself, blob by blob, for
// nodes it cannot reach).
func fetch(ctx context.Context, c *client.Client, id string, w io.Writer, proxied bool) (client.DownloadInfo, error) {
	if proxied {
		return c.Download(ctx, id, w, client.DownloadOptions{})
	}
	return c.DownloadDirect(ctx, id, w)
}

// commit gives the finished temporary file dest's name. A hard link fails
// when dest exists, which makes "never replace" hold without a race; where
// the file system has no hard links, a check before the rename has to do.
func commit(tmp, dest string, force bool) error {
	if !force {
		err := os.Link(tmp, dest)
		if err == nil {
			os.Remove(tmp)
			return nil
		}
		if errors.Is(err, fs.ErrExist) {
			return errs.E(errs.Conflict, "%s appeared during the download; use -f to replace it", dest)
		}
		if _, serr := os.Lstat(dest); serr == nil {
			return errs.E(errs.Conflict, "%s appeared during the download; use -f to replace it", dest)
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		return errs.Wrap(errs.Other, err, "save %s", dest)
	}
	return nil
}

// maxPageSize is the largest page the API serves.
const maxPageSize = 1000

// fileStatuses are the states `dfs ls -status` may ask for.
var fileStatuses = []client.FileStatus{
	client.FilePending, client.FileActive, client.FileDegraded, client.FileRebalancing, client.FileFailed, client.FileDeleted,
}

const lsHelp = `usage: dfs ls [flags]
       dfs ls [-r] [flags] BUCKET[/PREFIX]
       dfs ls -buckets [flags]

Lists stored files, newest first, a page at a time. PENDING and DELETED
files are listed only when -status asks for them. With BUCKET[/PREFIX] it
lists that bucket's keys under the prefix in byte order, one level deep
(deeper keys rolled up as PRE lines) unless -r; -buckets lists the buckets.
`

func runLs(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("ls", lsHelp, s)
	page := cc.fs.Int("page", 0, "page number, from 0")
	size := cc.fs.Int("size", 20, "files per page, 1–1000")
	status := cc.fs.String("status", "", "only files in these states, comma-separated: PENDING, ACTIVE, DEGRADED, REBALANCING, FAILED, DELETED")
	recursive := cc.fs.Bool("r", false, "with bucket/prefix: every key below it, not one level")
	buckets := cc.fs.Bool("buckets", false, "list the buckets")
	pos, code, done := cc.parse(args, 0, 1)
	if done {
		return code
	}
	if *buckets {
		return cc.lsBuckets(ctx)
	}
	if len(pos) == 1 {
		b, prefix, ok := splitName(pos[0], true)
		if !ok {
			return cc.usageError("%q is not BUCKET or BUCKET/PREFIX", pos[0])
		}
		return cc.lsNamed(ctx, b, prefix, *recursive)
	}
	if *page < 0 {
		return cc.usageError("-page must be 0 or more, got %d", *page)
	}
	if *size < 1 || *size > maxPageSize {
		return cc.usageError("-size must be 1–%d, got %d", maxPageSize, *size)
	}
	var statuses []client.FileStatus
	for _, st := range strings.Split(*status, ",") {
		st = strings.ToUpper(strings.TrimSpace(st))
		if st == "" {
			continue
		}
		if !slices.Contains(fileStatuses, client.FileStatus(st)) {
			return cc.usageError("-status: unknown state %q (use PENDING, ACTIVE, DEGRADED, REBALANCING, FAILED or DELETED)", st)
		}
		statuses = append(statuses, client.FileStatus(st))
	}
	list, err := cc.c.List(ctx, *page, *size, statuses)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(list)
		return exitOK
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(cc.s.out, "no files on page %d (%d in all)\n", list.Page, list.Total)
		return exitOK
	}
	tw := tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSIZE\tCREATED\tNAME")
	for _, f := range list.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.FileID, f.Status, humanBytes(f.SizeBytes), localTime(f.CreatedAt), f.FileName)
	}
	tw.Flush()
	first := list.Page*list.Size + 1
	fmt.Fprintf(cc.s.out, "files %d–%d of %d", first, first+len(list.Items)-1, list.Total)
	if first+len(list.Items)-1 < list.Total {
		fmt.Fprintf(cc.s.out, "; next page: dfs ls -page %d", list.Page+1)
	}
	fmt.Fprintln(cc.s.out)
	return exitOK
}

// copiesOf says where an upload's copies are. A chunked file has no copies
// of its own (each chunk has its own), so an upload that names no other
// holder is looked up once more to summarise its chunks' copies.
func (cc *clientCmd) copiesOf(ctx context.Context, res client.UploadResult) string {
	whole := fmt.Sprintf("primary %s, replicas %s", res.PrimaryNode, orNone(res.Replicas))
	if len(res.Replicas) > 0 {
		return whole
	}
	f, err := cc.c.Metadata(ctx, res.FileID)
	if err != nil || len(f.Chunks) == 0 {
		return whole
	}
	return chunkCopies(f.Chunks)
}

// chunkCopies summarises a chunked file's copies: how many chunks, how many
// ACTIVE copies each has and on which nodes, e.g. "38 chunks, 3 copies each
// on node-1, node-2, node-3".
func chunkCopies(chunks []client.Chunk) string {
	low, high := -1, 0
	var nodes []string
	for _, c := range chunks {
		n := 0
		for _, r := range c.Replicas {
			if r.Status != client.CopyActive {
				continue
			}
			n++
			if !slices.Contains(nodes, r.NodeID) {
				nodes = append(nodes, r.NodeID)
			}
		}
		if low < 0 || n < low {
			low = n
		}
		high = max(high, n)
	}
	slices.Sort(nodes)
	copies := fmt.Sprintf("%d", high)
	if low != high {
		copies = fmt.Sprintf("%d–%d", low, high)
	}
	noun := "copies"
	if high == 1 {
		noun = "copy"
	}
	return fmt.Sprintf("%d chunks, %s %s each on %s", len(chunks), copies, noun, orNone(nodes))
}

func localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

const infoHelp = `usage: dfs info [flags] ID

Shows a file's metadata and every copy: the node holding it, its state and
whether it is the primary. A chunked file's copies are per chunk: they are
summarised, and only the chunks that are not ACTIVE are listed (-json
shows every chunk and copy).
`

func runInfo(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("info", infoHelp, s)
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	f, err := cc.c.Metadata(ctx, pos[0])
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(f)
		return exitOK
	}
	tw := tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", f.FileID)
	fmt.Fprintf(tw, "name\t%s\n", f.FileName)
	fmt.Fprintf(tw, "type\t%s\n", f.ContentType)
	fmt.Fprintf(tw, "size\t%d bytes (%s)\n", f.SizeBytes, humanBytes(f.SizeBytes))
	fmt.Fprintf(tw, "sha256\t%s\n", f.Checksum)
	fmt.Fprintf(tw, "status\t%s\n", f.Status)
	if f.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", f.Reason)
	}
	fmt.Fprintf(tw, "primary\t%s\n", f.PrimaryNode)
	fmt.Fprintf(tw, "copies wanted\t%d\n", f.ReplicationFactor)
	fmt.Fprintf(tw, "ring position\t%d\n", f.RingPosition)
	fmt.Fprintf(tw, "created\t%s\n", localTime(f.CreatedAt))
	fmt.Fprintf(tw, "updated\t%s\n", localTime(f.UpdatedAt))
	if len(f.Chunks) > 0 {
		fmt.Fprintf(tw, "copies\t%s\n", chunkCopies(f.Chunks))
		tw.Flush()
		printChunkTrouble(cc.s.out, f.Chunks)
		return exitOK
	}
	tw.Flush()
	fmt.Fprintln(cc.s.out)
	tw = tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCOPY\tPRIMARY\tUPDATED")
	for _, r := range f.Replicas {
		primary := ""
		if r.Primary {
			primary = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.NodeID, r.Status, primary, localTime(r.UpdatedAt))
	}
	tw.Flush()
	return exitOK
}

// printChunkTrouble lists the chunks of a file that are not ACTIVE, with
// the nodes holding their good copies: the ones an operator looks into.
func printChunkTrouble(w io.Writer, chunks []client.Chunk) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	for _, c := range chunks {
		if c.Status == client.FileActive {
			continue
		}
		if !header {
			fmt.Fprintln(tw)
			fmt.Fprintln(tw, "CHUNK\tSTATUS\tACTIVE COPIES ON\tREASON")
			header = true
		}
		var on []string
		for _, r := range c.Replicas {
			if r.Status == client.CopyActive {
				on = append(on, r.NodeID)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.Index, c.Status, orNone(on), c.Reason)
	}
	tw.Flush()
}

const rmHelp = `usage: dfs rm [flags] ID|BUCKET/KEY

Deletes a file: it is gone for every reader at once. Copies on storage nodes
that cannot be reached now are removed when those nodes return.
`

func runRm(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("rm", rmHelp, s)
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	if b, k, ok := splitName(pos[0], false); ok {
		if err := cc.c.DeleteObject(ctx, b, k); err != nil {
			return cc.fail(err)
		}
		fmt.Fprintf(cc.s.out, "deleted %s/%s\n", b, k)
		return exitOK
	}
	res, err := cc.c.Delete(ctx, pos[0])
	if err != nil {
		return cc.fail(err)
	}
	switch {
	case cc.json:
		cc.printJSON(res)
	case res.Complete:
		fmt.Fprintf(cc.s.out, "deleted %s\n", res.FileID)
	default:
		fmt.Fprintf(cc.s.out, "deleted %s; the copies on %s will be removed when those nodes return\n", res.FileID, orNone(res.PendingNodes))
	}
	return exitOK
}

const verifyHelp = `usage: dfs verify [flags] ID

Re-hashes every copy of a file on its node. Corrupt and missing copies are
rebuilt from a good one before the answer. The exit status is 1 when the
file is not ACTIVE afterwards (fewer good copies than it should have).
`

func runVerify(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("verify", verifyHelp, s)
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	res, err := cc.c.Verify(ctx, pos[0])
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(res)
	} else {
		fmt.Fprintf(cc.s.out, "%s  %s, %d good copies\n", res.FileID, res.Status, res.HealthyCopies)
		tw := tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tRESULT\tREBUILT\tCOPY\tERROR")
		for _, c := range res.Copies {
			rebuilt := ""
			if c.Rebuilt {
				rebuilt = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.NodeID, c.Result, rebuilt, c.Status, c.Error)
		}
		tw.Flush()
	}
	if res.Status != client.FileActive {
		fmt.Fprintf(cc.s.err, "dfs verify: %s is %s after verification\n  `dfs info %s` shows its copies; `dfs nodes` shows which nodes are down\n", res.FileID, res.Status, res.FileID)
		return exitFailed
	}
	return exitOK
}
