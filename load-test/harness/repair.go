package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/client"
)

// RepairReport is the state of the acknowledged files after one repair pass.
type RepairReport struct {
	Rebalance      *client.RebalanceReport `json:"rebalance,omitempty"`
	RebalanceError string                  `json:"rebalanceError,omitempty"`
	// ActiveAfterRebalance counts the files already ACTIVE with RF active
	// copies when the rebalance answered; Active counts them after the wait
	// (the repair loop may finish what the pass left).
	ActiveAfterRebalance int           `json:"activeAfterRebalance"`
	Active               int           `json:"active"`
	Waited               time.Duration `json:"waitedNs"`
	// Verified counts the files whose verify answered RF copies, every one
	// OK and none rebuilt: their copies were intact before verify touched
	// them.
	Verified int      `json:"verified"`
	Files    int      `json:"files"`
	RF       int      `json:"replicationFactor"`
	Bad      []string `json:"bad,omitempty"`
}

// OK reports whether every file was ACTIVE and verified.
func (r RepairReport) OK() bool {
	return r.RebalanceError == "" && r.Active == r.Files && r.Verified == r.Files
}

// RepairCheck runs one rebalance, waits up to wait for every file to be
// ACTIVE with RF ACTIVE copies, then verifies each file's copies.
func RepairCheck(ctx context.Context, env *Env, files []Acked, wait time.Duration, concurrency int) RepairReport {
	rep := RepairReport{Files: len(files)}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	h, err := env.Client.Health(hctx)
	cancel()
	rep.RF = h.ReplicationFactor
	if err != nil || rep.RF == 0 {
		rep.RebalanceError = fmt.Sprintf("health: %v", err)
		return rep
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	rb, err := env.Client.Rebalance(rctx)
	cancel()
	if err != nil {
		rep.RebalanceError = err.Error()
	} else {
		rep.Rebalance = &rb
	}

	bad := func(why string) {
		if len(rep.Bad) < maxBadListed {
			rep.Bad = append(rep.Bad, why)
		}
	}
	pending := files
	start := time.Now()
	for round := 0; ; round++ {
		var (
			mu   sync.Mutex
			left []Acked
			why  = map[string]string{}
		)
		each(ctx, pending, concurrency, func(a Acked) {
			ok, reason := activeWithRF(ctx, env.Client, a.ID, rep.RF)
			if !ok {
				mu.Lock()
				left = append(left, a)
				why[a.ID] = reason
				mu.Unlock()
			}
		})
		if round == 0 {
			rep.ActiveAfterRebalance = len(files) - len(left)
		}
		pending = left
		rep.Waited = time.Since(start)
		if len(pending) == 0 || rep.Waited >= wait || ctx.Err() != nil {
			for _, a := range pending {
				bad(a.ID + ": " + why[a.ID])
			}
			break
		}
		time.Sleep(time.Second)
	}
	rep.Active = len(files) - len(pending)

	var mu sync.Mutex
	each(ctx, files, concurrency, func(a Acked) {
		vctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		v, err := env.Client.Verify(vctx, a.ID)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			env.Rec.Fail(KindVerify, start, err)
			bad(a.ID + ": verify: " + Classify(err))
			return
		}
		env.Rec.OK(KindVerify, start, 0, "")
		if verifiedIntact(v, rep.RF) && v.Checksum == a.Checksum {
			rep.Verified++
			return
		}
		okCopies := 0
		for _, c := range v.Copies {
			if c.Result == client.CheckOK && !c.Rebuilt {
				okCopies++
			}
		}
		bad(fmt.Sprintf("%s: verify: status %s, %d copies, %d OK and not rebuilt: %+v", a.ID, v.Status, len(v.Copies), okCopies, v.Copies))
	})
	return rep
}

// activeWithRF reports whether the file is ACTIVE with rf ACTIVE copies, and
// if not, why.
func activeWithRF(ctx context.Context, c *client.Client, id string, rf int) (bool, string) {
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f, err := c.Metadata(mctx, id)
	if err != nil {
		return false, "metadata: " + Classify(err)
	}
	active := countActive(f.Replicas)
	if len(f.Chunks) > 0 {
		// A chunked file has no copies of its own: each chunk has rf.
		for _, c := range f.Chunks {
			if n := countActive(c.Replicas); n != rf {
				return false, fmt.Sprintf("status %s, chunk %d with %d active copies", f.Status, c.Index, n)
			}
		}
		active = rf
	}
	if f.Status == client.FileActive && active == rf {
		return true, ""
	}
	return false, fmt.Sprintf("status %s with %d active copies of %d listed", f.Status, active, len(f.Replicas))
}

func countActive(rs []client.Replica) int {
	n := 0
	for _, r := range rs {
		if r.Status == client.CopyActive {
			n++
		}
	}
	return n
}

// intact reports whether copies are rf copies all found OK and none rebuilt.
func intact(copies []client.CopyCheck, rf int) bool {
	ok := 0
	for _, c := range copies {
		if c.Result == client.CheckOK && !c.Rebuilt {
			ok++
		}
	}
	return ok == rf && len(copies) == rf
}

// verifiedIntact is intact for a file's copies or, for a chunked file
// (which has none of its own), for every chunk's.
func verifiedIntact(v client.VerifyResult, rf int) bool {
	if len(v.Chunks) == 0 {
		return intact(v.Copies, rf)
	}
	for _, c := range v.Chunks {
		if !intact(c.Copies, rf) {
			return false
		}
	}
	return true
}

// each runs fn for every file, n at a time, until ctx ends.
func each(ctx context.Context, files []Acked, n int, fn func(Acked)) {
	ch := make(chan Acked)
	var wg sync.WaitGroup
	for range max(n, 1) {
		wg.Go(func() {
			for a := range ch {
				fn(a)
			}
		})
	}
	for _, a := range files {
		select {
		case ch <- a:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
}
