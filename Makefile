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
# The free space the tests need where TMPDIR points (their ClickHouse
# servers, JetStream stores and builds); checked first.
TEST_FREE_GIB ?= 4
test: clickhouse test-clients promtool
	@bash scripts/check-free-space.sh "$${TMPDIR:-/tmp}" $(TEST_FREE_GIB) "make test"
	@bash scripts/install-chdb.sh >/dev/null
	@bash scripts/install-geoip-db.sh >/dev/null
	$(GO) vet ./...
	$(GO) vet -tags chdb ./test/portability/
	@rm -rf $(SQLRECORD)
	PERSONHUB_SQL_RECORD=$(SQLRECORD) $(GO) test -count=1 -timeout 30m ./...
	CHDB_LIB_PATH=$${CHDB_LIB_PATH:-$$(bash scripts/install-chdb.sh)} PERSONHUB_SQL_REPLAY=$(SQLRECORD) \
		$(GO) test -count=1 -timeout 30m -tags chdb -v ./test/portability/

## test-unit: the tests that start no ClickHouse (JetStream runs in process), and
## the docs' drift checks without the fuzz list's build (-short)
UNIT_PKGS = ./cmd/api/ ./cmd/stack/ ./pkg/activity/ ./pkg/appconfig/ ./pkg/capture/ ./pkg/cohort/ \
	./pkg/controlplane/ ./pkg/csvexport/ ./pkg/event/ ./pkg/fold/ ./pkg/geoip/ ./pkg/person/ ./pkg/plugin/... \
	./pkg/progress/ ./pkg/propjson/ ./pkg/shutdown/ ./pkg/stream/ ./pkg/timeline/ ./pkg/transform/
test-unit:
	$(GO) test -count=1 $(UNIT_PKGS)
	$(GO) test -count=1 -short ./test/docs/

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

## bench-scale: ten times the full run's data (S1-S7: 50M events, 10M persons; about two and a half hours
## on two cores and ~50 GiB of disk where TMPDIR points); QUICK=1 runs a hundredth of it in a few minutes
bench-scale: clickhouse
	$(GO) build -o bin/bench ./bench
	./bin/bench -scale 10 $(if $(QUICK),-quick) $(BENCHFLAGS)

## fuzz: run each fuzz target `go test -list` finds for FUZZTIME (default 20s)
FUZZTIME ?= 20s
fuzz:
	@GO=$(GO) bash scripts/fuzz.sh run $(FUZZTIME)

clickhouse:
	@bash scripts/install-clickhouse.sh

.PHONY: test-clients promtool bench-capture bench-scale

## test-clients: Chromium and the npm client libraries that the capture tests drive (test/node, test/browser)
test-clients:
	@bash scripts/install-test-clients.sh

## promtool: Prometheus's checker, for the tests of deploy/prometheus (alert rules)
promtool:
	@bash scripts/install-promtool.sh

## bench-capture: capture load test: events/s accepted on /batch/ against raw JetStream async publishing
bench-capture:
	$(GO) run ./bench/capture $(BENCHCAPTUREFLAGS)
