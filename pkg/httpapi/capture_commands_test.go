package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/capture"
)

// TestCaptureRefusesCommands: the public capture token cannot delete or
// split a person or write in a key's name. A /batch/ holding such an event
// anywhere answers 400 naming it, publishes nothing of the request, and
// the person stays as it was.
func TestCaptureRefusesCommands(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{})
	c.ingest(c.projectA.ID, `{"event":"e","distinct_id":"victim","$set":{"x":1}}`, `{"event":"e","distinct_id":"victim-2"}`)
	c.startIngester()
	path, before := c.personPath("victim")
	id := int(before["id"].(float64))
	published := c.streamCount()

	tok := c.projectA.APIToken
	jsonH := http.Header{"Content-Type": {"application/json"}}
	ok := `{"event":"e","distinct_id":"bystander","$set":{"y":1}}`
	forged := map[string]string{
		"$delete_person": fmt.Sprintf(`{"event":"$delete_person","distinct_id":"victim","properties":{"$person_id":%d,"$delete_events":true,"$actor":{"key_id":"x"}}}`, id),
		"$split_person":  fmt.Sprintf(`{"event":"$split_person","distinct_id":"victim","properties":{"$person_id":%d,"$split_distinct_ids":["victim"]}}`, id),
		"$actor":         `{"event":"$set","distinct_id":"victim","$set":{"x":2},"properties":{"$actor":{"key_id":"x","organization_id":"o"}}}`,
	}
	for name, ev := range forged {
		r := c.post("/batch/", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[%s,%s]}`, tok, ok, ev))
		m := r.json(t)
		if r.status != 400 || m["attr"] != "batch.1" || !strings.Contains(fmt.Sprint(m["detail"]), name) {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
	}
	// The same through the other capture routes and encodings.
	r := c.post("/e/", http.Header{"Content-Type": {"text/plain"}},
		gzipped(t, fmt.Sprintf(`[{"event":"$delete_person","properties":{"distinct_id":"victim","token":%q,"$person_id":%d}}]`, tok, id)))
	if r.status != 400 {
		t.Fatalf("/e/ gzip: %d %s", r.status, r.body)
	}
	if n := c.streamCount(); n != published {
		t.Fatalf("refused requests published %d messages", n-published)
	}
	// A legitimate event afterwards is folded; the person is intact.
	if r := c.post("/batch/", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, tok, ok)); r.status != 200 {
		t.Fatalf("ordinary batch: %d %s", r.status, r.body)
	}
	c.waitPerson("bystander", func(p map[string]any) bool { return personProps(p)["y"] != nil })
	after := c.get(c.keyAll, path)
	if after.status != 200 || fmt.Sprint(after.json(t)["properties"]) != "map[x:1]" {
		t.Fatalf("person after refused commands: %d %s", after.status, after.body)
	}
}
