# idemcheck: a correctness harness for idempotency-key stores.
#   make check [STORE=sqlite|memory|postgres|redis] [VARIANT=correct|<mutant>] [SCENARIO=all|<name>]
#   make test        all tests (Postgres and Redis in containers; set IDEM_REQUIRE_SERVERS=1 to fail when missing)
#   make images      local Postgres/Redis images for machines without a container registry

STORE    ?= sqlite
VARIANT  ?= correct
SCENARIO ?= all
SEED     ?= 1
GO       ?= go
BIN      := bin/idemcheck

.PHONY: check test build images vet fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/idemcheck

check: build
	./$(BIN) check --store $(STORE) --variant $(VARIANT) --scenario $(SCENARIO) --seed $(SEED)

test:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed on:"; gofmt -l .; exit 1)
	$(GO) test -timeout 15m ./...

images:
	bash images/build.sh

clean:
	rm -rf bin
