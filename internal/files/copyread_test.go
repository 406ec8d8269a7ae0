package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// testBlock is the block size the fake verifying nodes check by, as nodes
// do: the first damaged block of an answer ends it.
const testBlock = 64 << 10

// blockNodes are in-memory nodes that verify what they send by blocks, as
// storage nodes with block sums do: a damaged byte in the first block of an
// answer is an errs.Corrupt answer; one further on ends the answer short
// before its block; either way the blob is refused from then on.
type blockNodes struct {
	*gateNodes
	mu      sync.Mutex
	damaged map[string]int64 // "node/id" → the offset of a damaged byte
	refused map[string]bool  // "node/id" the node refuses since it found damage
	asked   []string         // "node bytes=a-b" of every Get, in order
	heads   int
}

func newBlockNodes(ids ...string) *blockNodes {
	return &blockNodes{gateNodes: newGateNodes(ids...), damaged: map[string]int64{}, refused: map[string]bool{}}
}

func (b *blockNodes) damage(node, id string, off int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.damaged[node+"/"+id] = off
}

func (b *blockNodes) Get(ctx context.Context, base, id string, rng *byterange.Range) (*nodeclient.Object, error) {
	obj, err := b.gateNodes.Get(ctx, base, id, rng)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	start, end := int64(0), obj.Info.Size
	if rng != nil {
		start, end = rng.Start, rng.Start+rng.Length
	}
	b.asked = append(b.asked, fmt.Sprintf("%s bytes=%d-%d", base, start, end-1))
	key := base + "/" + id
	if b.refused[key] {
		obj.Body.Close()
		return nil, errs.E(errs.Corrupt, "blob %s is corrupt", id)
	}
	obj.BlocksVerified = true
	off, bad := b.damaged[key]
	if !bad || off < start-start%testBlock || off >= end {
		return obj, nil
	}
	cut := off - off%testBlock // the damaged block starts here
	if cut <= start {
		obj.Body.Close()
		b.refused[key] = true
		return nil, errs.E(errs.Corrupt, "blob %s: block %d does not match its sum", id, off/testBlock)
	}
	obj.Body = &shortBody{rc: obj.Body, left: cut - start, onCut: func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.refused[key] = true
	}}
	return obj, nil
}

func (b *blockNodes) Head(ctx context.Context, base, id string) (wire.BlobInfo, error) {
	b.mu.Lock()
	b.heads++
	refused := b.refused[base+"/"+id]
	b.mu.Unlock()
	if refused {
		return wire.BlobInfo{}, errs.E(errs.Corrupt, "blob %s is corrupt", id)
	}
	return b.gateNodes.Head(ctx, base, id)
}

// shortBody yields left bytes of rc and then breaks off, as a node's answer
// does before a damaged block.
type shortBody struct {
	rc    io.ReadCloser
	left  int64
	onCut func()
}

func (s *shortBody) Read(p []byte) (int, error) {
	if s.left == 0 {
		if s.onCut != nil {
			s.onCut()
			s.onCut = nil
		}
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.rc.Read(p)
	s.left -= int64(n)
	return n, err
}

func (s *shortBody) Close() error { return s.rc.Close() }

// TestReadsGoOnFromTheNextCopy damages one or two of three copies at
// offsets in the first block, a middle block and the last block, and reads
// the file whole and in ranges: every read yields exactly the file's bytes,
// the copies that stopped are named among the sources, and the damaged
// copies are quarantined.
func TestReadsGoOnFromTheNextCopy(t *testing.T) {
	const size = 5*testBlock + 1234 // six blocks, the last partial
	data := randomBytes(t, size)
	offsets := map[string]int64{"first block": 10, "middle block": 3*testBlock + 77, "last block": size - 5}
	ranges := map[string]*byterange.Range{
		"whole":               nil,
		"inside one block":    {Start: 3*testBlock + 10, Length: 201},
		"across blocks":       {Start: testBlock - 100, Length: 3 * testBlock},
		"to the end":          {Start: 2 * testBlock, Length: size - 2*testBlock},
		"from the first byte": {Start: 0, Length: 4 * testBlock},
	}
	for oname, off := range offsets {
		for _, damagedCopies := range []int{1, 2} {
			for rname, rng := range ranges {
				t.Run(fmt.Sprintf("%s/%d damaged/%s", oname, damagedCopies, rname), func(t *testing.T) {
					ids := []string{"A", "B", "C"}
					nodes := newBlockNodes(ids...)
					ev := &mismatchEvents{found: map[string]int{}}
					s, st := newService(t, nodes.gateNodes, ids, func(o *Options) {
						o.Nodes, o.Events, o.MaxFileSize = nodes, ev, 1<<22
					})
					ctx := context.Background()
					res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
					require.NoError(t, err)
					holders := s.holders(mustGet(t, st, res.FileID))
					for _, n := range holders[:damagedCopies] {
						nodes.damage(n, res.FileID, off)
					}
					q := byterange.Request{}
					want := data
					if rng != nil {
						q.Range = fmt.Sprintf("bytes=%d-%d", rng.Start, rng.Start+rng.Length-1)
						want = data[rng.Start : rng.Start+rng.Length]
					}
					d, err := s.Open(ctx, res.FileID, q)
					require.NoError(t, err)
					got, err := io.ReadAll(d.Body)
					require.NoError(t, err)
					require.NoError(t, d.Body.Close())
					require.True(t, bytes.Equal(want, got), "the bytes read are the file's")
					touched := rng == nil || off >= rng.Start-rng.Start%testBlock && off < rng.Start+rng.Length
					if !touched {
						require.Equal(t, []string{holders[0]}, d.Sources())
						return
					}
					require.Contains(t, d.Sources(), holders[damagedCopies], "the intact copy served")
					run(t, s, func() bool {
						for _, n := range holders[:damagedCopies] {
							if ev.count(n) == 0 {
								return false
							}
						}
						return true
					})
					require.Zero(t, ev.count(holders[2]), "the intact copy is left alone")
				})
			}
		}
	}
}

// TestEveryCopyDamagedFailsTheRead: with every copy damaged past the first
// block, the read yields a prefix of the file's bytes and then an error:
// never a damaged byte, never a complete-looking read.
func TestEveryCopyDamagedFailsTheRead(t *testing.T) {
	const size = 4 * testBlock
	data := randomBytes(t, size)
	ids := []string{"A", "B", "C"}
	nodes := newBlockNodes(ids...)
	s, st := newService(t, nodes.gateNodes, ids, func(o *Options) { o.Nodes = nodes; o.MaxFileSize = 1 << 22 })
	ctx := context.Background()
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	holders := s.holders(mustGet(t, st, res.FileID))
	for i, n := range holders {
		nodes.damage(n, res.FileID, int64(i+1)*testBlock+5)
	}
	d, err := s.Open(ctx, res.FileID, byterange.Request{})
	require.NoError(t, err)
	got, err := io.ReadAll(d.Body)
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.NoError(t, d.Body.Close())
	require.Equal(t, 3*testBlock, len(got), "each copy went as far as its good blocks")
	require.True(t, bytes.Equal(data[:len(got)], got))
	require.Equal(t, holders, d.Sources())
}

// TestVerifiedChunksAreReadByRange: a range of a chunked file asks the
// nodes, which verify by blocks, for the bytes of the range alone.
func TestVerifiedChunksAreReadByRange(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newBlockNodes(ids...)
	const chunk = 256 << 10
	s, _ := newService(t, nodes.gateNodes, ids, func(o *Options) {
		o.Nodes = nodes
		o.MaxFileSize = 1 << 22
		o.ChunkSize = chunk
	})
	ctx := context.Background()
	data := randomBytes(t, 3*chunk+100)
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	nodes.mu.Lock()
	nodes.asked = nil
	nodes.mu.Unlock()

	d, err := s.Open(ctx, res.FileID, byterange.Request{Range: fmt.Sprintf("bytes=%d-%d", chunk+4096, chunk+8191)})
	require.NoError(t, err)
	got, err := io.ReadAll(d.Body)
	require.NoError(t, err)
	require.NoError(t, d.Body.Close())
	require.Equal(t, data[chunk+4096:chunk+8192], got)
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	require.Len(t, nodes.asked, 1)
	require.Regexp(t, ` bytes=4096-8191$`, nodes.asked[0], "only the 4 KiB asked is read from the chunk")
}

// TestRangeOfACopyWithoutBlockSumsIsChecked: a range of a copy that has no
// block sums (the memory nodes keep none) is read whole and checked against
// the file's SHA-256 first, so a damaged copy is passed over, not sent.
func TestRangeOfACopyWithoutBlockSumsIsChecked(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := newService(t, nodes, ids, nil)
	ctx := context.Background()
	data := randomBytes(t, 100<<10)
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	holders := s.holders(mustGet(t, st, res.FileID))
	require.True(t, nodes.stores[holders[0]].Corrupt(res.FileID)) // flips the byte at 50 KiB

	d, err := s.Open(ctx, res.FileID, byterange.Request{Range: "bytes=51000-51200"})
	require.NoError(t, err)
	got, err := io.ReadAll(d.Body)
	require.NoError(t, err)
	require.NoError(t, d.Body.Close())
	require.Equal(t, data[51000:51201], got)
	require.Equal(t, []string{holders[1]}, d.Sources())
	r, _ := mustGet(t, st, res.FileID).Replica(holders[0])
	require.Equal(t, meta.ReplicaFailed, r.Status, "quarantined before the first byte")
}

// mismatchEvents counts the corrupt copies found, by node.
type mismatchEvents struct {
	noEvents
	mu    sync.Mutex
	found map[string]int
}

func (e *mismatchEvents) ChecksumMismatch(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.found[node]++
}

func (e *mismatchEvents) count(node string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.found[node]
}

func mustGet(t *testing.T, st meta.Store, id string) meta.FileRecord {
	t.Helper()
	rec, err := st.GetFile(context.Background(), id)
	require.NoError(t, err)
	return rec
}

// run runs s's background work until cond holds.
func run(t *testing.T, s *Service, cond func() bool) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { stop(); <-done }()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond)
}
