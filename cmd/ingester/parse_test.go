package main

import (
	"strings"
	"testing"
	"time"
)

// A malformed environment value stops the ingester at start, naming the
// variable; well-formed ones are the flags' defaults, and flags win.
func TestParseRunEnv(t *testing.T) {
	t.Setenv("INGESTER_BATCH_SIZE", "abc")
	t.Setenv("INGESTER_SHUTDOWN_GRACE", "3")
	_, err := parseRun(nil)
	if err == nil {
		t.Fatal("malformed INGESTER_BATCH_SIZE and INGESTER_SHUTDOWN_GRACE were accepted")
	}
	for _, want := range []string{`INGESTER_BATCH_SIZE="abc": not an integer`, `INGESTER_SHUTDOWN_GRACE="3": not a duration`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	t.Setenv("INGESTER_BATCH_SIZE", "150")
	t.Setenv("INGESTER_SHUTDOWN_GRACE", "3s")
	o, err := parseRun([]string{"-batch-wait", "7ms"})
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.BatchSize != 150 || o.cfg.ShutdownGrace != 3*time.Second || o.cfg.BatchWait != 7*time.Millisecond {
		t.Errorf("config %+v: want batch size 150 and grace 3s from the environment, batch wait 7ms from the flag", o.cfg)
	}
}

// The write lane is on by default; INGESTER_WRITE_LANE=false or
// -write-lane=false turns it off, and the flag wins over the environment.
func TestParseRunWriteLane(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		want bool
	}{
		{"", nil, true},
		{"false", nil, false},
		{"0", nil, false},
		{"true", nil, true},
		{"", []string{"-write-lane=false"}, false},
		{"false", []string{"-write-lane"}, true},
	} {
		t.Setenv("INGESTER_WRITE_LANE", c.env)
		o, err := parseRun(c.args)
		if err != nil {
			t.Fatal(err)
		}
		if o.cfg.WriteLane != c.want {
			t.Errorf("INGESTER_WRITE_LANE=%q %v: write lane %v, want %v", c.env, c.args, o.cfg.WriteLane, c.want)
		}
	}
	t.Setenv("INGESTER_WRITE_LANE", "maybe")
	if _, err := parseRun(nil); err == nil || !strings.Contains(err.Error(), `INGESTER_WRITE_LANE="maybe": not a bool`) {
		t.Errorf("INGESTER_WRITE_LANE=maybe: %v; want it refused, named", err)
	}
}

// The ingester runs below the API's CPU priority by default
// (process.IngesterNice); INGESTER_NICE or -nice changes it, 0 keeps the
// process as started, and a value outside 0..19 is refused, named.
func TestParseRunNice(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		want int
	}{
		{"", nil, 10},
		{"0", nil, 0},
		{"5", nil, 5},
		{"5", []string{"-nice", "19"}, 19},
	} {
		t.Setenv("INGESTER_NICE", c.env)
		o, err := parseRun(c.args)
		if err != nil {
			t.Fatal(err)
		}
		if o.nice != c.want {
			t.Errorf("INGESTER_NICE=%q %v: nice %d, want %d", c.env, c.args, o.nice, c.want)
		}
	}
	t.Setenv("INGESTER_NICE", "")
	for _, bad := range []string{"-1", "20"} {
		if _, err := parseRun([]string{"-nice", bad}); err == nil || !strings.Contains(err.Error(), "-nice "+bad+" out of range 0..19") {
			t.Errorf("-nice %s: %v; want it refused, named", bad, err)
		}
	}
}

// `ingester migrate` bounds each statement at -statement-timeout
// (MIGRATE_STATEMENT_TIMEOUT), hours by default, and refuses a
// malformed or non-positive one.
func TestParseMigrateStatementTimeout(t *testing.T) {
	c, err := parseMigrate(nil)
	if err != nil || c.MigrationTimeout != 6*time.Hour {
		t.Fatalf("default: %s, %v; want 6h", c.MigrationTimeout, err)
	}
	t.Setenv("MIGRATE_STATEMENT_TIMEOUT", "90m")
	if c, err = parseMigrate(nil); err != nil || c.MigrationTimeout != 90*time.Minute {
		t.Fatalf("from the environment: %s, %v; want 90m", c.MigrationTimeout, err)
	}
	if c, err = parseMigrate([]string{"-statement-timeout", "2h"}); err != nil || c.MigrationTimeout != 2*time.Hour {
		t.Fatalf("flag over the environment: %s, %v; want 2h", c.MigrationTimeout, err)
	}
	for _, bad := range []struct{ env, want string }{{"12", `MIGRATE_STATEMENT_TIMEOUT="12": not a duration`}, {"-1s", "want a positive duration"}} {
		t.Setenv("MIGRATE_STATEMENT_TIMEOUT", bad.env)
		if _, err := parseMigrate(nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("MIGRATE_STATEMENT_TIMEOUT=%s: %v; want an error saying %q", bad.env, err, bad.want)
		}
	}
}
