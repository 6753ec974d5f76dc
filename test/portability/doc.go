// Package portability proves the product's SQL on current ClickHouse as
// well as on the tests' server (18.16): every migration is applied to both,
// from empty and again, and every statement the integration tests sent
// (recorded by pkg/testenv under $PERSONHUB_SQL_RECORD) is replayed on both
// over the same tables and rows, and their answers compared.
//
// Current ClickHouse runs in process: chDB, the ClickHouse engine as a
// library (libchdb.so, from the npm package @chdb/lib-linux-x64-gnu, which
// scripts/install-chdb.sh fetches), loaded by github.com/chdb-io/chdb-go
// from $CHDB_LIB_PATH. That module panics at init when the library is
// absent, so the tests are built only with the tag chdb; `make test` runs
// them after the other packages, with the recording they made:
//
//	PERSONHUB_SQL_RECORD=dir go test ./...
//	CHDB_LIB_PATH=.../libchdb.so PERSONHUB_SQL_REPLAY=dir go test -tags chdb ./test/portability/
package portability
