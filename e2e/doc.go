// Package e2e proves the fault table of the seed on the real binaries: every
// test builds nothing itself but starts the coordinator and storage nodes
// that TestMain built, as operating-system processes on loopback ports, and
// produces each failure for real — SIGKILL, SIGSTOP, a byte flipped in a
// copy on disk, a full disk, a killed PostgreSQL or Redis, a client that
// hangs up in the middle of a body — then drives only the public REST API and
// the nodes' internal API to show what a client sees and that nothing is
// lost. The nodes run in the storage layout DFS_E2E_STORAGE_LAYOUT names
// (unset: their default), and the tests reach copies on disk through
// internal/blob/blobfault, so each test holds in either layout.
//
// The self-healing tests (selfheal_test.go) make the faults that once left a
// cluster wrong for good while it called its files ACTIVE — a coordinator
// killed mid-rebalance, a wiped disk back before the failure detector
// noticed, a surplus holder down mid-rebalance, deletes racing copies, Redis
// lost mid-join, torn checksum sidecars — and end each with one assertion:
// within a bounded quiet period, and without anyone asking for a rebalance,
// the cluster satisfies the invariant of internal/clustercheck (placement by
// the ring, every copy on disk, no orphan, every file byte-exact).
//
// The package also holds the security and bad-input tests that need real
// processes: path traversal on every route, malformed and truncated bodies,
// hostile Range headers and page sizes, and internal calls without the
// cluster token.
//
// The console test (console_test.go) loads every console page from a real
// cluster in headless Chromium, checks what each shows against the API, and
// sees a node killed with SIGKILL appear on them.
//
// The package has no non-test code; this file only carries its comment.
package e2e
