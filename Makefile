# personhub: the two set-up commands are `make run` and `make test`.
GO ?= go
export GOFLAGS ?= -buildvcs=false

.PHONY: run test test-unit lint build migrate fuzz bench clickhouse

## run: the whole local stack in the foreground (ClickHouse, NATS, schema, ingester, API)
run: clickhouse
	@$(GO) build -o bin/stack ./cmd/stack
	@exec ./bin/stack

## test: unit and integration tests (starts its own ClickHouse and JetStream)
test: clickhouse
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...

## test-unit: the tests that need no ClickHouse
test-unit:
	$(GO) test -count=1 ./pkg/fold/ ./pkg/event/ ./pkg/person/ ./pkg/propfilter/ ./pkg/csvexport/ ./pkg/stream/

## lint: vet, gofmt, and golangci-lint when installed
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if command -v golangci-lint >/dev/null; then golangci-lint run; else echo "golangci-lint not installed: skipped"; fi

## build: the binaries into ./bin
build:
	$(GO) build -o bin/ ./cmd/...

## migrate: apply ClickHouse migrations (CLICKHOUSE_ADDR, CLICKHOUSE_DATABASE)
migrate:
	$(GO) run ./cmd/ingester migrate

## fuzz: run each fuzz target for FUZZTIME (default 20s)
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./pkg/event/
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./pkg/propfilter/
	$(GO) test -run='^$$' -fuzz=FuzzFlattenJSON -fuzztime=$(FUZZTIME) ./pkg/csvexport/
	$(GO) test -run='^$$' -fuzz=FuzzNormalize -fuzztime=$(FUZZTIME) ./pkg/stream/
	$(GO) test -run='^$$' -fuzz=FuzzScopeAllows -fuzztime=$(FUZZTIME) ./pkg/controlplane/
	$(GO) test -run='^$$' -fuzz=FuzzRequestInputs -fuzztime=$(FUZZTIME) ./pkg/httpapi/
	$(GO) test -run='^$$' -fuzz=FuzzApply -fuzztime=$(FUZZTIME) ./pkg/timeline/

clickhouse:
	@bash scripts/install-clickhouse.sh
