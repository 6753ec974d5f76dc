# personhub: the two set-up commands are `make run` and `make test`.
GO ?= go
export GOFLAGS ?= -buildvcs=false

.PHONY: run test test-unit lint build migrate fuzz bench clickhouse

## run: the whole local stack in the foreground (ClickHouse, NATS, schema, ingester, API)
run: clickhouse
	@$(GO) build -o bin/stack ./cmd/stack
	@exec ./bin/stack

## test: unit and integration tests (starts its own ClickHouse and JetStream),
## then test/portability: the migrations and every statement the tests sent,
## replayed on current ClickHouse (chDB, in process) and 18.16 alike
SQLRECORD ?= $(CURDIR)/.data/sql-record
test: clickhouse test-clients
	@bash scripts/install-chdb.sh >/dev/null
	$(GO) vet ./...
	$(GO) vet -tags chdb ./test/portability/
	@rm -rf $(SQLRECORD)
	PERSONHUB_SQL_RECORD=$(SQLRECORD) $(GO) test -count=1 -timeout 30m ./...
	CHDB_LIB_PATH=$${CHDB_LIB_PATH:-$$(bash scripts/install-chdb.sh)} PERSONHUB_SQL_REPLAY=$(SQLRECORD) \
		$(GO) test -count=1 -timeout 30m -tags chdb -v ./test/portability/

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

## bench: speed, cost and memory as ratios against raw baselines of the same run
## (docs/performance.md); QUICK=1 runs the small dataset in under two minutes
bench: clickhouse
	$(GO) build -o bin/bench ./bench
	./bin/bench $(if $(QUICK),-quick) $(BENCHFLAGS)
	$(GO) run ./bench/capture $(if $(QUICK),-events 20000 -rounds 1) $(BENCHCAPTUREFLAGS)

## fuzz: run each fuzz target for FUZZTIME (default 20s)
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./pkg/event/
	$(GO) test -run='^$$' -fuzz=FuzzCanonical -fuzztime=$(FUZZTIME) ./pkg/event/
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./pkg/propfilter/
	$(GO) test -run='^$$' -fuzz=FuzzFlattenJSON -fuzztime=$(FUZZTIME) ./pkg/csvexport/
	$(GO) test -run='^$$' -fuzz=FuzzNormalize -fuzztime=$(FUZZTIME) ./pkg/stream/
	$(GO) test -run='^$$' -fuzz=FuzzScopeAllows -fuzztime=$(FUZZTIME) ./pkg/controlplane/
	$(GO) test -run='^$$' -fuzz=FuzzExtract -fuzztime=$(FUZZTIME) ./pkg/plugin/archive/
	$(GO) test -run='^$$' -fuzz=FuzzParseURL -fuzztime=$(FUZZTIME) ./pkg/plugin/repository/
	$(GO) test -run='^$$' -fuzz=FuzzExports -fuzztime=$(FUZZTIME) ./pkg/plugin/code/
	$(GO) test -run='^$$' -fuzz=FuzzParseManifest -fuzztime=$(FUZZTIME) ./pkg/plugin/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeInputs -fuzztime=$(FUZZTIME) ./pkg/plugin/
	$(GO) test -run='^$$' -fuzz=FuzzRequestInputs -fuzztime=$(FUZZTIME) ./pkg/httpapi/
	$(GO) test -run='^$$' -fuzz=FuzzApply -fuzztime=$(FUZZTIME) ./pkg/timeline/
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=$(FUZZTIME) ./pkg/capture/
	$(GO) test -run='^$$' -fuzz=FuzzDecompressLZ64 -fuzztime=$(FUZZTIME) ./pkg/capture/
	$(GO) test -run='^$$' -fuzz=FuzzParseSchema -fuzztime=$(FUZZTIME) ./pkg/plugin/
	$(GO) test -run='^$$' -fuzz=FuzzParseFilter -fuzztime=$(FUZZTIME) ./pkg/insight/
	$(GO) test -run='^$$' -fuzz=FuzzReadMemberCSV -fuzztime=$(FUZZTIME) ./pkg/httpapi/

clickhouse:
	@bash scripts/install-clickhouse.sh

.PHONY: test-clients bench-capture

## test-clients: Chromium and the npm client libraries that the capture tests drive (test/node, test/browser)
test-clients:
	@bash scripts/install-test-clients.sh

## bench-capture: capture load test: events/s accepted on /batch/ against raw JetStream async publishing
bench-capture:
	$(GO) run ./bench/capture $(BENCHCAPTUREFLAGS)
