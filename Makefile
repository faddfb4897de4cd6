# idemcheck: a correctness harness for idempotency-key stores.
#   make check [STORE=sqlite|memory|postgres|redis] [VARIANT=correct|<mutant>] [SCENARIO=all|<name>]
#   make test        all tests (Postgres and Redis in containers; set IDEM_REQUIRE_SERVERS=1 to fail when missing)
#   make images      local Postgres/Redis images for machines without a container registry
#   make lab [STORE=…] [LAB_SEEDS=1-10]   the lesson card's lab table on each seed, and its shape
#   make mutants [STORE=…] [SEED=1]       hunt every mutant of the store; the correct store must pass
#   make mutants-20 [STORE=…] [SEED=1]    the same on 20 consecutive seeds: each mutant must die on every one

STORE    ?= sqlite
VARIANT  ?= correct
SCENARIO ?= all
SEED     ?= 1
LAB_SEEDS ?= 1-10
GO       ?= go
BIN      := bin/idemcheck

.PHONY: check test build images vet fmt clean lab mutants mutants-20

build:
	$(GO) build -o $(BIN) ./cmd/idemcheck

check: build
	./$(BIN) check --store $(STORE) --variant $(VARIANT) --scenario $(SCENARIO) --seed $(SEED)

lab: build
	./$(BIN) lab --store $(STORE) --seeds $(LAB_SEEDS)

mutants: build
	./$(BIN) mutants --store $(STORE) --seed $(SEED)

mutants-20: build
	./$(BIN) mutants --store $(STORE) --seed $(SEED) --seeds 20

test:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed on:"; gofmt -l .; exit 1)
	$(GO) test -count=1 -timeout 15m ./...

images:
	bash images/build.sh

clean:
	rm -rf bin
