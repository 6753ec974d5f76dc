package statement

import (
	"reflect"
	"slices"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ReserveStrings makes room in String column idx of batch for rows more
// values of size bytes in all, before they are appended.
//
// Why: the driver appends a []string value by value to one byte buffer
// that starts empty for every batch, so an events batch (20k properties
// objects, ~6 MB) grows it by doubling: a dozen large allocations, each
// zeroed and copied into, were ~5% of the ingester's CPU in a profile of
// the ingest benchmark (docs/performance.md). The driver has no API to reserve, so the buffer is
// reached through its unexported field, found by reflection: if the
// driver's layout ever changes, nothing is reserved and the batch is
// written as before (TestReserveStrings fails, saying so).
func ReserveStrings(batch driver.Batch, idx, rows, size int) bool {
	cols := batch.Columns()
	if idx >= len(cols) {
		return false
	}
	s, ok := cols[idx].(*column.String)
	if !ok {
		return false
	}
	f := reflect.ValueOf(s).Elem().FieldByName("col")
	if !f.IsValid() || f.Type() != reflect.TypeFor[proto.ColStr]() {
		return false
	}
	c := (*proto.ColStr)(unsafe.Pointer(f.UnsafeAddr()))
	c.Buf = slices.Grow(c.Buf, size)
	c.Pos = slices.Grow(c.Pos, rows)
	return true
}
