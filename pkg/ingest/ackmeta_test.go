package ingest

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// ackReplies are FuzzAckMeta's seeds: both subject formats, and the
// malformed ones the client's parser refuses or reads as 0.
var ackReplies = []string{
	"$JS.ACK.EVENTS.ingester.1.42.42.1700000000000000000.0",
	"$JS.ACK._.ACCHASH.EVENTS.ingester.3.7.5.1700000000000000000.12.rand",
	"$JS.ACK.dom.hash.EVENTS.c.1.2.3.4.5",
	"$JS.ACK.EVENTS.c.x.2.3.4.5", "$JS.ACK.a.b.c.d.e.f.g.h.i.j", "$JS.ACK..........", "$JS.ACK.EVENTS.c.1.2.3.4", "",
	"$JS.ACK.S.C.1.18446744073709551616.2.3.4", "$JS.ACK.S.C.1.٣.2.3.4",
}

// FuzzAckMeta holds ackMeta to the client's Msg.Metadata: whatever ackMeta
// reads, Metadata reads too, with the same numbers (what it refuses goes to
// Metadata).
func FuzzAckMeta(f *testing.F) {
	for _, s := range ackReplies {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		got, ok := ackMeta(reply)
		if !ok {
			return
		}
		m, err := (&nats.Msg{Reply: reply, Sub: &nats.Subscription{}}).Metadata()
		if err != nil {
			t.Fatalf("%q: ackMeta read %+v, Metadata refused: %v", reply, got, err)
		}
		want := ackInfo{stream: m.Sequence.Stream, consumer: m.Sequence.Consumer, delivered: m.NumDelivered, pending: m.NumPending}
		if got != want {
			t.Fatalf("%q: ackMeta %+v, Metadata %+v", reply, got, want)
		}
	})
}

// TestAckMetaAllocs: reading a delivery's metadata allocates nothing.
func TestAckMetaAllocs(t *testing.T) {
	reply := "$JS.ACK._.ACCHASH.EVENTS.ingester.1.42.40.1700000000000000000.12.rand"
	var m ackInfo
	if a := testing.AllocsPerRun(100, func() { m, _ = ackMeta(reply) }); a != 0 || m != (ackInfo{stream: 42, consumer: 40, delivered: 1, pending: 12}) {
		t.Fatalf("%.0f allocations, %+v", a, m)
	}
}
