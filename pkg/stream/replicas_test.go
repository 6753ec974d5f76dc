package stream_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/transform"
)

// TestReplicatedBuckets: on a 3-node cluster, the buckets the API's
// packages create (they name no replica count) get the configured
// replicas through stream.Replicated; a bucket that names its own keeps
// them.
func TestReplicatedBuckets(t *testing.T) {
	ctx := context.Background()
	c := testenv.StartCluster(t, 3)
	js := stream.Replicated(c.JS, 3)
	cp, err := controlplane.Open(ctx, js, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if _, err := transform.OpenVersions(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "one", Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{
		"KV_" + controlplane.BucketOrganizations: 3, "KV_" + controlplane.BucketKeys: 3,
		"OBJ_" + transform.ObjectVersions: 3, "KV_one": 1,
	} {
		s, err := c.JS.Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := s.CachedInfo().Config.Replicas; got != want {
			t.Errorf("%s has %d replicas, want %d", name, got, want)
		}
	}
}
