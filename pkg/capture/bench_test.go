package capture

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/controlplane"
)

// BenchmarkDecodeAndValidate: the CPU cost of a 100-event /batch/ body
// before publishing (decode, envelopes, the ingester's validation).
func BenchmarkDecodeAndValidate(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"api_key":"phc_7","batch":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e%04d","event":"$pageview","distinct_id":"user-%d","timestamp":"2026-05-01T00:00:00.%03dZ","properties":{"$current_url":"https://shop.example/products/%d","$browser":"Firefox","$os":"Linux","$lib":"bench","amount":%d.5},"$set":{"plan":"pro","email":"user-%d@example.com"}}`, i, i, i, i, i, i)
	}
	sb.WriteString("]}")
	body := sb.String()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	now := time.Now()
	var arena []byte
	var bufs decodeBuffers
	for b.Loop() {
		batch, err := decode(Request{Body: strings.NewReader(body), Length: int64(len(body))}, 0, &bufs)
		if err != nil {
			b.Fatal(err)
		}
		// One arena reused, and the body's buffer, as the publisher's
		// pools do.
		arena = arena[:0]
		for i := range batch.Events {
			var err error
			if _, arena, err = appendEnvelope(&batch.Events[i], i, controlplane.Project{ID: 7}, now, batch, arena); err != nil {
				b.Fatal(err)
			}
		}
		batch.release()
	}
}
