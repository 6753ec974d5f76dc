package transform

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/ingest"
)

// BenchmarkHook is the ingester hook's cost per event: with no chain (the
// price every event pays), with one trivial step (adds a property), and
// with a step that drops half the events (as the bench's transformations phase does, docs/performance.md).
func BenchmarkHook(b *testing.B) { benchmarkHook(b, false) }

// BenchmarkHookWide is BenchmarkHook on events shaped as the bench's (ten
// properties, as bench/dataset.go writes them).
func BenchmarkHookWide(b *testing.B) { benchmarkHook(b, true) }

func benchmarkHook(b *testing.B, wide bool) {
	ctx := context.Background()
	n, vs := natsVersions(b)
	for _, c := range []struct{ name, src string }{
		{"none", ""},
		{"trivial", `export function processEvent(e) { e.properties.added = 1; return e }`},
		{"drop-half", `export function processEvent(e) { return e.properties.i % 2 ? null : e }`},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, err := NewHook(ctx, n.JS, New(Limits{}, slog.New(slog.DiscardHandler), nil), 1, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				b.Fatal(err)
			}
			var in []ingest.HookInput
			project := uint64(len(c.name)) // a project per case: chains do not mix
			if c.src != "" {
				v, err := vs.Put(ctx, Version{Filename: "index.js", Source: c.src})
				if err != nil {
					b.Fatal(err)
				}
				ev, _ := event.Parse([]byte(fmt.Sprintf(`{"uuid":"0190c6c5-0000-7000-8000-000000000000","event":%q,"distinct_id":"$transformations","timestamp":"2026-11-20T10:00:00Z","properties":{%q:[{"plugin_config_id":1,"order":1,"version":%q}]}}`,
					event.SetTransformations, event.PropTransformations, v)))
				in = append(in, ingest.HookInput{Input: fold.Input{ProjectID: project, Seq: 1, Event: ev}, Command: true})
			}
			const batch = 1000
			for i := range batch {
				props := fmt.Sprintf(`{"i":%d,"$current_url":"https://example.com/a/b?c=d","$browser":"Firefox","$os":"Linux","plan":"pro"}`, i)
				if wide {
					// bench/dataset.go's commonProps: the bench's events.
					props = fmt.Sprintf(`{"$current_url":"https://app.example.com/pricing/%d?utm_source=newsletter&utm_campaign=c%d","$referrer":"https://www.search.example.org/?q=term%d","$browser":"Firefox","$os":"Linux","$screen_width":%d,"$lib":"web","$lib_version":"1.%d.0","$session_id":"%016x","$pathname":"/pricing","i":%d}`,
						i*7919%100000, i%50, i*31%10000, 1024+i%1024, i%100, i*2654435761, i)
				}
				ev, err := event.Parse([]byte(fmt.Sprintf(`{"uuid":"0190c6c5-0000-7000-8000-%012d","event":"$pageview","distinct_id":"user-%d","timestamp":"2026-11-20T10:00:00Z","properties":%s}`, i+1, i%50, props)))
				if err != nil {
					b.Fatal(err)
				}
				in = append(in, ingest.HookInput{Input: fold.Input{ProjectID: project, Seq: uint64(i + 2), Event: ev}})
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.Transform(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch)/1000, "µs/event")
		})
	}
}
