package transform

import (
	"context"
	"testing"
)

// BenchmarkTrivial is the per-event cost of one enabled transformation
// that adds a property (the bench's trivial transformation), for the ingest budget.
func BenchmarkTrivial(b *testing.B) {
	r := New(Limits{}, nil, nil)
	chain := []Step{{ConfigID: 1, Filename: "index.js", Source: `exports.processEvent = (e) => { e.properties.added = 1; return e }`}}
	ev := sample("pageview")
	ctx := context.Background()
	for b.Loop() {
		if res := r.Run(ctx, chain, ev); res.Event == nil || res.Steps[0].Outcome != OutcomeOK {
			b.Fatal(res.Steps)
		}
	}
}
