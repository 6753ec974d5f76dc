package person

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestUUIDFor(t *testing.T) {
	// uuid5(namespace, "1:alice"), computed independently of this code
	// (Python's uuid.uuid5).
	a, b := UUIDFor(1, "alice"), UUIDFor(1, "alice")
	if a.String() != "a6e21b41-7154-5e34-ae20-47017c663318" || a != b || a == UUIDFor(2, "alice") {
		t.Fatalf("uuid rule: %s %s", a, b)
	}
}

func TestUUIDForReuse(t *testing.T) {
	// uuid5(ReuseNamespace, "1:alice:7") by Python's uuid.uuid5; the same
	// text in Namespace (the person first created from id "alice:7") is
	// 0ad93e9e-1c62-5fb8-9f55-0b672e33f84d.
	a := UUIDForReuse(1, "alice", 7)
	if a.String() != "3e377512-5a03-5dcf-a824-532fed94f476" || a == UUIDFor(1, "alice:7") || a == UUIDForReuse(1, "alice", 8) || a == UUIDForReuse(2, "alice", 7) {
		t.Fatalf("reuse uuid rule: %s", a)
	}
	if UUIDFor(1, "alice:7").String() != "0ad93e9e-1c62-5fb8-9f55-0b672e33f84d" {
		t.Fatalf("uuid rule: %s", UUIDFor(1, "alice:7"))
	}
}

func TestIllegalDistinctID(t *testing.T) {
	for id, want := range map[string]bool{
		"anonymous": true, "Anonymous": true, "GUEST": true, "distinctid": true, "distinct_id": true, "id": true,
		"not_authenticated": true, "email": true, "undefined": true, "true": true, "FALSE": true,
		"[object Object]": true, "NaN": true, "None": true, "none": true, "null": true, "0": true,
		"": true, "  ": true, `"null"`: true, `'undefined'`: true, `"  "`: true,
		"nan": false, "NULL": false, "user-1": false, "00": false, "alice@example.com": false, `"alice"`: false,
	} {
		if got := IllegalDistinctID(id); got != want {
			t.Errorf("IllegalDistinctID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestDisplayName(t *testing.T) {
	props := func(js string) map[string]any {
		m := map[string]any{}
		_ = json.Unmarshal([]byte(js), &m)
		return m
	}
	anon := "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"
	cases := []struct {
		props string
		ids   []string
		want  string
	}{
		{`{"email":"a@x.io","name":"A"}`, []string{"u"}, "a@x.io"},
		{`{"email":"","Email":"B@x.io"}`, []string{"u"}, "B@x.io"},
		{`{"username":"carol"}`, []string{"u"}, "carol"},
		{`{"plan":"pro"}`, []string{anon, "dave"}, "dave"},
		{`{}`, []string{anon}, "42"},
		{`{"name":7}`, nil, "7"},
	}
	for _, c := range cases {
		if got := DisplayName(props(c.props), c.ids, 42); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.props, c.ids, got, c.want)
		}
	}
}

func TestSortDistinctIDs(t *testing.T) {
	ids := []string{"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00", "b", "abc12-d-e-f-g", "a"}
	SortDistinctIDs(ids)
	if fmt.Sprint(ids) != "[b a 0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00 abc12-d-e-f-g]" {
		t.Fatalf("order: %v", ids)
	}
}
