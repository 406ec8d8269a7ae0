// Package blobtest is the conformance suite every blob.Store implementation
// passes, the way Perkeep's storagetest is run by each of its backends. An
// implementation's test calls Run with a function that opens a fresh, empty
// store and says how to corrupt a stored blob.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/errs"
)

// Subject is a store under test.
type Subject struct {
	Store blob.Store
	// Corrupt changes the stored bytes of id, leaving its recorded checksum
	// alone, as bit rot would.
	Corrupt func(t *testing.T, id string)
	// ChecksReads says Fetch checks what it reads and refuses a corrupt
	// blob (errs.Corrupt) instead of serving its stored bytes, as a
	// storage node's GET does; the stores themselves serve them as they are.
	ChecksReads bool
}

// Opener returns a fresh, empty store with the given options. The suite closes
// the store; the opener registers any other cleanup with t.
type Opener func(t *testing.T, opts blob.Options) Subject

// CorruptFile flips a byte in the middle of the file at path, or adds one to
// an empty file, as bit rot would: for an Opener whose store keeps each blob
// in a file of its own.
func CorruptFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if len(b) == 0 {
		b = []byte{0}
	} else {
		b[len(b)/2] ^= 0xff
	}
	require.NoError(t, os.WriteFile(path, b, 0o640))
}

// Checksum returns the lower-case hex SHA-256 of b.
func Checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RandomBytes returns n bytes from a generator seeded with seed.
func RandomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	_, _ = r.Read(b)
	return b
}

// Exclude names a subtest of the suite that Run does not run against a store,
// and why: a promise the implementation's medium cannot express (see the
// HTTP adapter's test in package remote). Every other subtest runs. An
// excluded subtest is named with its reason in the test log; it is not
// reported as skipped, because CI allows no skipped test and an exclusion is
// a decision about the store, not a missing service.
type Exclude struct {
	Test, Reason string
}

// Run runs the whole suite against the stores open returns, except the
// subtests exclude names; naming one the suite does not have is an error, so
// an exclusion cannot outlive its subtest unnoticed.
func Run(t *testing.T, open Opener, exclude ...Exclude) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"RoundTrip", testRoundTrip},
		{"ChecksumMismatchPublishesNothing", testChecksumMismatch},
		{"SameChecksumIsNoop", testSameChecksum},
		{"OtherChecksumConflicts", testConflict},
		{"CorruptCopyIsReplaced", testReplaceCorrupt},
		{"RemoveIsIdempotent", testRemove},
		{"AbsentIsNotFound", testNotFound},
		{"EnumerateOrderAndPaging", testEnumerate},
		{"UsageCounts", testUsage},
		{"InvalidIDs", testInvalidIDs},
		{"ValidIDs", testValidIDs},
		{"Checksums", testChecksums},
		{"DeclaredSizeIsEnforced", testDeclaredSize},
		{"BrokenBodyPublishesNothing", testBrokenBody},
		{"CancelledReceivePublishesNothing", testCancelled},
		{"ConcurrentWritesOfOneID", testConcurrentSameID},
		{"ConcurrentWritesOfManyIDs", testConcurrentManyIDs},
		{"RehashDetectsCorruption", testRehash},
		{"CapacityLimit", testCapacity},
		{"FullStoreConfirmsWithoutReading", testFullStoreConfirms},
		{"Closed", testClosed},
		{"Identity", testIdentity},
	}
	reasons := make(map[string]string, len(exclude))
	for _, ex := range exclude {
		reasons[ex.Test] = ex.Reason
	}
	for _, tc := range tests {
		if reason, excluded := reasons[tc.name]; excluded {
			delete(reasons, tc.name)
			t.Logf("blobtest: %s is not run against this store: %s", tc.name, reason)
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
	for name := range reasons {
		t.Errorf("blobtest: no subtest %q to exclude", name)
	}
}

func openStore(t *testing.T, open Opener, opts blob.Options) Subject {
	t.Helper()
	s := open(t, opts)
	t.Cleanup(func() { _ = s.Store.Close() })
	return s
}

func newID() string { return uuid.NewString() }

// put stores data under id and requires that it was created.
func put(t *testing.T, s blob.Store, id string, data []byte) blob.Info {
	t.Helper()
	info, created, err := s.Receive(context.Background(), id, Checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created, "a new blob is created")
	require.Equal(t, blob.Info{ID: id, Size: int64(len(data)), Checksum: Checksum(data)}, info)
	return info
}

func fetchAll(t *testing.T, s blob.Store, id string) ([]byte, blob.Info) {
	t.Helper()
	rc, info, err := s.Fetch(context.Background(), id)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b, info
}

func requireKind(t *testing.T, want errs.Kind, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, errs.KindOf(err), "error %q", err)
}

// requireAbsent checks that id is held nowhere in the store's views.
func requireAbsent(t *testing.T, s blob.Store, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Stat(ctx, id)
	requireKind(t, errs.NotFound, err)
	_, _, err = s.Fetch(ctx, id)
	requireKind(t, errs.NotFound, err)
	_, err = s.Rehash(ctx, id)
	requireKind(t, errs.NotFound, err)
	list, err := s.Enumerate(ctx, "", 1000)
	require.NoError(t, err)
	for _, info := range list {
		require.NotEqual(t, id, info.ID)
	}
}

func requireUsage(t *testing.T, s blob.Store, blobs, bytes int64) {
	t.Helper()
	u, err := s.Usage(context.Background())
	require.NoError(t, err)
	require.Equal(t, blobs, u.Blobs, "blob count")
	require.Equal(t, bytes, u.BytesUsed, "bytes used")
}

// testIdentity: a store names its medium with a canonical UUID that does not
// change while it runs, and two fresh stores are two media.
func testIdentity(t *testing.T, open Opener) {
	a := openStore(t, open, blob.Options{}).Store
	id := a.Identity()
	u, err := uuid.Parse(id)
	require.NoError(t, err)
	require.Equal(t, u.String(), id)
	put(t, a, newID(), []byte("x"))
	require.Equal(t, id, a.Identity())
	b := openStore(t, open, blob.Options{}).Store
	require.NotEqual(t, id, b.Identity())
}

func testRoundTrip(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	for _, size := range []int{0, 1, 1000, 600 << 10} { // the last spans several copy buffers
		data := RandomBytes(uint64(size), size)
		id := newID()
		put(t, s, id, data)

		info, err := s.Stat(ctx, id)
		require.NoError(t, err)
		require.Equal(t, blob.Info{ID: id, Size: int64(size), Checksum: Checksum(data)}, info)

		got, finfo := fetchAll(t, s, id)
		require.Equal(t, info, finfo)
		require.True(t, bytes.Equal(data, got), "fetched bytes equal written bytes (size %d)", size)

		if size > 10 {
			rc, _, err := s.Fetch(ctx, id)
			require.NoError(t, err)
			off, err := rc.Seek(int64(size/2), io.SeekStart)
			require.NoError(t, err)
			require.Equal(t, int64(size/2), off)
			rest, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			require.Equal(t, data[size/2:], rest)
		}

		c, err := s.Rehash(ctx, id)
		require.NoError(t, err)
		require.True(t, c.Intact())
		require.Equal(t, blob.Check{ID: id, Size: int64(size), Stored: Checksum(data), Actual: Checksum(data)}, c)
	}
	// A size the sender does not declare works too.
	data := RandomBytes(7, 5000)
	id := newID()
	info, created, err := s.Receive(ctx, id, Checksum(data), -1, bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, int64(5000), info.Size)
}

func testChecksumMismatch(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	data := RandomBytes(1, 4096)
	id := newID()
	for _, size := range []int64{int64(len(data)), -1} {
		_, _, err := s.Receive(ctx, id, Checksum([]byte("something else")), size, bytes.NewReader(data))
		requireKind(t, errs.Corrupt, err)
		requireAbsent(t, s, id)
		requireUsage(t, s, 0, 0)
	}
	put(t, s, id, data)
}

// untouchable fails the test if it is read: a no-op write must not consume
// the body.
type untouchable struct{ t *testing.T }

func (u untouchable) Read([]byte) (int, error) {
	u.t.Error("the body of a write that changes nothing was read")
	return 0, io.ErrUnexpectedEOF
}

func testSameChecksum(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	data := RandomBytes(2, 3000)
	id := newID()
	first := put(t, s, id, data)
	info, created, err := s.Receive(ctx, id, strings.ToUpper(Checksum(data)), int64(len(data)), untouchable{t})
	require.NoError(t, err)
	require.False(t, created, "an intact copy with the same checksum is not rewritten")
	require.Equal(t, first, info)
	requireUsage(t, s, 1, int64(len(data)))
}

func testConflict(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	a, b := RandomBytes(3, 100), RandomBytes(4, 200)
	id := newID()
	put(t, s, id, a)
	_, _, err := s.Receive(ctx, id, Checksum(b), int64(len(b)), bytes.NewReader(b))
	requireKind(t, errs.Conflict, err)
	got, info := fetchAll(t, s, id)
	require.Equal(t, a, got, "a conflicting write leaves the blob alone")
	require.Equal(t, Checksum(a), info.Checksum)
	requireUsage(t, s, 1, 100)
}

func testReplaceCorrupt(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		next []byte
	}{
		{"same checksum", RandomBytes(5, 700)},
		{"other checksum", RandomBytes(6, 900)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := openStore(t, open, blob.Options{})
			s := sub.Store
			ctx := context.Background()
			orig := RandomBytes(5, 700)
			id := newID()
			put(t, s, id, orig)
			sub.Corrupt(t, id)
			c, err := s.Rehash(ctx, id)
			require.NoError(t, err)
			require.False(t, c.Intact(), "corruption is visible before the rewrite")

			info, created, err := s.Receive(ctx, id, Checksum(tc.next), int64(len(tc.next)), bytes.NewReader(tc.next))
			require.NoError(t, err)
			require.True(t, created, "a corrupt copy is replaced")
			require.Equal(t, blob.Info{ID: id, Size: int64(len(tc.next)), Checksum: Checksum(tc.next)}, info)
			c, err = s.Rehash(ctx, id)
			require.NoError(t, err)
			require.True(t, c.Intact())
			got, _ := fetchAll(t, s, id)
			require.Equal(t, tc.next, got)
			requireUsage(t, s, 1, int64(len(tc.next)))
		})
	}
}

func testRemove(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	id := newID()
	require.NoError(t, s.Remove(ctx, id), "removing an absent blob is not an error")
	data := RandomBytes(8, 1234)
	put(t, s, id, data)
	other := newID()
	put(t, s, other, data)
	require.NoError(t, s.Remove(ctx, id))
	requireAbsent(t, s, id)
	require.NoError(t, s.Remove(ctx, id), "removing twice is not an error")
	requireUsage(t, s, 1, 1234)
	_, err := s.Stat(ctx, other)
	require.NoError(t, err, "removal touches only its own id")
	put(t, s, id, data)
}

func testNotFound(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	requireAbsent(t, s, newID())
	put(t, s, newID(), []byte("a neighbour"))
	requireAbsent(t, s, newID())
}

func testEnumerate(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	// Ids that share shards, straddle shard boundaries and use every
	// character class, so id order and directory order must agree.
	ids := []string{"abcd", "abcd-1", "abcd_1", "abcd0", "abce", "abcz", "ab-0", "ab_0", "a0zz", "0000", "zzzz", "zz-z"}
	for i := range 13 {
		u := newID()
		ids = append(ids, u, u+"-c00000"+string(rune('0'+i%10)))
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i, id := range ids {
		put(t, s, id, RandomBytes(uint64(i), i))
	}

	var got []string
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 100, "paging terminates")
		list, err := s.Enumerate(ctx, after, 4)
		require.NoError(t, err)
		require.LessOrEqual(t, len(list), 4)
		if len(list) == 0 {
			break
		}
		for _, info := range list {
			got = append(got, info.ID)
			st, err := s.Stat(ctx, info.ID)
			require.NoError(t, err)
			require.Equal(t, st, info, "a listed blob carries its size and checksum")
		}
		after = list[len(list)-1].ID
	}
	require.Equal(t, want, got, "enumerate yields every id once, in order")

	// Cursors need not be stored ids, nor complete ones.
	for _, after := range []string{"", "0", "abc", "abcd", "abcd-", "abcd_1", "ab", "b", "zz", "zzzz", "zzzzz"} {
		var expect []string
		for _, id := range want {
			if id > after && len(expect) < 3 {
				expect = append(expect, id)
			}
		}
		list, err := s.Enumerate(ctx, after, 3)
		require.NoError(t, err)
		var ids []string
		for _, info := range list {
			ids = append(ids, info.ID)
		}
		require.Equal(t, expect, ids, "after %q", after)
	}

	for _, bad := range []struct {
		after string
		limit int
	}{{"", 0}, {"", -1}, {"../x", 10}, {"a/b", 10}, {"ABCD", 10}, {strings.Repeat("a", 129), 10}} {
		_, err := s.Enumerate(ctx, bad.after, bad.limit)
		requireKind(t, errs.Invalid, err)
	}
}

func testUsage(t *testing.T, open Opener) {
	sub := openStore(t, open, blob.Options{})
	s := sub.Store
	ctx := context.Background()
	requireUsage(t, s, 0, 0)
	a, b, c := newID(), newID(), newID()
	put(t, s, a, RandomBytes(1, 100))
	put(t, s, b, RandomBytes(2, 200))
	put(t, s, c, RandomBytes(3, 300))
	requireUsage(t, s, 3, 600)
	require.NoError(t, s.Remove(ctx, b))
	requireUsage(t, s, 2, 400)
	sub.Corrupt(t, c)
	bigger := RandomBytes(4, 1000)
	_, created, err := s.Receive(ctx, c, Checksum(bigger), -1, bytes.NewReader(bigger))
	require.NoError(t, err)
	require.True(t, created)
	requireUsage(t, s, 2, 1100)
	_, _, err = s.Receive(ctx, newID(), Checksum(bigger), -1, bytes.NewReader(bigger[1:]))
	requireKind(t, errs.Corrupt, err)
	requireUsage(t, s, 2, 1100)
}

// BadIDs are ids every store must reject before touching its storage.
var BadIDs = []string{
	"", "abc", strings.Repeat("a", blob.MaxIDLen+1),
	"../x", "..", "../../etc/passwd", "..%2f", "..%2F..%2Fetc", "%2e%2e", "a/b", "abcd/efgh", "ab\\cd", "/abcd",
	"ABCD", "abcD", "Abcd1234", "abc\x00def", "abcd\x00", "abcd.sha256", ".tmp-abcd", ".abcd", "abcd.",
	"-abcd", "_abcd", "abcd efgh", "abcd\n", "abcdé", "abcd~", "abcd:1", "abcd*",
}

func testInvalidIDs(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	data := []byte("data")
	for _, id := range BadIDs {
		_, _, err := s.Receive(ctx, id, Checksum(data), int64(len(data)), bytes.NewReader(data))
		requireKind(t, errs.Invalid, err)
		_, err = s.Stat(ctx, id)
		requireKind(t, errs.Invalid, err)
		_, _, err = s.Fetch(ctx, id)
		requireKind(t, errs.Invalid, err)
		requireKind(t, errs.Invalid, s.Remove(ctx, id))
		_, err = s.Rehash(ctx, id)
		requireKind(t, errs.Invalid, err)
		requireKind(t, errs.Invalid, blob.ValidateID(id))
	}
	requireUsage(t, s, 0, 0)
}

func testValidIDs(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	u := newID()
	for _, id := range []string{"abcd", "0000", u, u + "-c000001", "a_b-c", strings.Repeat("z", blob.MaxIDLen)} {
		require.NoError(t, blob.ValidateID(id))
		put(t, s, id, []byte(id))
		got, _ := fetchAll(t, s, id)
		require.Equal(t, id, string(got))
	}
}

func testChecksums(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	data := []byte("payload")
	sum := Checksum(data)
	id := newID()
	for _, bad := range []string{"", "abc", sum[:63], sum + "0", strings.Repeat("g", 64), " " + sum[1:], sum[:60] + "../x"} {
		_, _, err := s.Receive(ctx, id, bad, int64(len(data)), bytes.NewReader(data))
		requireKind(t, errs.Invalid, err)
	}
	requireAbsent(t, s, id)
	info, created, err := s.Receive(ctx, id, strings.ToUpper(sum), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, sum, info.Checksum, "checksums are kept in lower case")
	st, err := s.Stat(ctx, id)
	require.NoError(t, err)
	require.Equal(t, sum, st.Checksum)
}

func testDeclaredSize(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	data := RandomBytes(9, 1000)
	id := newID()
	for _, size := range []int64{999, 1001, 0} {
		_, _, err := s.Receive(ctx, id, Checksum(data), size, bytes.NewReader(data))
		requireKind(t, errs.Invalid, err)
		requireAbsent(t, s, id)
	}
	requireUsage(t, s, 0, 0)
}

// brokenReader yields n bytes and then fails, like a body whose sender went away.
type brokenReader struct {
	data []byte
	err  error
}

func (b *brokenReader) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func testBrokenBody(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	ctx := context.Background()
	data := RandomBytes(10, 700<<10)
	id := newID()
	cause := errors.New("connection reset")
	for _, size := range []int64{int64(len(data)), -1} {
		_, _, err := s.Receive(ctx, id, Checksum(data), size, &brokenReader{data: data[:400<<10], err: cause})
		require.ErrorIs(t, err, cause)
		requireAbsent(t, s, id)
		requireUsage(t, s, 0, 0)
	}
	put(t, s, id, data)
}

// cancellingReader cancels its context after the first read.
// cancellingReader is a body whose writer gives up after its first read:
// it cancels the write's context and sends nothing more. (A body that went
// on after the cancel would race the cancel over HTTP: sent whole before
// the client's transport noticed, it is a complete write as far as the node
// can tell.)
type cancellingReader struct {
	r      io.Reader
	cancel context.CancelFunc
	done   bool
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	if c.done {
		return 0, context.Canceled
	}
	n, err := c.r.Read(p)
	c.cancel()
	c.done = true
	return n, err
}

func testCancelled(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	data := RandomBytes(11, 600<<10)
	id := newID()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.Receive(ctx, id, Checksum(data), int64(len(data)), bytes.NewReader(data))
	require.ErrorIs(t, err, context.Canceled)
	requireAbsent(t, s, id)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	_, _, err = s.Receive(ctx, id, Checksum(data), int64(len(data)), &cancellingReader{r: bytes.NewReader(data), cancel: cancel})
	require.ErrorIs(t, err, context.Canceled)
	requireAbsent(t, s, id)
	requireUsage(t, s, 0, 0)
}

func testConcurrentSameID(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	data := RandomBytes(12, 300<<10)
	id := newID()
	const writers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		infos   []blob.Info
	)
	for range writers {
		wg.Go(func() {
			info, c, err := s.Receive(context.Background(), id, Checksum(data), int64(len(data)), bytes.NewReader(data))
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			infos = append(infos, info)
			if c {
				created++
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, created, "exactly one concurrent writer publishes")
	for _, info := range infos {
		require.Equal(t, blob.Info{ID: id, Size: int64(len(data)), Checksum: Checksum(data)}, info)
	}
	got, _ := fetchAll(t, s, id)
	require.True(t, bytes.Equal(data, got))
	requireUsage(t, s, 1, int64(len(data)))
}

func testConcurrentManyIDs(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{}).Store
	const writers = 16
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			data := RandomBytes(uint64(i), 1000+i)
			id := newID()
			_, created, err := s.Receive(context.Background(), id, Checksum(data), -1, bytes.NewReader(data))
			assert.NoError(t, err)
			assert.True(t, created)
			if i%2 == 0 {
				assert.NoError(t, s.Remove(context.Background(), id))
			}
		})
	}
	wg.Wait()
	var want int64
	for i := 1; i < writers; i += 2 {
		want += int64(1000 + i)
	}
	requireUsage(t, s, writers/2, want)
}

func testRehash(t *testing.T, open Opener) {
	sub := openStore(t, open, blob.Options{})
	s := sub.Store
	ctx := context.Background()
	data := RandomBytes(13, 5000)
	id := newID()
	put(t, s, id, data)
	sub.Corrupt(t, id)

	c, err := s.Rehash(ctx, id)
	require.NoError(t, err)
	require.False(t, c.Intact())
	require.Equal(t, Checksum(data), c.Stored)
	require.NotEqual(t, Checksum(data), c.Actual)

	st, err := s.Stat(ctx, id)
	require.NoError(t, err)
	require.Equal(t, Checksum(data), st.Checksum, "Stat reports the recorded checksum")
	if sub.ChecksReads {
		_, _, err := s.Fetch(ctx, id)
		requireKind(t, errs.Corrupt, err)
	} else {
		got, info := fetchAll(t, s, id)
		require.Equal(t, Checksum(data), info.Checksum)
		require.Equal(t, c.Actual, Checksum(got), "Fetch serves the stored bytes as they are")
	}

	_, _, err = s.Receive(ctx, id, Checksum(RandomBytes(14, 10)), -1, bytes.NewReader(RandomBytes(14, 10)))
	require.NoError(t, err, "a corrupt copy does not block a write with another checksum")
}

func testCapacity(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{CapacityBytes: 1000}).Store
	ctx := context.Background()
	first := RandomBytes(15, 600)
	a := newID()
	put(t, s, a, first)
	u, err := s.Usage(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1000), u.CapacityBytes)
	require.LessOrEqual(t, u.FreeBytes, int64(400))

	second := RandomBytes(16, 600)
	b := newID()
	for _, size := range []int64{600, -1} {
		_, _, err := s.Receive(ctx, b, Checksum(second), size, bytes.NewReader(second))
		requireKind(t, errs.NoSpace, err)
		requireAbsent(t, s, b)
		requireUsage(t, s, 1, 600)
	}

	got, _ := fetchAll(t, s, a)
	require.Equal(t, first, got, "a full store still serves reads")

	fits := RandomBytes(17, 400)
	put(t, s, newID(), fits)
	require.NoError(t, s.Remove(ctx, a))
	put(t, s, b, second)
}

// testFullStoreConfirms: a store too full for another copy still confirms,
// without reading the body, a write of a blob it holds.
func testFullStoreConfirms(t *testing.T, open Opener) {
	s := openStore(t, open, blob.Options{CapacityBytes: 1000}).Store
	ctx := context.Background()
	first := RandomBytes(15, 600)
	a := newID()
	put(t, s, a, first)
	second := RandomBytes(16, 600)
	_, _, err := s.Receive(ctx, newID(), Checksum(second), 600, bytes.NewReader(second))
	requireKind(t, errs.NoSpace, err)

	_, created, err := s.Receive(ctx, a, Checksum(first), 600, untouchable{t})
	require.NoError(t, err, "a full store still confirms a blob it holds")
	require.False(t, created)
}

func testClosed(t *testing.T, open Opener) {
	s := open(t, blob.Options{}).Store
	ctx := context.Background()
	id := newID()
	put(t, s, id, []byte("before close"))
	require.NoError(t, s.Check(ctx))
	require.NoError(t, s.Close())
	requireKind(t, errs.Unavailable, s.Check(ctx))
	_, _, err := s.Receive(ctx, newID(), Checksum(nil), 0, bytes.NewReader(nil))
	requireKind(t, errs.Unavailable, err)
	_, err = s.Stat(ctx, id)
	requireKind(t, errs.Unavailable, err)
	_, _, err = s.Fetch(ctx, id)
	requireKind(t, errs.Unavailable, err)
	requireKind(t, errs.Unavailable, s.Remove(ctx, id))
	_, err = s.Enumerate(ctx, "", 10)
	requireKind(t, errs.Unavailable, err)
}
