package main

import (
	"strings"
	"testing"
	"time"
)

// A malformed environment value stops the deleter at start, naming the
// variable, for both commands.
func TestParseEnv(t *testing.T) {
	t.Setenv("DELETER_BATCH_SIZE", "ten")
	t.Setenv("DELETER_MUTATION_TIMEOUT", "1 hour")
	for _, withServer := range []bool{true, false} {
		_, err := parse("deleter", nil, withServer)
		if err == nil {
			t.Fatal("malformed DELETER_BATCH_SIZE and DELETER_MUTATION_TIMEOUT were accepted")
		}
		for _, want := range []string{`DELETER_BATCH_SIZE="ten": not an integer`, `DELETER_MUTATION_TIMEOUT="1 hour": not a duration`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	t.Setenv("DELETER_BATCH_SIZE", "10")
	t.Setenv("DELETER_MUTATION_TIMEOUT", "90s")
	o, err := parse("deleter", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.BatchSize != 10 || o.cfg.MutationTimeout != 90*time.Second {
		t.Errorf("config %+v: want batch size 10, mutation timeout 90s", o.cfg)
	}
}
