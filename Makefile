# idemcheck: a correctness harness for idempotency-key stores.
#   make check [STORE=sqlite|memory|postgres|redis] [VARIANT=correct|<mutant>] [SCENARIO=all|<name>]
#   make test        all tests (Postgres and Redis in containers; set IDEM_REQUIRE_SERVERS=1 to fail when missing)
#   make images      local Postgres/Redis images for machines without a container registry
#   make lab [STORE=…] [LAB_SEEDS=1-10]   the lesson card's lab table on each seed, and its shape
#   make mutants [STORE=…] [SEED=1]       hunt every mutant of the store; the correct store must pass
#   make mutants-20 [STORE=…] [SEED=1]    the same on 20 consecutive seeds: each mutant must die on every one
#   make soak [STORE=…] [SEEDS=200]     every scenario on SEEDS seeds beside CPU hogs: 0 failures on a correct store
#   make soak-flags [STORE=…] [DRAWS=100] [DRAW_SEED=1]   a property test of the harness: each run draws every
#                    flag from its allowed range, beside CPU hogs: 0 failures on a correct store
#   make determinism  every sched-* scenario 10 times per backend on one seed: the traces must be byte-identical
#   make replicated [STORE=postgres-replicated|redis-replicated] [SEED=1]   the replicated gate: failover and
#                    partition; the synchronous store must pass, the asynchronous configuration must fail
#   make replicated-5 [REPL_SEEDS="1 2 3 4 5"]   the replicated gate on both backends and every seed
#   make mutate [STORE=…] [SEED=1]      generated mutants of the store's own statements and scripts: the score (>= 95%)
#   make lint        go vet, gofmt and staticcheck
#   make check-http [HTTP_DURATION=6s] [SEED=1]  black-box mode: the example HTTP services in Go
#                    (examples/httpsvc, over Redis), Python (examples/pysvc) and Node/Express (examples/nodesvc),
#                    through faults: each correct variant passes, each mutant fails with the checker and cause
#                    that names its bug
#   make soak-http [DRAWS=100] [DRAW_SEED=1]   a property test of the black-box mode: each run draws its flags
#                    from the ranges a user may pick against one correct example service: none may fail
#   make check-exec [SEED=1]   stores in other languages through the store protocol (docs/protocol.md): the
#                    lesson card's store in JavaScript over SQLite and a Python store over Redis; each correct
#                    store passes, each bug variant fails with the checkers named, demo shows the race
#   make bench [BENCHTIME=1s] [COUNT=1]   every store operation beside its raw baseline (sqlite, memory, postgres,
#                    redis; 1 and 8 goroutines) with store/raw ratios, and the checkers and the run's files (history,
#                    reports) on 100k and 1M recorded ops

STORE    ?= sqlite
VARIANT  ?= correct
SCENARIO ?= all
SEED     ?= 1
LAB_SEEDS ?= 1-10
SEEDS    ?= 200
DRAWS    ?= 100
DRAW_SEED ?= 1
BENCHTIME ?= 1s
COUNT    ?= 1
GO       ?= go
BIN      := bin/idemcheck
STATICCHECK_VERSION := v0.8.2

# The packages whose tests also run under the race detector: the ones made
# of goroutines, mutexes and the scheduler, on the memory and SQLite paths.
# Their test binaries link no Docker, testcontainers, toxiproxy or driver
# (TestRacePassLinksNoServers): tests on Postgres and Redis run in the
# other pass.
# Longest first: go test starts the packages in the order given.
RACE_PKGS := ./harness ./stores/sqlite ./harness/history ./harness/check \
	./harness/workload ./harness/worker ./harness/nemesis ./harness/sched \
	./stores/memory ./harness/httpload ./harness/httpfault

# The packages of the other pass whose tests take longest (most of it
# waiting on servers and clocks), longest first: started before the rest,
# so that the short ones fill in beside them and no long one starts last
# (the race pass's longest, too). A package left out only runs later.
FIRST_PKGS := ./harness/scenario ./harness/servers ./stores/postgres ./stores/lease \
	./cmd/idemcheck ./harness/hunt ./stores/redis ./harness/idemtest ./stores/execstore

.PHONY: determinism soak soak-flags soak-http check test build images vet fmt lint clean lab mutants mutants-20 servers-if-needed check-http httpsvc replicated replicated-5 bench mutate check-exec

# -buildvcs=auto: stamp the commit into the binary (idemcheck version,
# summary.json) even where GOFLAGS turns it off.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/idemcheck

# explain turns the binary's exit code into its meaning: GNU make answers 2
# for any failed recipe, so the last line says what idemcheck itself said.
explain = code=$$?; case $$code in 0) ;; 1) echo "$@: idemcheck exited 1: a violation was found (or a mutant survived); make exits 2 for any failure, call $(BIN) directly to get 1";; \
	2) echo "$@: idemcheck exited 2: bad usage or a setup error (see the line above)";; \
	3) echo "$@: idemcheck exited 3: undecided (interrupted, or a checker could not decide)";; \
	*) echo "$@: idemcheck exited $$code";; esac; exit $$code

# Server stores need the local images on a machine without a registry.
servers-if-needed:
	@case "$(STORE)" in postgres|redis|postgres-replicated|redis-replicated) $(MAKE) --no-print-directory images ;; esac

check: build servers-if-needed
	@./$(BIN) check --store $(STORE) --variant $(VARIANT) --scenario $(SCENARIO) --seed $(SEED); $(explain)

lab: build servers-if-needed
	@./$(BIN) lab --store $(STORE) --seeds $(LAB_SEEDS); $(explain)

mutants: build servers-if-needed
	@./$(BIN) mutants --store $(STORE) --seed $(SEED); $(explain)

mutants-20: build servers-if-needed
	@./$(BIN) mutants --store $(STORE) --seed $(SEED) --seeds 20; $(explain)

mutate: build servers-if-needed
	@./$(BIN) mutate --store $(STORE) --seed $(SEED); $(explain)

soak: build servers-if-needed
	@./$(BIN) soak --store $(STORE) --variant $(VARIANT) --scenario $(SCENARIO) --seed $(SEED) --seeds $(SEEDS); $(explain)

soak-flags: build servers-if-needed
	@./$(BIN) soak --store $(STORE) --random-flags --draw-seed $(DRAW_SEED) --seeds 1-$(DRAWS); $(explain)

determinism: images
	IDEM_REQUIRE_SERVERS=1 IDEM_DETERMINISM_RUNS=10 $(GO) test -count=1 -run TestScheduledRunsAreDeterministic -v ./harness ./harness/scenario

# The example services of the black-box mode (Go, Python, Node/Express),
# each correct variant and its mutants with the checker and cause that
# must name each one's bug: examples/check-http.sh.
HTTPSVC       := bin/httpsvc
HTTP_DURATION ?= 6s

httpsvc:
	$(GO) build -o $(HTTPSVC) ./examples/httpsvc

check-http: build httpsvc
	@$(MAKE) --no-print-directory images
	@HTTP_DURATION=$(HTTP_DURATION) SEED=$(SEED) examples/check-http.sh ./$(BIN) ./$(HTTPSVC)

# The random-flag soak of the black-box mode (scripts/soak-http.py says
# what it draws): exit 1 when a correct example fails on any draw.
soak-http: build httpsvc
	@$(MAKE) --no-print-directory images
	@python3 scripts/soak-http.py ./$(BIN) ./$(HTTPSVC) $(DRAWS) $(DRAW_SEED)

# The stores in other languages (examples/exec-*), run as child processes
# speaking the store protocol: scripts/check-exec.sh says what each must do.
check-exec: build
	@$(MAKE) --no-print-directory images
	@bash scripts/check-exec.sh ./$(BIN) $(SEED)

# The replicated gate, on one replicated store (STORE) or both: the correct
# (synchronous) store must pass failover and partition (exit 0) and the
# asynchronous configuration must fail them (exit 1). Each run starts its
# own primary and standby, which it removes on exit and on Ctrl-C.
REPL_SEEDS ?= 1 2 3 4 5
repl_stores = $(if $(filter %-replicated,$(STORE)),$(STORE),postgres-replicated redis-replicated)

replicated: build
	@$(MAKE) --no-print-directory images
	@bash scripts/replicated-gate.sh ./$(BIN) "$(repl_stores)" "$(SEED)"

replicated-5: build
	@$(MAKE) --no-print-directory images
	@bash scripts/replicated-gate.sh ./$(BIN) "$(repl_stores)" "$(REPL_SEEDS)"

vet:
	$(GO) vet ./...

fmt:
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed on:"; gofmt -l .; exit 1)

# staticcheck at a pinned version, from the module proxy (cached after the
# first run).
lint: vet fmt
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# The local images are built when Docker runs (build.sh skips those that
# are up to date), in the background while the packages compile: on a
# fresh machine both take a minute or more, one on the network and dpkg,
# the other on the compiler. Their log goes to results/images.log and is
# printed at the end. The plain pass starts each test binary once the
# build has ended (scripts/after-images.sh as go test's -exec); the race
# pass links no server (TestRacePassLinksNoServers) and starts at once.
# Without Docker, tests that need a server skip, or fail under
# IDEM_REQUIRE_SERVERS=1.
#
# Two passes run side by side, and every package runs in exactly one: the
# RACE_PKGS under -race, every other package without it (TEST_P at once).
# Most tests wait on servers, sleeps and lock expiry rather than compute,
# so the passes overlap well on two cores: every one of the FIRST_PKGS at
# once, and one more for the short ones (docs/performance.md; at six, the
# last two of them waited a minute and more for a slot). Each pass vets
# what it compiles with every analyzer (-vet=all, what go vet runs), so
# nothing is compiled twice; staticcheck runs when the race pass ends,
# in the time the plain pass spends waiting. Their output goes to results/test-race.txt and
# results/staticcheck.txt and is printed at the end, so nothing
# interleaves; the target fails if gofmt, either pass, staticcheck or the
# images do.
TEST_P ?= 10
test:
	@mkdir -p results && rm -f results/images.done results/race-lint.rc
	@$(MAKE) --no-print-directory fmt
	@done=; if docker info >/dev/null 2>&1; then \
		echo "make test: building the images in the background (results/images.log)"; \
		{ bash images/build.sh > results/images.log 2>&1; echo $$? > results/images.done; } & \
		done="$(CURDIR)/results/images.done"; \
	else echo "make test: no Docker engine: tests that need Postgres or Redis will skip (IDEM_REQUIRE_SERVERS=1: fail)"; fi; \
	echo "make test: $(RACE_PKGS) under -race, then staticcheck (results/test-race.txt, results/staticcheck.txt); every other package without -race, side by side"; \
	{ $(GO) test -count=1 -vet=all -race -timeout 12m $(RACE_PKGS) > results/test-race.txt 2>&1; raced=$$?; \
	  $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./... > results/staticcheck.txt 2>&1; echo "$$raced $$?" > results/race-lint.rc; } & race=$$!; \
	racepkgs="$$($(GO) list $(RACE_PKGS))" && first="$$($(GO) list $(FIRST_PKGS) | grep -vxF "$$racepkgs")" || exit 2; \
	IDEM_IMAGES_DONE="$$done" $(GO) test -count=1 -vet=all -p $(TEST_P) -timeout 18m -exec "$(CURDIR)/scripts/after-images.sh" \
		$$first $$($(GO) list ./... | grep -vxF "$$racepkgs" | grep -vxF "$$first"); plain=$$?; \
	wait $$race; read -r raced linted < results/race-lint.rc || { raced=1; linted=1; }; \
	echo "== the race pass (results/test-race.txt):"; cat results/test-race.txt; \
	echo "== staticcheck (results/staticcheck.txt):"; cat results/staticcheck.txt; \
	built=0; if [ -n "$$done" ]; then wait; read -r built < results/images.done || built=1; echo "== the images (results/images.log):"; cat results/images.log; fi; \
	if [ $$plain != 0 ] || [ $$raced != 0 ] || [ $$linted != 0 ] || [ $$built != 0 ]; then \
		echo "make test: FAILED (without -race: exit $$plain; under -race: exit $$raced; staticcheck: exit $$linted; the images: exit $$built)"; exit 1; fi

images:
	bash images/build.sh

# The benchmarks' raw output (benchstat's input) goes to results/bench/;
# benchratio prints the store/raw table from it.
bench:
	@if docker info >/dev/null 2>&1; then bash images/build.sh; \
	else echo "make bench: no Docker engine: postgres and redis are skipped"; fi
	@mkdir -p results/bench
	bash -o pipefail -c "$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count $(COUNT) -timeout 60m ./bench | tee results/bench/stores.txt"
	$(GO) run ./bench/benchratio results/bench/stores.txt
	bash -o pipefail -c "$(GO) test -run '^$$' -bench CheckLargeHistory -benchtime 1x -count $(COUNT) -timeout 30m ./harness/check | tee results/bench/check.txt"
	bash -o pipefail -c "$(GO) test -run '^$$' -bench WriteRun -benchtime 1x -count $(COUNT) -timeout 30m ./cmd/idemcheck | tee results/bench/write.txt"

clean:
	rm -rf bin
