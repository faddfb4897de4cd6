# idemcheck: a correctness harness for idempotency-key stores.
#   make check [STORE=sqlite|memory|postgres|redis] [VARIANT=correct|<mutant>] [SCENARIO=all|<name>]
#   make test        all tests (Postgres and Redis in containers; set IDEM_REQUIRE_SERVERS=1 to fail when missing)
#   make images      local Postgres/Redis images for machines without a container registry
#   make lab [STORE=…] [LAB_SEEDS=1-10]   the lesson card's lab table on each seed, and its shape
#   make mutants [STORE=…] [SEED=1]       hunt every mutant of the store; the correct store must pass
#   make mutants-20 [STORE=…] [SEED=1]    the same on 20 consecutive seeds: each mutant must die on every one
#   make soak [STORE=…] [SEEDS=200]     every scenario on SEEDS seeds beside CPU hogs: 0 failures on a correct store
#   make mutate [STORE=…] [SEED=1]      generated mutants of the store's own statements and scripts: the score (>= 95%)
#   make lint        go vet, gofmt and staticcheck

STORE    ?= sqlite
VARIANT  ?= correct
SCENARIO ?= all
SEED     ?= 1
LAB_SEEDS ?= 1-10
SEEDS    ?= 200
GO       ?= go
BIN      := bin/idemcheck
STATICCHECK_VERSION := v0.8.2

# The packages whose tests also run under the race detector: the ones made
# of goroutines, mutexes and the scheduler, on the memory and SQLite paths.
RACE_PKGS := ./harness/history ./harness/check ./harness/workload ./harness/worker \
	./harness/nemesis ./harness/sched ./harness ./stores/memory ./stores/sqlite

.PHONY: soak check test build images vet fmt lint clean lab mutants mutants-20 mutate servers-if-needed

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
	@case "$(STORE)" in postgres|redis) $(MAKE) --no-print-directory images ;; esac

check: build servers-if-needed
	@./$(BIN) check --store $(STORE) --variant $(VARIANT) --scenario $(SCENARIO) --seed $(SEED); $(explain)

lab: build servers-if-needed
	./$(BIN) lab --store $(STORE) --seeds $(LAB_SEEDS)

mutants: build servers-if-needed
	@./$(BIN) mutants --store $(STORE) --seed $(SEED); $(explain)

mutants-20: build servers-if-needed
	@./$(BIN) mutants --store $(STORE) --seed $(SEED) --seeds 20; $(explain)

mutate: build servers-if-needed
	@./$(BIN) mutate --store $(STORE) --seed $(SEED); $(explain)

soak: build servers-if-needed
	@./$(BIN) soak --store $(STORE) --variant $(VARIANT) --scenario $(SCENARIO) --seed $(SEED) --seeds $(SEEDS); $(explain)

vet:
	$(GO) vet ./...

fmt:
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed on:"; gofmt -l .; exit 1)

# staticcheck at a pinned version, from the module proxy (cached after the
# first run).
lint: vet fmt
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# The local images are built first when Docker runs (build.sh skips those
# that are up to date); without Docker, tests that need a server skip, or
# fail under IDEM_REQUIRE_SERVERS=1.
test: lint
	@if docker info >/dev/null 2>&1; then bash images/build.sh; \
	else echo "make test: no Docker engine: tests that need Postgres or Redis will skip (IDEM_REQUIRE_SERVERS=1: fail)"; fi
	$(GO) test -count=1 -timeout 18m ./...
	$(GO) test -count=1 -race -timeout 12m $(RACE_PKGS)

images:
	bash images/build.sh

clean:
	rm -rf bin
