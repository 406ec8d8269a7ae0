// Package harness drives a dfs cluster with a steady upload-and-download load
// while it makes faults happen to the cluster's processes, and reports what
// the clients saw: requests and failures by kind and cause, latencies, the
// window of failures that followed each fault, and — the point of it all —
// whether every upload the coordinator acknowledged with a 201 could be read
// back byte-identical afterwards.
//
// The uploaded bytes are never kept: each file's content is a ChaCha8 stream
// named by a seed (see Content), so a long run can byte-compare every
// acknowledged file at the end in constant memory.
//
// Run starts a local cluster of real processes (internal/localcluster) or
// targets a running one; a Plan makes the faults (KillSchedule for the
// availability harness, SoakPlan for the chaos soak). The load-test command
// and the soak test are thin wrappers over Run.
package harness
