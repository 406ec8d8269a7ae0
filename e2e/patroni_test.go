//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/testenv/patronitest"
)

// loadCall is one request of the failover load and how it ended.
type loadCall struct {
	upload     bool
	start, end time.Time
	err        error
}

// failoverLoad runs uploads and downloads against the coordinator, each
// request bounded by its own timeout, until stopped.
type failoverLoad struct {
	api  *client.Client
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	calls []loadCall
	acked []stored // uploads the coordinator acknowledged
}

// failoverCallTimeout bounds one request of the load: a request that has not
// answered by then hangs, which the test refuses.
const failoverCallTimeout = 10 * time.Second

func startFailoverLoad(t *testing.T, url string, transport http.RoundTripper, uploaders, downloaders int) *failoverLoad {
	api, err := client.New(url, client.Options{HTTPClient: &http.Client{Transport: transport}})
	require.NoError(t, err)
	l := &failoverLoad{api: api, stop: make(chan struct{})}
	for w := range uploaders {
		l.wg.Go(func() {
			l.run(func(ctx context.Context, i int) error { return l.upload(ctx, fmt.Sprintf("w%d-%d.bin", w, i)) }, true)
		})
	}
	for range downloaders {
		l.wg.Go(func() { l.run(l.download, false) })
	}
	return l
}

// errNothingToRead is a download's answer before any upload was
// acknowledged: no request was sent, and none is counted.
var errNothingToRead = errors.New("no acknowledged upload to read yet")

func (l *failoverLoad) run(call func(context.Context, int) error, upload bool) {
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), failoverCallTimeout)
		start := time.Now()
		err := call(ctx, i)
		end := time.Now()
		cancel()
		if errors.Is(err, errNothingToRead) {
			continue
		}
		l.mu.Lock()
		l.calls = append(l.calls, loadCall{upload: upload, start: start, end: end, err: err})
		l.mu.Unlock()
	}
}

func (l *failoverLoad) upload(ctx context.Context, name string) error {
	data := randomBytes(4<<10 + rand.IntN(4<<10))
	res, err := l.api.Upload(ctx, name, bytes.NewReader(data), int64(len(data)), client.UploadOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.acked = append(l.acked, stored{name: name, data: data, res: res})
	l.mu.Unlock()
	return nil
}

func (l *failoverLoad) download(ctx context.Context, _ int) error {
	l.mu.Lock()
	if len(l.acked) == 0 {
		l.mu.Unlock()
		return errNothingToRead
	}
	f := l.acked[rand.IntN(len(l.acked))]
	l.mu.Unlock()
	var buf bytes.Buffer
	if _, err := l.api.Download(ctx, f.res.FileID, &buf, client.DownloadOptions{}); err != nil {
		return err
	}
	if !bytes.Equal(buf.Bytes(), f.data) {
		return fmt.Errorf("download of %s: %d bytes differ from the %d uploaded", f.res.FileID, buf.Len(), len(f.data))
	}
	return nil
}

// good counts the requests that succeeded and ended after since.
func (l *failoverLoad) good(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if c.err == nil && c.end.After(since) {
			n++
		}
	}
	return n
}

// finish stops the load and returns every request, in the order they ended.
func (l *failoverLoad) finish() ([]loadCall, []stored) {
	close(l.stop)
	l.wg.Wait()
	calls := slices.Clone(l.calls)
	slices.SortFunc(calls, func(a, b loadCall) int { return a.end.Compare(b.end) })
	return calls, l.acked
}

// TestPatroniFailoverUnderLoad runs the metadata on PostgreSQL under
// Patroni (a primary and a synchronous standby) and the coordinator on the
// multi-host URL that follows the primary. With uploads and downloads
// running, the primary's machine is lost (Patroni and PostgreSQL killed -9):
// Patroni promotes the standby, the same coordinator process carries on,
// requests fail only within one switch-over window and only with 503
// METADATA_UNAVAILABLE — none with a 500, none by hanging — and every upload
// that was acknowledged, before or during the failover, is there after it.
func TestPatroniFailoverUnderLoad(t *testing.T) {
	t.Parallel()
	pc := patronitest.Start(t, 2)
	// The metadata cache off: every request reads PostgreSQL, so the window
	// is the database's, and no read is answered from memory.
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"DATABASE_URL=" + pc.URL(), "CACHE_ENABLED=false"}})
	pid := c.lc.PID(localcluster.CoordinatorName)
	load := startFailoverLoad(t, c.lc.CoordinatorURL(), c.http.Transport, 2, 2)
	started := time.Now()
	eventually(t, settleTimeout, "the load running", func() (bool, string) {
		n := load.good(started)
		return n >= 40, fmt.Sprint(n, " good requests")
	})

	old := pc.Leader()
	require.NotNil(t, old)
	killed := time.Now()
	pc.Kill(old)
	leader := pc.WaitLeader(3*patronitest.TTL, old.Name)
	promoted := time.Now()
	t.Logf("%s killed; %s promoted %v later", old.Name, leader.Name, promoted.Sub(killed).Round(time.Millisecond))
	// Two seconds of requests that all begin after the promotion.
	eventually(t, settleTimeout, "requests succeeding after the promotion", func() (bool, string) {
		n := load.good(promoted.Add(2 * time.Second))
		return n >= 20, fmt.Sprint(n, " good requests")
	})
	calls, acked := load.finish()

	var failed []loadCall
	for _, call := range calls {
		if call.err == nil {
			continue
		}
		failed = append(failed, call)
		ae := apiError(call.err)
		require.True(t, ae != nil && ae.Status == http.StatusServiceUnavailable && ae.Code == "METADATA_UNAVAILABLE",
			"a request %v after the kill, of %v, failed otherwise than 503 METADATA_UNAVAILABLE: %v",
			call.start.Sub(killed).Round(time.Millisecond), call.end.Sub(call.start).Round(time.Millisecond), call.err)
	}
	require.NotEmpty(t, failed, "no request failed: the kill did not reach the coordinator")
	// The window runs from the first failed request to the first good one
	// sent after it; no request sent later fails.
	first := failed[0]
	var recovered time.Time
	for _, call := range calls {
		if call.err == nil && call.start.After(first.end) {
			recovered = call.end
			break
		}
	}
	require.False(t, recovered.IsZero(), "no request succeeded after the first failure")
	slowest := time.Duration(0)
	for _, call := range failed {
		require.False(t, call.start.After(recovered), "a request sent %v after the window closed failed: %v",
			call.start.Sub(recovered).Round(time.Millisecond), call.err)
		slowest = max(slowest, call.end.Sub(call.start))
	}
	uploads := 0
	for _, call := range calls {
		if call.upload {
			uploads++
		}
	}
	t.Logf("switch-over window %v (first failed request %v after the kill, first good one %v after the kill); "+
		"%d of %d requests failed inside it, all 503 METADATA_UNAVAILABLE, the slowest in %v; %d uploads acknowledged of %d sent",
		recovered.Sub(first.end).Round(time.Millisecond), first.end.Sub(killed).Round(time.Millisecond),
		recovered.Sub(killed).Round(time.Millisecond), len(failed), len(calls), slowest.Round(time.Millisecond),
		len(acked), uploads)

	require.Equal(t, pid, c.lc.PID(localcluster.CoordinatorName), "the coordinator was restarted")
	// Every acknowledged upload is on the new primary, ACTIVE, and reads back
	// whole through the coordinator.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, leader.URLOf())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	ackedIDs := make([]string, len(acked))
	for i, f := range acked {
		ackedIDs[i] = f.res.FileID
	}
	var active int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM files WHERE id::text = ANY($1) AND status = 'ACTIVE'`,
		ackedIDs).Scan(&active))
	require.Equal(t, len(acked), active, "acknowledged uploads ACTIVE on the promoted primary")
	for _, f := range acked {
		var buf bytes.Buffer
		_, err := c.api.Download(ctx, f.res.FileID, &buf, client.DownloadOptions{})
		require.NoError(t, err, "acknowledged upload %s", f.name)
		require.True(t, bytes.Equal(f.data, buf.Bytes()), "acknowledged upload %s reads back different bytes", f.name)
	}
}
