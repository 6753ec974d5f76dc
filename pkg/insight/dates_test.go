package insight

import (
	"testing"
	"time"
)

func TestBucketsAcrossDST(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	// 2021-03-28: clocks go 02:00 -> 03:00, the local day is 23 hours.
	start := Day.Trunc(time.Date(2021, 3, 28, 20, 0, 0, 0, time.UTC), berlin)
	if got := Day.Next(start).Sub(start); got != 23*time.Hour {
		t.Fatalf("DST day is %s long", got)
	}
	// 23:30 UTC on the 27th is 00:30 local on the 28th.
	if d := Day.Trunc(time.Date(2021, 3, 27, 23, 30, 0, 0, time.UTC), berlin); d.Day() != 28 {
		t.Fatalf("local day %v", d)
	}
	if w := Week.Trunc(time.Date(2021, 3, 28, 12, 0, 0, 0, berlin), berlin); w.Weekday() != time.Monday || w.Day() != 22 {
		t.Fatalf("week start %v", w)
	}
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	if h := Hour.Trunc(time.Date(2021, 3, 1, 10, 10, 0, 0, time.UTC), kolkata); h.Minute() != 0 || h.In(kolkata).Hour() != 15 {
		t.Fatalf("local hour %v", h.In(kolkata))
	}
}

func TestResolveRange(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	cases := []struct {
		from, to string
		iv       Interval
		want     [2]string
	}{
		{"", "", Day, [2]string{"2026-11-16T00:00:00Z", "2026-11-24T00:00:00Z"}},
		{"2020-01-15", "2020-01-15", Day, [2]string{"2020-01-15T00:00:00Z", "2020-01-16T00:00:00Z"}},
		{"2020-01-15", "2020-02-03", Week, [2]string{"2020-01-13T00:00:00Z", "2020-02-10T00:00:00Z"}},
		{"2020-01-15", "2020-02-03", Month, [2]string{"2020-01-01T00:00:00Z", "2020-03-01T00:00:00Z"}},
		{"2026-11-10T10:20:00", "2026-11-10T10:00:00", Hour, [2]string{"2026-11-10T10:00:00Z", "2026-11-10T11:00:00Z"}},
		{"-1mStart", "-1mEnd", Day, [2]string{"2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z"}},
	}
	for _, c := range cases {
		r, err := resolveRange(c.from, c.to, false, c.iv, now, time.UTC)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if got := [2]string{r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339)}; got != c.want {
			t.Errorf("%s..%s %s: %v, want %v", c.from, c.to, c.iv, got, c.want)
		}
	}
	for _, bad := range []string{"yesterday", "-7x", "2020-13-01", "x-7d"} {
		if _, err := resolveRange(bad, "", false, Day, now, time.UTC); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
