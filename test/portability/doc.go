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
//
// What is recorded: every statement a store sends to a test binary's
// shared server (testenv.ClickHouse), the product's and the tests' own,
// from the test process and from the binaries it starts. Not recorded:
// the statements sent to a private server of a fault test
// (testenv.PrivateClickHouse, which the test kills), whose forms the
// shared servers see too. What is replayed: each read once a database and
// text, and at most perForm statements of one form in all; batch INSERTs,
// whose rows query_log does not keep, prove their column lists by an
// INSERT of no rows (their rows reach current ClickHouse in the saved
// tables); writes run after the reads, and the tables they leave are
// compared. The full lists of failures and differences are written next
// to the recording (portability-*.txt).
package portability
