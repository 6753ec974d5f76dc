package stream_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestStreamCompression: an events stream created with compression s2
// stores its blocks compressed (fewer bytes on disk than the same
// messages uncompressed) and gives every message back as published; an
// existing stream keeps its compression whatever a later start asks; a
// compression the server does not know is refused before anything starts.
func TestStreamCompression(t *testing.T) {
	ctx := context.Background()
	stored := map[string]uint64{}
	for _, c := range []string{"none", "s2"} {
		n := testenv.StartNATS(t, "")
		if err := stream.Ensure(ctx, n.JS, stream.Config{Compression: c}); err != nil {
			t.Fatal(err)
		}
		var bodies []string
		// Past one message block (8 MiB): a block is compressed once full.
		for i := range 40000 {
			body := fmt.Sprintf(`{"uuid":"0190a1b2-c3d4-7e5f-8a9b-%012d","event":"$pageview","distinct_id":"user-%d","properties":{"$current_url":"https://app.example.com/pricing","$browser":"Chrome","$os":"Mac OS X"}}`, i, i%50)
			bodies = append(bodies, body)
			if _, err := stream.Publish(ctx, n.JS, 1, fmt.Sprint(i), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		s, err := n.JS.Stream(ctx, stream.Events)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]jetstream.StoreCompression{"none": jetstream.NoCompression, "s2": jetstream.S2Compression}[c]; info.Config.Compression != want {
			t.Fatalf("%s: stream compression %v", c, info.Config.Compression)
		}
		stored[c] = dirBytes(t, n.Dir)
		for _, seq := range []uint64{1, 777, 40000} {
			m, err := s.GetMsg(ctx, seq)
			if err != nil || string(m.Data) != bodies[seq-1] {
				t.Fatalf("%s: message %d: %q %v", c, seq, m.Data, err)
			}
		}
		// A later start asking for the other keeps the stream as it is.
		other := map[string]string{"none": "s2", "s2": "none"}[c]
		if err := stream.Ensure(ctx, n.JS, stream.Config{Compression: other}); err != nil {
			t.Fatal(err)
		}
		if info, err := s.Info(ctx); err != nil || info.Config.Compression != map[string]jetstream.StoreCompression{"none": jetstream.NoCompression, "s2": jetstream.S2Compression}[c] {
			t.Fatalf("%s: after a start asking for %s: %v %v", c, other, info.Config.Compression, err)
		}
	}
	t.Logf("bytes on disk: none %d, s2 %d", stored["none"], stored["s2"])
	if stored["s2"]*10 > stored["none"]*9 {
		t.Fatalf("s2 stored %d bytes, none %d: not compressed", stored["s2"], stored["none"])
	}
	if err := (stream.Config{Compression: "gzip"}).Validate(); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Fatalf("Validate(gzip): %v", err)
	}
}

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	var n uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += uint64(info.Size())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
