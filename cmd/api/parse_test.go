package main

import (
	"strings"
	"testing"
	"time"
)

// A malformed environment value stops the API at start, naming the
// variable.
func TestParseEnv(t *testing.T) {
	t.Setenv("API_WRITE_WAIT", "5")
	_, err := parse(nil)
	if err == nil || !strings.Contains(err.Error(), `API_WRITE_WAIT="5": not a duration`) {
		t.Fatalf("parse = %v, want it to refuse API_WRITE_WAIT", err)
	}
	t.Setenv("API_WRITE_WAIT", "2s")
	o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.writeWait != 2*time.Second {
		t.Errorf("write wait %s, want 2s from the environment", o.writeWait)
	}
}
