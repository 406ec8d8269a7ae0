# dfs — every command a developer or CI needs. `make help` lists them.

GO            ?= go
BIN           ?= bin
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Integration tests reach PostgreSQL and Redis here; override to point elsewhere.
DFS_TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
DFS_TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0
export DFS_TEST_POSTGRES_URL DFS_TEST_REDIS_URL
# Extra flags for go test (CI adds -race and -v).
TESTFLAGS ?=

.PHONY: help build run test test-e2e-files bench lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build coordinator, storage-node and dfs into ./bin, naming each package it compiles
	@echo "building coordinator, storage-node and dfs into $(BIN)/; a first build compiles a few hundred packages, one line each, and takes minutes"
	$(GO) build -v -o $(BIN)/ ./cmd/...

# Flags for `dfs cluster up`, e.g. ARGS="-port 18080 -node-port 19001".
ARGS ?=

run: build ## start a local cluster (coordinator + 3 storage nodes, embedded metadata store, data under ./data; ARGS="-port 18080 -node-port 19001" for other ports); Ctrl-C stops all
	$(BIN)/dfs cluster up -build=false $(ARGS)

test: ## run every test (needs PostgreSQL and Redis; see README)
	$(GO) test -count=1 -timeout 20m $(TESTFLAGS) ./...

# The e2e tests of faults, by file: `make test` runs them with every node on
# the default layout (volumes), test-e2e-files once more on files.
E2E_FAULT_FILES = faults selfheal badnode scrub stores redis_leases durability full_rebalance damaged_reads

test-e2e-files: ## the e2e fault tests again with every node on STORAGE_LAYOUT=files (DFS_E2E_STORAGE_LAYOUT)
	DFS_E2E_STORAGE_LAYOUT=files $(GO) test -count=1 -timeout 20m $(TESTFLAGS) \
		-run "^($$(grep -ho '^func Test[A-Za-z0-9_]*' $(E2E_FAULT_FILES:%=e2e/%_test.go) | cut -c6- | paste -sd'|'))$$" ./e2e/

bench: ## the Go benchmarks, then the cluster benchmark (bench-cluster)
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(MAKE) bench-cluster

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean: ## remove build output, local cluster data and benchmark results
	rm -rf $(BIN) data bench

# The load-test targets: the chaos soak and the cluster benchmark (load-test/README.md).
DURATION    ?= 5m
CHAOSFLAGS  ?=
BENCHFLAGS  ?=

.PHONY: chaos bench-cluster bench-large bench-peer test-peer

chaos: ## chaos soak for DURATION (default 5m): kills, restarts, a join and a leave under load; fails if an acknowledged upload is lost or corrupt
	$(GO) run ./load-test -soak -duration $(DURATION) $(CHAOSFLAGS)

bench-cluster: ## benchmark a local cluster against the machine's baselines; table on stdout, JSON in bench/results.json (BENCHFLAGS=-quick)
	$(GO) run ./load-test/bench $(BENCHFLAGS)

bench-large: ## the large-file figures: 256 MiB upload and download, a 4-part session upload, coordinator peak RSS while 4 GiB stream through, by the client library and by `dfs put` of a 4 GiB file (16 GiB of disk)
	$(GO) run ./load-test/bench -only baseline,large,rss,rss-cli -rss-size 4GiB $(BENCHFLAGS)

bench-peer: ## dfs beside SeaweedFS in one run, alternating: 4 KiB uploads (synced and not) and downloads, 256 MiB up and down (WEED=path to a weed binary)
	@test -n "$(WEED)" || { echo "bench-peer: set WEED to a weed binary (SeaweedFS)"; exit 2; }
	WEED=$(WEED) $(GO) run ./load-test/bench -only baseline,small-volumes,seaweedfs,large $(BENCHFLAGS)

test-peer: ## the seaweedfs phase's own check against a real SeaweedFS, in -quick mode (WEED=path; not part of `make test`)
	@test -n "$(WEED)" || { echo "test-peer: set WEED to a weed binary (SeaweedFS)"; exit 2; }
	WEED=$(WEED) $(GO) test -count=1 -tags peer -run TestSeaweedfsQuick ./load-test/bench/
