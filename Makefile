# UBSCore — the two commands that matter are `make run` and `make test`.
GO      ?= go
PKGS    := ./...
DATA    ?= ./data

.PHONY: run chain-node test test-long soak replica-demo failover-demo fuzz bench bench-quick bench-shape-instr bench-micro bench-median bench-wrk lint build clean

## build: compile every binary into ./bin
build:
	$(GO) build -o bin/ ./cmd/...

## run: start the exchange with the built-in default config (data under $(DATA)).
## Postgres: UBS_PG_URL or DATABASE_URL when set, else a private cluster under
## $(DATA)/pg (persist/localpg; none if the host has no PostgreSQL binaries).
## Tokens for it: ./bin/exchange token --user 42 [--admin] --data-dir $(DATA)
run: build
	./bin/exchange --data-dir $(DATA)

## chain-node: anvil (Foundry's dev chain, npm @foundry-rs/anvil-linux-amd64, pinned in
## testdata/chain/package-lock.json) for the chain tests; skipped without npm (those tests then skip, or fail under CI)
chain-node:
	@if command -v npm >/dev/null; then npm ci --prefix testdata/chain --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the anvil-backed tests will skip (CI=1: fail)"; fi

## test: the default suite, race detector on, -short, under 10 minutes on 2 cores.
## core has no goroutines (core/purity_test.go forbids sync and go statements), so its
## tests run without the race detector (test-long keeps it), in one process beside
## everything else from the start: the -short suite, then the 1M-command determinism
## run (TestPropertyRandomStream, -tags invariants). It runs at the lowest priority
## (nice 19): it takes the CPU the package tests leave idle (waiting on servers, fsyncs
## and links) and does not slow their timed parts.
RACE_PKGS = $(shell $(GO) list $(PKGS) | grep -v '/ubscore/core$$')
test: chain-node
	@log=$$(mktemp); { nice -n 19 $(GO) test -short -tags invariants -skip '^TestPropertyRandomStream$$' ./core && \
	   nice -n 19 $(GO) test -tags invariants -count 1 -run '^TestPropertyRandomStream$$' -timeout 9m ./core; } > $$log 2>&1 & p=$$!; \
	 $(GO) vet $(PKGS) || r=1; \
	 [ -n "$$r" ] || $(GO) test -race -short -tags invariants -timeout 9m $(RACE_PKGS) || r=1; \
	 echo "# bench-quick (bench all --quick), checked like the tiny profile"; \
	 [ -n "$$r" ] || UBS_BENCH_QUICK_TEST=1 $(GO) test -count 1 -run '^TestAllQuick$$' -timeout 5m ./cmd/bench || r=1; \
	 echo "# core without the race detector, then the 1M-command determinism run (started first)"; \
	 wait $$p || r=1; cat $$log; rm -f $$log; exit $${r:-0}

## test-long: the long suites (1M-command determinism, many crash rounds, the 1,000-tx leader-kill soak)
test-long: chain-node
	$(GO) test -race -tags invariants -timeout 60m $(PKGS)

## soak: the whole-venue soak (issue 32, TestVenueSoak) against the real binary, Postgres, NATS
## and anvil, with restarts and outages: SEED=N reruns a seed (default: a random one, printed),
## DURATION=D its length (default 10m). Prints a report line; a failure prints its seed and last operations.
SEED     ?=
DURATION ?= 10m
soak: chain-node
	UBS_SOAK_SEED=$(SEED) UBS_SOAK_DURATION=$(DURATION) $(GO) test -race -tags invariants -count 1 -timeout 5h \
	  -run '^TestVenueSoak$$' -v ./cmd/exchange

## replica-demo: a 3-node NATS cluster, a primary and a standby, a promotion (docs/replication.md)
replica-demo:
	bash scripts/replica-demo.sh

## failover-demo: a 3-node NATS cluster, three exchanges with --failover auto: a kill, a take-over, a rejoin, a bootstrap
failover-demo:
	bash scripts/failover-demo.sh

## fuzz: run every fuzz target for FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./core -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME)
	$(GO) test ./core -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME)
	$(GO) test ./core -run '^$$' -fuzz '^FuzzRestore$$' -fuzztime $(FUZZTIME)
	$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeEnvelope$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gateway -run '^$$' -fuzz '^FuzzParseUnits$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gateway -run '^$$' -fuzz '^FuzzAuthenticate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gateway -run '^$$' -fuzz '^FuzzHistoryQuery$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bench -run '^$$' -fuzz '^FuzzFrameResponse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gateway -run '^$$' -fuzz '^FuzzP2PAmount$$' -fuzztime $(FUZZTIME)
	$(GO) test ./publish -run '^$$' -fuzz '^FuzzParseMsgID$$' -fuzztime $(FUZZTIME)
	$(GO) test ./persist/chaintx/evm -run '^$$' -fuzz '^FuzzParseAddress$$' -fuzztime $(FUZZTIME)
	$(GO) test ./logging -run '^$$' -fuzz '^FuzzFastJSONString$$' -fuzztime $(FUZZTIME)
	$(GO) test ./core -run '^$$' -fuzz '^FuzzIdMap$$' -fuzztime $(FUZZTIME)
	$(GO) test ./stream -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gateway/openapitest -run '^$$' -fuzz '^FuzzShapeKey$$' -fuzztime $(FUZZTIME)

## bench: every scenario beside its ceiling (<= 10 min): bench-out/report.md, report.json, plots
bench:
	$(GO) run ./cmd/bench all --out bench-out

## bench-quick: the same in about a minute
bench-quick:
	$(GO) run ./cmd/bench all --quick --out bench-out

## bench-median: bench all three times (bench-out/run-N) and a report of per-row medians in bench-out
bench-median:
	$(GO) run ./cmd/bench all --runs 3 --out bench-out

## bench-wrk: the load generator vs wrk on the hello-world target at 4, 32 and 256 connections,
## alternately and at the same time, and with a known server stall (needs wrk; ~6 min)
bench-wrk:
	$(GO) run ./cmd/bench wrk-check --runs 3 --duration 10s --conns-list 4:1,32:2,256:2
	$(GO) run ./cmd/bench wrk-check --runs 3 --duration 10s --concurrent --conns-list 4:1,32:2,256:2
	$(GO) run ./cmd/bench wrk-check --runs 3 --stall 10ms --stall-every 20ms

## bench-shape-instr: instructions per message of the full processor and the bare book on the
## book-shaped flow (callgrind; the same commit always gives the same counts). SCENARIO, ACCOUNTS
bench-shape-instr:
	bench/shape_instructions.sh $(or $(SCENARIO),normal) $(or $(ACCOUNTS),8k)

## bench-micro: the Go micro-benchmarks of the core and the journal
bench-micro:
	$(GO) test ./core ./journal/... -run '^$$' -bench . -benchmem -count 3

## lint: gofmt, go vet, staticcheck when installed
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	@command -v staticcheck >/dev/null && staticcheck $(PKGS) || true

clean:
	rm -rf bin
