package chstore_test

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/statement"
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
		{"API key read", statement.KeyRead(ctx), "1"},
		{"fold lookup", statement.Loader(ctx), "2"},
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

// A store with Config.ThreadNice asks the server to run its statements at
// that niceness when the server has the setting (19.x on), under the
// statements' own settings too, and not at all when it lacks it (18.16,
// which refuses an unknown setting): its statements run either way.
func TestThreadNiceFollowsServer(t *testing.T) {
	base := testenv.ClickHouse(t)
	ctx := context.Background()
	var known uint64
	if err := base.Conn().QueryRow(ctx, "SELECT count() FROM system.settings WHERE name = 'os_thread_priority'").Scan(&known); err != nil {
		t.Fatal(err)
	}
	store, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: base.Database(), ThreadNice: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	want := 0
	if known > 0 {
		want = 7
	}
	if got := store.ThreadNice(); got != want {
		t.Fatalf("ThreadNice %d, want %d (server has os_thread_priority: %v)", got, want, known > 0)
	}
	// The fold's lookups carry settings of their own; the niceness stays.
	var got string
	q := "SELECT toString(count()) FROM system.one"
	if known > 0 {
		q = "SELECT value FROM system.settings WHERE name = 'os_thread_priority'"
	}
	if err := store.Conn().QueryRow(statement.Loader(ctx), q).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if wantVal := map[bool]string{true: "7", false: "1"}[known > 0]; got != wantVal {
		t.Errorf("statement answered %q, want %q", got, wantVal)
	}
	plain, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: base.Database()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if n := plain.ThreadNice(); n != 0 {
		t.Errorf("a store without ThreadNice reports %d", n)
	}
}
