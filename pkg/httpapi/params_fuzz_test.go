package httpapi

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/cohort"
)

// FuzzRequestInputs feeds arbitrary query strings and bodies to every parser
// of request input that needs no backing service.
func FuzzRequestInputs(f *testing.F) {
	f.Add("limit=10&offset=5&format=csv&delete_events=yes&date_from=-7d", `{"properties":{"a":1}}`)
	f.Add("limit=-1&offset=x&format=xml&date_from=2026-13-40", `[1,2]`)
	f.Add("date_from=all&date_to=2026-01-02T03:04:05Z", `{"key":"k","value":null}`)
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, p := range []paging{offsetPaging, activityPaging} {
			w, err := paginate(q, p)
			if err == nil && (w.Limit < 1 || w.Limit > p.maxLimit || w.Offset < 0 || w.Offset > MaxOffset || w.Page < 1) {
				t.Fatalf("paginate(%q) = %+v", query, w)
			}
			if start, end := w.bounds(50); err == nil && (start < 0 || end < start || end > 50) {
				t.Fatalf("bounds of %+v: %d..%d", w, start, end)
			}
		}
		_, _ = parseBool("delete_events", q.Get("delete_events"))
		if d, ok := parseDate(q.Get("date_from"), time.Now()); ok && d.IsZero() {
			t.Fatalf("zero date from %q", q.Get("date_from"))
		}
		r := httptest.NewRequest("POST", "/x?"+q.Encode(), strings.NewReader(body))
		r.Body = &guardedBody{inner: r.Body, ctx: r.Context(), slots: newBodySlots(1, time.Second), limit: personBody}
		if m, err := readObject(r); err == nil && m == nil {
			t.Fatal("nil body map without error")
		}
		_, _ = wantsCSV(r)
	})
}

// FuzzReadMemberCSV: a static cohort's CSV upload never panics; a refusal
// is a 400 naming csv; an accepted file gives trimmed, non-empty ids of one
// kind, no more than a create takes.
func FuzzReadMemberCSV(f *testing.F) {
	for _, s := range []string{"person_id\n1\n2\n", "distinct_id\r\na\r\n\r\nb", "\ufeffu1,x\n\"u2\"\n", "\"unterminated\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		field, ids, err := readMemberCSV(strings.NewReader(body))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Attr == nil || *e.Attr != "csv" {
				t.Fatalf("refusal %v is not a 400 naming csv", err)
			}
			return
		}
		if field != "person_ids" && field != "distinct_ids" || len(ids) == 0 || len(ids) > cohort.MaxMembersPerCreate {
			t.Fatalf("field %q, %d ids", field, len(ids))
		}
		for _, id := range ids {
			if id == "" || strings.TrimSpace(id) != id {
				t.Fatalf("id %q is not trimmed", id)
			}
		}
	})
}
