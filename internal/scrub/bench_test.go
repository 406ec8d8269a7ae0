package scrub

import (
	"context"
	"os"
	"testing"
	"time"
)

// BenchmarkPass measures what one pass costs in CPU: hashing 32 blobs of
// 1 MiB from memory with a bandwidth so high that the token bucket never
// waits, and a fake clock, so that pacing costs no time (the shortest period
// keeps the state file's saves to the one per 5 s of clock a real pass
// makes). Its bytes/s is the most SCRUB_BANDWIDTH can get from one core.
func BenchmarkPass(b *testing.B) {
	t := &testing.T{}
	h := newHarness(t)
	fill(t, h.store.Memory, 32, 1<<20)
	h.state = b.TempDir() + "/" + StateFile
	b.SetBytes(32 << 20)
	for b.Loop() {
		if err := os.Remove(h.state); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
		h.clock.now = epoch
		h.store.fetches = nil
		ctx, cancel := context.WithCancel(context.Background())
		h.clock.stopAt, h.clock.cancel = epoch.Add(MinPeriod-time.Millisecond), cancel
		s, err := New(Options{Store: h.store, StatePath: h.state, Period: MinPeriod, Bandwidth: 1 << 40, Clock: h.clock})
		if err != nil {
			b.Fatal(err)
		}
		s.Run(ctx)
		cancel()
		if st := s.Status(ctx); st.HashedCopies != 32 {
			b.Fatalf("hashed %d blobs, want 32", st.HashedCopies)
		}
	}
}
