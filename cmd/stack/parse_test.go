package main

import (
	"strings"
	"testing"
)

// A malformed environment value stops the stack at start, naming the
// variable, instead of starting NATS on the default port.
func TestParseEnv(t *testing.T) {
	t.Setenv("STACK_NATS_PORT", "42x")
	t.Setenv("LOG_LEVEL", "loud")
	_, err := parse(nil)
	if err == nil {
		t.Fatal("malformed STACK_NATS_PORT and LOG_LEVEL were accepted")
	}
	for _, want := range []string{`STACK_NATS_PORT="42x": not an integer`, `log-level "loud"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Setenv("STACK_NATS_PORT", "4333")
	t.Setenv("LOG_LEVEL", "debug")
	cfg, err := parse([]string{"-clickhouse-port", "19001"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.natsPort != 4333 || cfg.chTCPPort != 19001 {
		t.Errorf("nats port %d, clickhouse port %d: want 4333 (environment) and 19001 (flag)", cfg.natsPort, cfg.chTCPPort)
	}
}

// The stack's ingester runs the write lane unless INGESTER_WRITE_LANE=false
// (or -write-lane=false) says otherwise.
func TestParseWriteLane(t *testing.T) {
	lane := func(env string, args ...string) bool {
		t.Helper()
		t.Setenv("INGESTER_WRITE_LANE", env)
		cfg, err := parse(args)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.writeLane
	}
	if !lane("") || lane("false") || lane("", "-write-lane=false") {
		t.Errorf("write lane: default %v, INGESTER_WRITE_LANE=false %v, -write-lane=false %v; want true, false, false",
			lane(""), lane("false"), lane("", "-write-lane=false"))
	}
}
