package chstore_test

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// The API's key reads outrank the fold's lookups on the server (the
// `priority` setting reaches ClickHouse with each statement; 1 is the
// highest), and other statements take no part (0).
func TestReadPriorities(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"API key read", chstore.KeyReadCtx(ctx), "1"},
		{"fold lookup", chstore.LoaderCtx(ctx), "2"},
		{"other", ctx, "0"},
	} {
		var got string
		if err := store.Conn().QueryRow(c.ctx, "SELECT value FROM system.settings WHERE name = 'priority'").Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: priority %s, want %s", c.name, got, c.want)
		}
	}
}
