package insight

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Interval is the bucket size of a query.
type Interval string

// Intervals.
const (
	Hour  Interval = "hour"
	Day   Interval = "day"
	Week  Interval = "week"
	Month Interval = "month"
)

// parseInterval reads interval case-insensitively; "minute" is read as
// hour (PostHog does the same), "" is day.
func parseInterval(s string) (Interval, error) {
	switch strings.ToLower(s) {
	case "", "day":
		return Day, nil
	case "hour", "minute":
		return Hour, nil
	case "week":
		return Week, nil
	case "month":
		return Month, nil
	}
	return "", invalidf("interval", "interval must be hour, day, week or month, not %q.", s)
}

// Trunc is the start of t's interval in loc. Weeks start on Monday.
// Hours are cut on the local clock, so zones with a half-hour offset get
// local hours; a day may be 23 or 25 hours long across a DST change.
func (iv Interval) Trunc(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	switch iv {
	case Hour:
		_, off := t.Zone()
		shift := time.Duration(off) * time.Second
		return t.Add(shift).Truncate(time.Hour).Add(-shift).In(loc)
	case Week:
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	default:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	}
}

// Next is the start of the interval after the one starting at start.
func (iv Interval) Next(start time.Time) time.Time { return iv.add(start, 1) }

// Prev is the start of the interval before the one starting at start.
func (iv Interval) Prev(start time.Time) time.Time { return iv.add(start, -1) }

func (iv Interval) add(start time.Time, n int) time.Time {
	switch iv {
	case Hour:
		return start.Add(time.Duration(n) * time.Hour)
	case Week:
		return start.AddDate(0, 0, 7*n)
	case Month:
		return start.AddDate(0, n, 0)
	default:
		return start.AddDate(0, 0, n)
	}
}

// relative is the anchored grammar of relative dates: optional "-",
// optional count, unit, optional Start/End.
var relative = regexp.MustCompile(`^(-?)([0-9]{0,6})([hdwmqyMs])(Start|End)?$`)

var absoluteLayouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04",
	"2006-1-2",
}

// parseDate reads an absolute date (local to loc unless it has an offset)
// or a relative one (counted back from now in loc).
func parseDate(attr, s string, now time.Time, loc *time.Location) (t time.Time, err error) {
	now = now.In(loc)
	if m := relative.FindStringSubmatch(s); m != nil {
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		} else if m[1] == "" {
			n = 0 // "dStart": this day; "3d" (no minus) is 3 days ago, as in PostHog
		}
		return relativeDate(now, n, m[3], m[4]), nil
	}
	v := strings.Replace(s, " ", "T", 1)
	for _, layout := range absoluteLayouts {
		var t time.Time
		var err error
		if strings.Contains(layout, "Z07") {
			t, err = time.Parse(layout, v)
		} else {
			t, err = time.ParseInLocation(layout, v, loc)
		}
		if err == nil {
			if t.Year() < 1970 || t.Year() > 2105 {
				return time.Time{}, invalidf(attr, "%s %q is out of range (1970 to 2105).", attr, s)
			}
			return t.In(loc), nil
		}
	}
	return time.Time{}, invalidf(attr, "%s %q is neither a date (2020-01-31, 2020-01-31T10:00:00[+01:00]) nor a relative date (-7d, -1w, -3m, -1y, -24h, dStart, mStart, ...).", attr, s)
}

// relativeDate is now minus n units, then pinned by Start/End.
func relativeDate(now time.Time, n int, unit, pin string) time.Time {
	var t time.Time
	switch unit {
	case "h":
		t = now.Add(-time.Duration(n) * time.Hour)
	case "d":
		t = now.AddDate(0, 0, -n)
	case "w":
		t = now.AddDate(0, 0, -7*n)
	case "m":
		t = addMonthsClamped(now, -n)
	case "q":
		t = now.AddDate(0, 0, -7*13*n)
	case "y":
		t = addMonthsClamped(now, -12*n)
	case "M":
		t = now.Add(-time.Duration(n) * time.Minute)
	default: // "s"
		t = now.Add(-time.Duration(n) * time.Second)
	}
	loc := t.Location()
	switch {
	case pin == "Start" && unit == "h":
		return Hour.Trunc(t, loc)
	case pin == "End" && unit == "h":
		return Hour.Next(Hour.Trunc(t, loc)).Add(-time.Microsecond)
	case pin == "Start" && unit == "m":
		return Month.Trunc(t, loc)
	case pin == "End" && unit == "m":
		return Month.Next(Month.Trunc(t, loc)).Add(-time.Microsecond)
	case pin == "Start" && unit == "y":
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, loc)
	case pin == "End" && unit == "y":
		return time.Date(t.Year(), 12, 31, 23, 59, 59, 999999000, loc)
	case pin == "Start":
		return Day.Trunc(t, loc)
	case pin == "End":
		return Day.Next(Day.Trunc(t, loc)).Add(-time.Microsecond)
	}
	return t
}

// addMonthsClamped adds months keeping the day, clamped to the month's
// last day (Mar 31 - 1 month = Feb 29, not Mar 2).
func addMonthsClamped(t time.Time, months int) time.Time {
	first := time.Date(t.Year(), t.Month(), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location()).AddDate(0, months, 0)
	last := time.Date(first.Year(), first.Month()+1, 0, 0, 0, 0, 0, t.Location()).Day()
	return time.Date(first.Year(), first.Month(), min(t.Day(), last), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
}

// Range is a half-open time range [From, To). All has no lower bound.
type Range struct {
	From, To time.Time
	All      bool
}

// resolveRange reads date_from/date_to and rounds them per §14.2 of the
// reference: From down to the start of its interval, To up to the next
// interval's start (exclusive). explicit keeps both as given, To
// inclusive to the second.
func resolveRange(from, to string, explicit bool, iv Interval, now time.Time, loc *time.Location) (Range, error) {
	var r Range
	var err error
	switch from {
	case "all":
		r.All = true
	case "":
		r.From = Day.Trunc(now.In(loc), loc).AddDate(0, 0, -7)
	default:
		if r.From, err = parseDate("date_from", from, now, loc); err != nil {
			return Range{}, err
		}
	}
	if to == "" {
		r.To = now.In(loc)
	} else if r.To, err = parseDate("date_to", to, now, loc); err != nil {
		return Range{}, err
	}
	if explicit {
		r.To = r.To.Truncate(time.Second).Add(time.Second)
	} else {
		if !r.All {
			r.From = iv.Trunc(r.From, loc)
		}
		r.To = iv.Next(iv.Trunc(r.To, loc))
	}
	// A range with date_from after date_to is empty, not an error: the
	// frontend asks for weekly/monthly active persons of a point with
	// date_from = the point + 1 day and date_to = the point, and trends
	// then takes its own lower bound (PostHog does the same).
	return r, nil
}
