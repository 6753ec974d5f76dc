package appconfig

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestEnvReader(t *testing.T) {
	t.Setenv("T_INT", " 42 ")
	t.Setenv("T_BADINT", "5k")
	t.Setenv("T_EMPTY", "")
	t.Setenv("T_DUR", "250ms")
	t.Setenv("T_BADDUR", "5")
	var e EnvReader
	if got := e.Int("T_INT", 1); got != 42 {
		t.Errorf("Int(T_INT) = %d, want 42", got)
	}
	if got := e.Int("T_EMPTY", 7); got != 7 {
		t.Errorf("Int of an empty variable = %d, want the default 7", got)
	}
	if got := e.Int("T_UNSET_FOR_SURE", 8); got != 8 {
		t.Errorf("Int of an unset variable = %d, want the default 8", got)
	}
	if got := e.Duration("T_DUR", time.Second); got != 250*time.Millisecond {
		t.Errorf("Duration(T_DUR) = %s, want 250ms", got)
	}
	if err := e.Err(); err != nil {
		t.Fatalf("well-formed values: %v", err)
	}
	e.Int("T_BADINT", 1)
	e.Duration("T_BADDUR", time.Second)
	err := e.Err()
	if err == nil {
		t.Fatal("malformed values were accepted")
	}
	for _, want := range []string{`T_BADINT="5k": not an integer`, `T_BADDUR="5": not a duration`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// Common.Validate refuses a malformed variable read through its Env, even
// when every flag is fine.
func TestCommonValidateReportsEnv(t *testing.T) {
	t.Setenv("T_BATCH", "abc")
	var c Common
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.Bind(fs)
	n := fs.Int("batch", c.Env.Int("T_BATCH", 10), "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if *n != 10 {
		t.Errorf("flag default %d, want the fallback 10", *n)
	}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `T_BATCH="abc": not an integer`) {
		t.Fatalf("Validate = %v, want it to name T_BATCH", err)
	}
	if err := c.ValidateLogging(); err == nil {
		t.Fatal("ValidateLogging accepted a malformed variable")
	}
}

// NATS_REPLICAS: read, and refused out of range.
func TestNATSReplicas(t *testing.T) {
	for env, want := range map[string]string{"": "", "3": "", "0": "nats-replicas 0 out of range", "7": "nats-replicas 7 out of range", "x": `NATS_REPLICAS="x": not an integer`} {
		t.Setenv("NATS_REPLICAS", env)
		var c Common
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.Bind(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("NATS_REPLICAS=%q: %v", env, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("NATS_REPLICAS=%q: %v, want %q", env, err, want)
		}
	}
}
