package insight

import (
	"net/url"
	"testing"
	"time"
)

// TestRangeFromBeforeTheEpoch: a range starting before 1970 (a relative
// date_from such as -60y, or 1970-01-01 in a zone east of UTC) holds
// every event up to its end. toDateTime of a negative number wraps to
// 2106 on ClickHouse 18.16, which made the scan empty.
func TestRangeFromBeforeTheEpoch(t *testing.T) {
	st, day0 := dailyEvents(t)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	day := day0.AddDate(0, 0, 20).Format(time.DateOnly)
	for _, c := range []struct {
		from string
		loc  *time.Location
	}{{"-60y", time.UTC}, {"1970-01-01", tokyo}} {
		q := url.Values{"events": {`[{"id":"$pageview","type":"events"}]`}, "entity_id": {"$pageview"}, "entity_type": {"events"},
			"date_from": {c.from}, "date_to": {day}, "stickiness_days": {"21"}}
		f, err := ParseFilter(q, c.loc, day0.AddDate(0, 1, 0))
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Stickiness(t.Context(), 1, f, q, Page{})
		if err != nil {
			t.Fatal(err)
		}
		// Every person is active every day: 21 days up to date_to.
		if len(got) != dailyPersons {
			t.Errorf("date_from %s (%s): %d persons active on 21 days, want %d", c.from, c.loc, len(got), dailyPersons)
		}
	}
}
