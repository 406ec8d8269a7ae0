package harness

import (
	"context"
	"time"

	"github.com/dfs-project/dfs/internal/clustercheck"
)

// InvariantReport is the outcome of the closing invariant check (see
// package clustercheck): after the traffic and the faults, and before any
// repair pass asks for a rebalance, the cluster must on its own come to hold
// every acknowledged file byte-exact, ACTIVE on exactly its preference list,
// with every listed copy on its node's disk and no blob the metadata does
// not list.
type InvariantReport struct {
	OK bool `json:"ok"`
	// Waited is how long the check was polled until it held, or the whole
	// quiet period when it never did; Polls how many checks were made.
	Waited time.Duration `json:"waitedNs"`
	Polls  int           `json:"polls"`
	// Summary is the last check's one-line summary; Violations its first
	// broken rules, one a line.
	Summary    string   `json:"summary"`
	Violations []string `json:"violations,omitempty"`
	// Error is set when the last check could not be made at all.
	Error string `json:"error,omitempty"`
}

// InvariantCheck polls the invariant over files until it holds or quiet has
// passed. The shallow check (metadata against the ring and the nodes'
// listings) is polled first, since it costs no reads; the full one, with a
// download of every file and a re-hash of every copy, only once that holds.
func InvariantCheck(ctx context.Context, env *Env, files []Acked, quiet time.Duration, concurrency int) InvariantReport {
	want := make([]clustercheck.File, len(files))
	for i, a := range files {
		want[i] = clustercheck.File{ID: a.ID, SHA256: a.Checksum}
	}
	var rep InvariantReport
	start := time.Now()
	for {
		rep.Polls++
		o := clustercheck.Options{API: env.Client, Nodes: runningNodes(env), Files: want, Shallow: true, Concurrency: concurrency}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		res, err := clustercheck.Check(cctx, o)
		if err == nil && res.OK() {
			o.Shallow = false
			res, err = clustercheck.Check(cctx, o)
		}
		cancel()
		rep.Waited = time.Since(start)
		rep.Error, rep.Summary, rep.Violations = "", "", nil
		if err != nil {
			rep.Error = err.Error()
		} else {
			rep.OK, rep.Summary = res.OK(), res.Summary()
			for i, v := range res.Violations {
				if i == maxBadListed {
					break
				}
				rep.Violations = append(rep.Violations, v.String())
			}
		}
		if rep.OK || rep.Waited >= quiet || ctx.Err() != nil {
			return rep
		}
		select {
		case <-ctx.Done():
			return rep
		case <-time.After(time.Second):
		}
	}
}

// runningNodes maps every storage node whose process runs to its URL: the
// members, and any other node still running, which must then hold nothing.
func runningNodes(env *Env) map[string]string {
	out := map[string]string{}
	for _, n := range env.Cluster.Nodes() {
		if env.Cluster.PID(n) != 0 {
			out[n] = env.Cluster.NodeURL(n)
		}
	}
	return out
}
