package localcache

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metatest"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/ring"
)

// cachedNamespace is the embedded store as the coordinator wires it: file
// writes through WatchFiles and the record cache, the namespace through
// Objects.
type cachedNamespace struct {
	meta.Store
	*Objects
}

// openObjects returns the embedded store behind an object cache; wrap, when
// set, stands between the cache and the store's namespace.
func openObjects(t *testing.T, wrap func(meta.Namespace) meta.Namespace) cachedNamespace {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var ns meta.Namespace = st
	if wrap != nil {
		ns = wrap(ns)
	}
	objs := NewObjects(ns, 100)
	return cachedNamespace{Store: objs.WatchFiles(New(st, Options{Entries: 100})), Objects: objs}
}

// The cached namespace meets the whole namespace specification.
func TestObjectsConformance(t *testing.T) {
	metatest.RunNamespace(t, func(t *testing.T) metatest.NamespaceStore {
		s := openObjects(t, nil)
		return s
	})
}

// countingNamespace counts the object reads that reach the store.
type countingNamespace struct {
	meta.Namespace
	reads atomic.Int64
}

func (c *countingNamespace) GetObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	c.reads.Add(1)
	return c.Namespace.GetObject(ctx, bucket, key)
}

func putKey(t *testing.T, s cachedNamespace, bucket, key, etag string) meta.Object {
	t.Helper()
	addNodeOnce(t, s)
	o := meta.Object{Bucket: bucket, Key: key, FileID: newActiveFile(t, s, "n1").ID, SizeBytes: 1, ETag: etag,
		ContentType: "text/plain", Headers: map[string]string{"x-amz-meta-v": etag}}
	replaced, err := s.PutObject(context.Background(), &o)
	require.NoError(t, err)
	if replaced != "" {
		require.NoError(t, s.DeleteFile(context.Background(), replaced))
	}
	return o
}

func addNodeOnce(t *testing.T, s meta.Store) {
	if _, err := s.GetNode(context.Background(), "n1"); errs.Is(err, errs.NotFound) {
		addNode(t, s, "n1")
	}
}

// openCounted is openObjects with the object reads that reach the store
// counted, and bucket "b" created.
func openCounted(t *testing.T) (cachedNamespace, *countingNamespace) {
	t.Helper()
	counter := &countingNamespace{}
	s := openObjects(t, func(ns meta.Namespace) meta.Namespace { counter.Namespace = ns; return counter })
	require.NoError(t, s.CreateBucket(context.Background(), &meta.Bucket{Name: "b", Owner: "AKIA1"}))
	return s, counter
}

func TestObjectsRepeatedReadsAreServedFromMemory(t *testing.T) {
	ctx := context.Background()
	s, counter := openCounted(t)
	put := putKey(t, s, "b", "k", "one")

	first, err := s.GetObject(ctx, "b", "k")
	require.NoError(t, err)
	first.Headers["x-amz-meta-v"] = "scribbled" // a caller's change stays the caller's
	second, err := s.GetObject(ctx, "b", "k")
	require.NoError(t, err)
	require.Equal(t, put.FileID, second.FileID)
	require.Equal(t, "one", second.Headers["x-amz-meta-v"])
	require.EqualValues(t, 1, counter.reads.Load(), "the second read is the cache's")
	require.Equal(t, 1, s.Len())

	_, err = s.GetObject(ctx, "b", "absent")
	requireNotFound(t, err)
	_, err = s.GetObject(ctx, "b", "absent")
	requireNotFound(t, err)
	require.EqualValues(t, 3, counter.reads.Load(), "an absent key is not kept")
}

func requireNotFound(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errs.Is(err, errs.NotFound), "want NotFound, got %v", err)
}

// change is a write that moves key k of bucket b away from the row put
// holds; after it, a read must find want (its FileID), or NotFound when
// want is "".
type change struct {
	name  string
	write func(t *testing.T, s cachedNamespace, put meta.Object) (want string)
}

var changes = []change{
	{"overwritten key", func(t *testing.T, s cachedNamespace, _ meta.Object) string {
		return putKey(t, s, "b", "k", "two").FileID
	}},
	{"key moved by an upload's final write", func(t *testing.T, s cachedNamespace, _ meta.Object) string {
		ctx := context.Background()
		rec := newActiveFile(t, s, "n1")
		rec.StatusReason = "committed with its key"
		_, err := s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, SizeBytes: 1, ETag: "three"})
		require.NoError(t, err)
		return rec.ID
	}},
	{"key moved by an upload's first and only write", func(t *testing.T, s cachedNamespace, _ meta.Object) string {
		ctx := context.Background()
		id := uuid.NewString()
		rec := &meta.FileRecord{File: meta.File{
			ID: id, Name: "f", ContentType: "application/octet-stream", SizeBytes: 1,
			Checksum: "0000000000000000000000000000000000000000000000000000000000000000",
			Status:   meta.FileActive, PrimaryNodeID: "n1", ReplicationFactor: 1, RingPosition: ring.Position(id),
		}, Replicas: []meta.Replica{{FileID: id, NodeID: "n1", Status: meta.ReplicaActive}}}
		_, err := s.CreateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, SizeBytes: 1, ETag: "four"})
		require.NoError(t, err)
		got, err := s.GetFile(ctx, rec.ID)
		require.NoError(t, err)
		require.Equal(t, *rec, got, "the file's record reads back as created")
		return rec.ID
	}},
	{"deleted key", func(t *testing.T, s cachedNamespace, _ meta.Object) string {
		_, err := s.DeleteObject(context.Background(), "b", "k")
		require.NoError(t, err)
		return ""
	}},
	{"file deleted through the file path", func(t *testing.T, s cachedNamespace, put meta.Object) string {
		require.NoError(t, s.DeleteFile(context.Background(), put.FileID))
		return ""
	}},
	{"deleted bucket", func(t *testing.T, s cachedNamespace, _ meta.Object) string {
		ctx := context.Background()
		_, err := s.DeleteObject(ctx, "b", "k")
		require.NoError(t, err)
		require.NoError(t, s.DeleteBucket(ctx, "b"))
		require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "b", Owner: "AKIA2"}))
		return ""
	}},
}

func requireRow(t *testing.T, s cachedNamespace, want string) {
	t.Helper()
	got, err := s.GetObject(context.Background(), "b", "k")
	if want == "" {
		requireNotFound(t, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, want, got.FileID)
}

// A row held in memory is never served after a write changed or removed it.
func TestObjectsNeverServeAChangedRow(t *testing.T) {
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openObjects(t, nil)
			require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "b", Owner: "AKIA1"}))
			put := putKey(t, s, "b", "k", "one")
			requireRow(t, s, put.FileID)
			require.Equal(t, 1, s.Len(), "the row is held before the write")

			want := c.write(t, s, put)
			requireRow(t, s, want)
			requireRow(t, s, want) // and again, now perhaps from memory
		})
	}
}

// Two keys may name one file: its delete drops both rows held, and a row
// naming another file stays.
func TestObjectsAFileDeleteDropsEveryKeyNamingIt(t *testing.T) {
	ctx := context.Background()
	s, counter := openCounted(t)
	put := putKey(t, s, "b", "k", "one")
	twin := put
	twin.Key = "k2"
	_, err := s.PutObject(ctx, &twin)
	require.NoError(t, err)
	other := putKey(t, s, "b", "other", "two")
	for _, k := range []string{"k", "k2", "other"} {
		_, err := s.GetObject(ctx, "b", k)
		require.NoError(t, err)
	}
	require.Equal(t, 3, s.Len())

	require.NoError(t, s.DeleteFile(ctx, put.FileID))
	require.Equal(t, 1, s.Len(), "both rows naming the file are dropped")
	reads := counter.reads.Load()
	for _, k := range []string{"k", "k2"} {
		_, err := s.GetObject(ctx, "b", k)
		requireNotFound(t, err)
	}
	got, err := s.GetObject(ctx, "b", "other")
	require.NoError(t, err)
	require.Equal(t, other.FileID, got.FileID)
	require.EqualValues(t, reads+2, counter.reads.Load(), "the row naming another file is still held")
}

// gatedNamespace holds one GetObject between its read of the store and its
// return, until the test lets it go: a read that overlaps a write, in a
// known order.
type gatedNamespace struct {
	meta.Namespace
	once      sync.Once
	read, let chan struct{}
}

func (g *gatedNamespace) GetObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	o, err := g.Namespace.GetObject(ctx, bucket, key)
	g.once.Do(func() {
		g.read <- struct{}{}
		<-g.let
	})
	return o, err
}

// A read that got the row before a write and returns after it does not leave
// what it read in memory.
func TestObjectsAReadOverlappingAWriteIsNotKept(t *testing.T) {
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			gate := &gatedNamespace{read: make(chan struct{}), let: make(chan struct{})}
			s := openObjects(t, func(ns meta.Namespace) meta.Namespace { gate.Namespace = ns; return gate })
			require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "b", Owner: "AKIA1"}))
			put := putKey(t, s, "b", "k", "one")

			stale := make(chan meta.Object)
			go func() {
				o, _ := s.GetObject(ctx, "b", "k")
				stale <- o
			}()
			<-gate.read // the reader has the old row
			want := c.write(t, s, put)
			close(gate.let)
			require.Equal(t, put.FileID, (<-stale).FileID, "the overlapping read returns what it read")
			require.Zero(t, s.Len(), "but does not keep it")
			requireRow(t, s, want)
		})
	}
}

// Readers racing a writer that overwrites one key (and deletes the files it
// replaces, as the objects service does) never see a version older than the
// last write finished before their read began. Run with -race.
func TestObjectsConcurrentReadsSeeEveryFinishedWrite(t *testing.T) {
	ctx := context.Background()
	s := openObjects(t, nil)
	require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "b", Owner: "AKIA1"}))
	const versions = 60
	var version sync.Map // file id → version
	var finished atomic.Int64
	first := putKey(t, s, "b", "k", "v0")
	version.Store(first.FileID, int64(0))

	stop := make(chan struct{})
	var readers sync.WaitGroup
	failures := make(chan string, 4)
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := finished.Load()
				o, err := s.GetObject(ctx, "b", "k")
				if err != nil {
					failures <- err.Error()
					return
				}
				v, ok := version.Load(o.FileID)
				if !ok || v.(int64) < floor {
					failures <- fmt.Sprintf("read version %v (known %v) after version %d finished", v, ok, floor)
					return
				}
			}
		}()
	}
	addNodeOnce(t, s)
	for v := int64(1); v <= versions; v++ {
		o := meta.Object{Bucket: "b", Key: "k", FileID: newActiveFile(t, s, "n1").ID, SizeBytes: 1, ETag: "e"}
		version.Store(o.FileID, v)
		replaced, err := s.PutObject(ctx, &o)
		require.NoError(t, err)
		finished.Store(v)
		require.NoError(t, s.DeleteFile(ctx, replaced))
	}
	close(stop)
	readers.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	requireRow(t, s, mustLast(t, &version, versions))
}

func mustLast(t *testing.T, versions *sync.Map, last int64) string {
	var id string
	versions.Range(func(k, v any) bool {
		if v.(int64) == last {
			id = k.(string)
		}
		return true
	})
	require.NotEmpty(t, id)
	return id
}
