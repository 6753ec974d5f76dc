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
