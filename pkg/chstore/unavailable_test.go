package chstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestUnavailableWhileClickHouseIsDown stops a private ClickHouse under a
// live store: every read fails promptly with ErrUnavailable (not a hang,
// not an unclassified error), and the same store answers again once the
// server is back on the same port.
func TestUnavailableWhileClickHouseIsDown(t *testing.T) {
	if os.Getenv("CLICKHOUSE_ADDR") != "" {
		t.Skip("needs a private ClickHouse it may stop")
	}
	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tcp, err := chlocal.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := chlocal.Start(ctx, filepath.Join(dir, "ch"), tcp, 0, logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	store, err := chstore.Open(ctx, chstore.Config{Addr: srv.Addr(), Database: "down"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	log := activity.New(store.Conn())
	reads := map[string]func() error{
		"ping": func() error { return store.Ping(ctx) },
		"list": func() error {
			_, _, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: 1, Search: "x", Limit: 10})
			return err
		},
		"retrieve": func() error {
			_, err := store.GetPerson(ctx, 1, 1)
			if errors.Is(err, chstore.ErrNotFound) {
				return nil
			}
			return err
		},
		"each": func() error {
			return store.EachPerson(ctx, chstore.ListQuery{ProjectID: 1}, func(chstore.PersonRecord) error { return nil })
		},
		"timeline": func() error { _, err := store.PersonEvents(ctx, 1, []string{"a"}, time.Now()); return err },
		"activity": func() error {
			_, _, err := log.List(ctx, activity.Query{OrganizationID: "o", Scope: "Person", Limit: 10, Page: 1})
			return err
		},
		"committed": func() error { _, err := store.LastCommitted(ctx, "c"); return err },
		"load":      func() error { _, err := store.LoadPersons(ctx, 1, []uint64{1}); return err },
	}
	for name, read := range reads {
		if err := read(); err != nil {
			t.Fatalf("%s with the server up: %v", name, err)
		}
	}

	srv.Stop()
	for name, read := range reads {
		start := time.Now()
		err := read()
		if !errors.Is(err, statement.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s took %s to fail", name, took)
		}
	}

	srv, err = chlocal.Start(ctx, filepath.Join(dir, "ch"), tcp, 0, logFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, read := range reads {
		if err := read(); err != nil {
			t.Errorf("%s after the restart: %v", name, err)
		}
	}
}

// TestOverloadIsUnavailable: ClickHouse's own refusals under load (too
// many simultaneous queries, a statement over its time limit) are
// ErrUnavailable; a bad statement is not.
func TestOverloadIsUnavailable(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	slow := make(chan error, 1)
	go func() { slow <- store.Conn().Exec(ctx, "SELECT sleep(2)") }()
	time.Sleep(300 * time.Millisecond)
	limited := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_concurrent_queries_for_user": 1}))
	var n uint64
	err := store.Conn().QueryRow(limited, "SELECT count() FROM system.one").Scan(&n)
	var ex *clickhouse.Exception
	if !errors.Is(err, statement.ErrUnavailable) || !errors.As(err, &ex) || ex.Code != 202 {
		t.Errorf("over the concurrent query limit: %v", err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	timed := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_execution_time": 1}))
	err = store.Conn().QueryRow(timed, "SELECT count() FROM system.numbers").Scan(&n)
	if !errors.Is(err, statement.ErrUnavailable) || !errors.As(err, &ex) || ex.Code != 159 {
		t.Errorf("over max_execution_time: %v", err)
	}
	err = store.Conn().QueryRow(ctx, "SELECT no_such_column FROM system.one").Scan(&n)
	if err == nil || errors.Is(err, statement.ErrUnavailable) {
		t.Errorf("a bad statement: %v", err)
	}
	if err := store.Conn().Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPoolWaitIsBounded: with every connection busy, a statement waits
// AcquireTimeout for one and then fails with ErrUnavailable; the slot comes
// back when the busy statement's rows are closed.
func TestPoolWaitIsBounded(t *testing.T) {
	ctx := context.Background()
	store, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), MaxOpenConns: 1, AcquireTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rows, err := store.Conn().Query(ctx, "SELECT number FROM system.numbers LIMIT 10")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = store.Ping(ctx)
	if took := time.Since(start); !errors.Is(err, statement.ErrUnavailable) || took < 200*time.Millisecond || took > 2*time.Second {
		t.Fatalf("with the only connection busy: %v after %s", err, took)
	}
	rows.Close()
	if err := store.Ping(ctx); err != nil {
		t.Fatalf("after the busy statement ended: %v", err)
	}
}

// TestStaleConnectionsAfterARestart: connections that sat idle in the pool
// while ClickHouse restarted are broken; reads after the restart must not
// fail on them (the driver replaces a broken idle connection when it hands
// it out; this keeps it so).
func TestStaleConnectionsAfterARestart(t *testing.T) {
	if os.Getenv("CLICKHOUSE_ADDR") != "" {
		t.Skip("needs a private ClickHouse it may restart")
	}
	ch := testenv.StartPrivateClickHouse(t)
	store := ch.Store(t, "stale")
	ctx := context.Background()
	burst := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Held long enough that the burst needs 16 connections.
				var n uint8
				errs[i] = store.Conn().QueryRow(ctx, "SELECT sleep(0.2)").Scan(&n)
			}()
		}
		wg.Wait()
		return errs
	}
	for _, err := range burst() { // fills the pool with idle connections
		if err != nil {
			t.Fatal(err)
		}
	}
	ch.Kill()
	ch.Restart(t)
	for i, err := range burst() {
		if err != nil {
			t.Errorf("read %d after the restart: %v", i, err)
		}
	}
}
