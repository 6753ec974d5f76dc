package proptime

import (
	"testing"
	"time"
)

func TestMoment(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	for _, c := range []struct {
		flag  any
		ms    int64
		aware bool
	}{
		{nil, ts.UnixMilli(), false},
		{true, ts.UnixMilli(), true},
		{false, ts.UnixMilli(), false},
		{"2020-01-01T00:00:00.5+01:00", time.Date(2019, 12, 31, 23, 0, 0, 500e6, time.UTC).UnixMilli(), true},
		{"2099-12-31T00:00:00Z", ts.UnixMilli(), true}, // never after the event
		{"2020-01-01", ts.UnixMilli(), false},          // not RFC 3339
		{"1969-12-31T23:59:59Z", ts.UnixMilli(), false},
		{1.0, ts.UnixMilli(), false},
	} {
		ms, aware := Moment(c.flag, ts)
		if ms != c.ms || aware != c.aware {
			t.Errorf("Moment(%#v) = %d %v, want %d %v", c.flag, ms, aware, c.ms, c.aware)
		}
	}
}

func TestEncode(t *testing.T) {
	if Encode(nil) != "" || Encode(Times{}) != "" {
		t.Fatal("no moments must encode as the empty string")
	}
	tm := Times{"b": 2, "a": -1, "é": 1 << 50}
	s := Encode(tm)
	if s != `{"a":-1,"b":2,"é":1125899906842624}` {
		t.Fatalf("Encode: %s", s)
	}
	back, err := Decode(s)
	if err != nil || len(back) != 3 || back["é"] != 1<<50 || back["a"] != -1 {
		t.Fatalf("Decode: %v %v", back, err)
	}
	if got, err := Decode(""); got != nil || err != nil {
		t.Fatalf(`Decode(""): %v %v`, got, err)
	}
	if got, err := Decode("{}"); got != nil || err != nil {
		t.Fatalf(`Decode("{}"): %v %v`, got, err)
	}
	if _, err := Decode(`{"a":"x"}`); err == nil {
		t.Fatal("a moment that is not an integer must not decode")
	}
}

func TestSetRecordsOnlyOnPersonsWithMoments(t *testing.T) {
	var tm Times
	if apply, changed := tm.Set("k", Write{Moment: 5}); !apply || changed || tm != nil {
		t.Fatalf("ordinary set without moments: %v %v %v", apply, changed, tm)
	}
	if apply, changed := tm.Set("k", Write{Moment: 5, Aware: true}); !apply || !changed || tm["k"] != 5 {
		t.Fatalf("aware set: %v %v %v", apply, changed, tm)
	}
	if apply, changed := tm.Set("k", Write{Moment: 4, Aware: true}); apply || changed {
		t.Fatalf("older aware set: %v %v", apply, changed)
	}
	if apply, changed := tm.Set("k", Write{Moment: 5, Aware: true}); !apply || changed {
		t.Fatalf("equal aware set: %v %v", apply, changed)
	}
	if apply, changed := tm.Set("j", Write{Moment: 1}); !apply || !changed || tm["j"] != 1 {
		t.Fatalf("ordinary set with moments: %v %v %v", apply, changed, tm)
	}
	if !tm.Unset("j") || tm.Unset("j") || len(tm) != 1 {
		t.Fatalf("unset: %v", tm)
	}
}
