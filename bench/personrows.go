package main

import (
	"fmt"
	"strings"
)

// personRowsModel estimates, from the generated events alone, the person
// rows a fold writes when it flushes every `window` events: one row per
// distinct id created or changed in the window (a merge also writes its
// source). Person identity is approximated by distinct id; the model is
// checked against the ingester's metric at its own batch size. It shows
// how the person rows target depends on how often persons are flushed.
func personRowsModel(events []genEvent, windows []int) map[string]float64 {
	out := map[string]float64{}
	mutating := 0
	for _, e := range events {
		if e.Mutating {
			mutating++
		}
	}
	for _, w := range windows {
		seen := make(map[string]bool, 1<<16)
		changed := map[string]bool{}
		rows := 0
		for i, e := range events {
			if !seen[e.DistinctID] {
				seen[e.DistinctID] = true
				changed[e.DistinctID] = true
			}
			if e.Mutating {
				changed[e.DistinctID] = true
				if other := mergeOther(e); other != "" {
					seen[other] = true
					changed[other] = true
				}
			}
			if (i+1)%w == 0 || i == len(events)-1 {
				rows += len(changed)
				clear(changed)
			}
		}
		out[fmt.Sprintf("flush_every_%d_events", w)] = float64(rows) / float64(max(1, mutating))
	}
	return out
}

// mergeOther is the id an $identify or $create_alias merges in.
func mergeOther(e genEvent) string {
	for _, key := range []string{`"$anon_distinct_id":"`, `"alias":"`} {
		if _, rest, ok := strings.Cut(e.Props, key); ok {
			v, _, _ := strings.Cut(rest, `"`)
			return v
		}
	}
	return ""
}
