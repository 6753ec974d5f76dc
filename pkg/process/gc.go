package process

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// IngesterMemoryLimitMiB is the ingester's default Go soft memory limit:
// 7/8 of the 1 GiB its RSS is held to at 1M persons with the default
// cache (docs/operations.md "Ingester memory"). With GOGC=200 the heap
// grows to the limit whatever the live heap (218 MB there), and the limit
// is soft: RSS went 22 MiB past 1024 and 40 MiB past 896 at the fill's
// peaks (what is allocated while a collection runs), so the limit sits an
// eighth below the ceiling.
const IngesterMemoryLimitMiB = 896

// TuneGC trades memory for CPU where the operator has not chosen: the
// ingester's person cache is pointer-heavy, and with Go's defaults garbage
// collection took a third of its CPU in make bench. GOGC defaults to 200
// (half the collections), and a soft memory limit of limitMiB (unless
// GOMEMLIMIT is set) makes the collector work harder near it instead of
// letting the heap grow past it.
func TuneGC(log *slog.Logger, limitMiB int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	if os.Getenv("GOMEMLIMIT") == "" && limitMiB > 0 {
		debug.SetMemoryLimit(int64(limitMiB) << 20)
		log.Debug("go memory limit", "mib", limitMiB)
	}
}
