package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/personhub/personhub/pkg/testenv/jsonstyle"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:                     `{}`,
		" \r\n\t{ } \n":          `{}`,
		`{"$browser": "Chrome"}`: `{"$browser":"Chrome"}`,
		`{"$browser" : "Chrome" , "n" : [ 1 , 2.50 , -0 , 1E+2 ] }`:                         `{"$browser":"Chrome","n":[1,2.50,-0,1E+2]}`,
		"{\n  \"a\": {\n    \"b\": [\n      true,\n      null\n    ]\n  }\n}":               `{"a":{"b":[true,null]}}`,
		`{"\u0024browser":"\u0043hrome"}`:                                                   `{"$browser":"Chrome"}`,
		`{"z":1,"a":2,"m":3}`:                                                               `{"z":1,"a":2,"m":3}`,
		`{"url":"https:\/\/example.com\/a?b=1&c=<d>"}`:                                      `{"url":"https://example.com/a?b=1&c=<d>"}`,
		`{"h":"\u003cb\u003e \u0026amp;"}`:                                                  `{"h":"<b> &amp;"}`,
		`{"q":"\"\\\/\b\f\n\r\t"}`:                                                          `{"q":"\"\\/\b\f\n\r\t"}`,
		`{"c":"\u0000\u001F\u001f\u0008\u000a\u0022\u005c\u007f"}`:                          `{"c":"\u0000\u001f\u001f\b\n\"\\` + "\x7f" + `"}`,
		`{"u":"\u00e9\u00E9 caf\u00e9 \ud83d\ude00 \u2028"}`:                                `{"u":"éé café 😀 ` + "\u2028" + `"}`,
		`{"s":"\ud800 \udc00 \ud800\u0041 \udc00\ud800"}`:                                   `{"s":"� � �A ��"}`,
		"{\"bad\":\"a\xffb\xc3\"}":                                                          `{"bad":"a�b�"}`,
		`{"a":1,"b":2,"a":3}`:                                                               `{"b":2,"a":3}`,
		`{"a":1,"\u0061":2}`:                                                                `{"a":2}`,
		`{"a":{"x":1,"x":2},"b":0,"a":{"y":[{"k":1,"k":{"k":2,"k":3}}]}}`:                   `{"b":0,"a":{"y":[{"k":{"k":3}}]}}`,
		`[{"a":1,"a":2},{"a":3}]`:                                                           `[{"a":2},{"a":3}]`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"a":9,"i":{"a":0,"a":{}},"b":11}`: `{"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"a":9,"i":{"a":{}},"b":11}`,
		`"x"`:     `"x"`,
		` 12.50 `: `12.50`,
		`null`:    `null`,
	} {
		got, err := Canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%q:\n got %s (%v)\nwant %s", in, got, err, want)
		}
	}
	for _, in := range []string{``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`,
		`{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{a:1}`, `{"a":1 "b":2}`, `[1 2]`, `{"a":"`, "\ufeff{}"} {
		if got, err := Canonical([]byte(in)); err == nil || json.Valid([]byte(in)) {
			t.Errorf("%q: %s, %v (json.Valid %v)", in, got, err, json.Valid([]byte(in)))
		}
	}
}

// TestCanonicalManyKeys: repeats among many keys (in the table, grown
// from its first size) keep each key's last member, at its place.
func TestCanonicalManyKeys(t *testing.T) {
	var in, want bytes.Buffer
	in.WriteByte('{')
	want.WriteByte('{')
	for i := range 3000 {
		fmt.Fprintf(&in, `"k%d":%d,`, i%1000, i)
		if i >= 2000 && i != 2005 {
			fmt.Fprintf(&want, `"k%d":%d,`, i%1000, i)
		}
	}
	in.WriteString(`"k5" : {"x":1,"x":2}}`)
	want.WriteString(`"k5":{"x":2}}`)
	if got, err := Canonical(in.Bytes()); err != nil || string(got) != want.String() {
		t.Errorf("got %.200s... (%v)", got, err)
	}
}

// TestCanonicalShares: input already canonical comes back as it is, the
// same memory, without allocating.
func TestCanonicalShares(t *testing.T) {
	in := []byte(pageviewProperties)
	var out []byte
	allocs := testing.AllocsPerRun(100, func() { out, _ = Canonical(in) })
	if allocs != 0 || unsafe.SliceData(out) != unsafe.SliceData(in) || len(out) != len(in) {
		t.Errorf("%.0f allocations; shares %v", allocs, unsafe.SliceData(out) == unsafe.SliceData(in))
	}
}

// TestCanonicalStyles: every style a client may write a document in
// gives the one canonical text.
func TestCanonicalStyles(t *testing.T) {
	for _, doc := range []string{pageviewProperties, `{"$set":{"email":"a@example.com","n":1.50},"$set_once":{"first":"2026-01-01"},"tags":[],"o":{}}`,
		`{"k":"é</script>&\u2028 \"\\ \u0001","deep":[[[{"x":[1,{"y":null}]}]]]}`} {
		want, err := Canonical([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range jsonstyle.All {
			styled := s.Write([]byte(doc))
			if got, err := Canonical(styled); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s %s:\n got %s (%v)\nwant %s", s.Name, styled, got, err, want)
			}
		}
	}
}

func TestCanonicalDepth(t *testing.T) {
	for _, n := range []int{CanonicalMaxDepth, CanonicalMaxDepth + 1} {
		doc := strings.Repeat(`{"a":`, n-1) + `[]` + strings.Repeat(`}`, n-1)
		got, err := Canonical([]byte(doc))
		if (err == nil) != json.Valid([]byte(doc)) || err == nil && string(got) != doc {
			t.Errorf("depth %d: %v (json.Valid %v)", n, err, json.Valid([]byte(doc)))
		}
	}
}

// FuzzCanonical: Canonical accepts exactly what encoding/json accepts; its
// output is what a second implementation (encoding/json's tokens, encoded
// again) gives, so valid JSON equal in meaning to the input and compact;
// it is its own canonical form, returned as it is; and every style of the
// input gives the same output.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{pageviewProperties, `{"a": 1, "b" : [true,false,null], "c":{"d":"\u0024\/\ud83d\ude00"}}`,
		`{"a":1,"a":{"a":2,"a":3}}`, "{\"x\":\"\xff\\ud800\"}", `[1.50e+3,-0,"\u001F"]`, `{"\u0061":"<>&"}`, ` "s" `, `{`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkCanonical(t, in)
		// The input as a key and a string (as Go's Marshal writes them:
		// its escapes of <, >, &, U+2028 and invalid UTF-8), so that
		// every input exercises the strings' path.
		s, _ := json.Marshal(string(in))
		checkCanonical(t, []byte(`{`+string(s)+`:[`+string(s)+`]}`))
	})
}

func checkCanonical(t *testing.T, in []byte) {
	got, err := Canonical(in)
	if (err == nil) != json.Valid(in) {
		t.Fatalf("%q: error %v, json.Valid %v", in, err, json.Valid(in))
	}
	if err != nil {
		return
	}
	if want := referenceCanonical(t, in); !bytes.Equal(got, want) {
		t.Fatalf("%q:\n got %s\nwant %s", in, got, want)
	}
	again, err := Canonical(got)
	if err != nil || !bytes.Equal(again, got) || unsafe.SliceData(again) != unsafe.SliceData(got) {
		t.Fatalf("%q: canonical %s is not its own canonical form: %s, %v", in, got, again, err)
	}
	for _, s := range jsonstyle.All {
		styled := s.Write(in)
		if other, err := Canonical(styled); err != nil || !bytes.Equal(other, got) {
			t.Fatalf("%s of %q (%q): %s, %v; want %s", s.Name, in, styled, other, err, got)
		}
	}
}

// referenceCanonical is the canonical form by other means: encoding/json's
// tokens (numbers as written), a repeated key taking the last place, each
// string encoded rune by rune.
func referenceCanonical(t *testing.T, in []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	v := refValue(t, dec)
	var out bytes.Buffer
	refWrite(&out, v)
	return out.Bytes()
}

type refMember struct {
	key string
	val any
}

func refValue(t *testing.T, dec *json.Decoder) any {
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		var obj []refMember
		for dec.More() {
			k, _ := dec.Token()
			v := refValue(t, dec)
			for i, m := range obj {
				if m.key == k.(string) {
					obj = append(obj[:i], obj[i+1:]...)
					break
				}
			}
			obj = append(obj, refMember{k.(string), v})
		}
		dec.Token()
		return obj
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			arr = append(arr, refValue(t, dec))
		}
		dec.Token()
		return arr
	}
	return tok
}

var refShort = map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

func refWrite(out *bytes.Buffer, v any) {
	switch x := v.(type) {
	case []refMember:
		out.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				out.WriteByte(',')
			}
			refWrite(out, m.key)
			out.WriteByte(':')
			refWrite(out, m.val)
		}
		out.WriteByte('}')
	case []any:
		out.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				out.WriteByte(',')
			}
			refWrite(out, e)
		}
		out.WriteByte(']')
	case string:
		out.WriteByte('"')
		for _, r := range x {
			if s, ok := refShort[r]; ok {
				out.WriteString(s)
			} else if r < 0x20 {
				fmt.Fprintf(out, `\u%04x`, r)
			} else {
				out.WriteRune(r)
			}
		}
		out.WriteByte('"')
	case nil:
		out.WriteString("null")
	default: // json.Number, bool
		fmt.Fprint(out, x)
	}
}

// pageviewProperties are a $pageview's properties as posthog-js sends
// them (1.6 KB, compact, as JSON.stringify writes).
const pageviewProperties = `{"$os":"Mac OS X","$os_version":"10.15.7","$browser":"Chrome","$device_type":"Desktop","$timezone":"Europe/Berlin","$current_url":"https://app.example.com/project/42/insights?tab=trends&interval=day","$host":"app.example.com","$pathname":"/project/42/insights","$raw_user_agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36","$browser_version":131,"$browser_language":"de-DE","$browser_language_prefix":"de","$screen_height":1117,"$screen_width":1728,"$viewport_height":959,"$viewport_width":1728,"$lib":"web","$lib_version":"1.194.3","$insert_id":"k9x2m4vq8p1z7c3w","$time":1763632800.123,"distinct_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f02","$device_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f02","$user_id":"alice@example.com","$initial_person_info":{"r":"https://www.google.com/","u":"https://example.com/?utm_source=google"},"$console_log_recording_enabled_server_side":false,"$session_recording_network_payload_capture":{"capturePerformance":false},"$web_vitals_enabled_server_side":false,"$referrer":"https://www.google.com/","$referring_domain":"www.google.com","utm_source":"newsletter","utm_medium":"email","utm_campaign":"launch-2026","token":"phc_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefg","$session_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f03","$window_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f04","$pageview_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f05","$is_identified":true,"$process_person_profile":true,"$groups":{},"$active_feature_flags":["new-onboarding","beta-trends"],"$feature/new-onboarding":true,"$feature/beta-trends":"test","title":"Insights · Example","$sent_at":"2026-11-20T10:00:00.456Z"}`

// BenchmarkCanonical: the ingester's cost per event of the canonical form:
// a posthog-js $pageview's properties (1.6 KB) as JavaScript writes them
// (the common case: canonical already), as Python's json.dumps writes them
// and with PHP's escapes; and the bench dataset's ~300-byte block.
func BenchmarkCanonical(b *testing.B) {
	run := func(name string, in []byte) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Canonical(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	doc := []byte(pageviewProperties)
	run("pageview/compact", doc)
	run("pageview/python", jsonstyle.ByName("spaced").Write(doc))
	run("pageview/escaped", jsonstyle.ByName("escaped-strings").Write(doc))
	run("bench-block/compact", []byte(`{"$current_url":"https://app.example.com/pricing/48213?utm_source=newsletter&utm_campaign=c17",`+
		`"$referrer":"https://www.search.example.org/?q=term4821","$browser":"Firefox","$os":"Linux","$screen_width":1440,"$lib":"web",`+
		`"$lib_version":"1.42.0","$session_id":"9f86d081884c7d65","$pathname":"/pricing"}`))
}
