package transform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin"
)

func attachmentFile(name, contents string) plugin.AttachmentFile {
	sum := sha256.Sum256([]byte(contents))
	return plugin.AttachmentFile{ContentType: "application/json", FileName: name, SHA256: hex.EncodeToString(sum[:]), Contents: []byte(contents)}
}

// dropByAttachment reads a JSON list of event names from the "drop"
// attachment in setupPlugin, as PostHog's filter-out plugin reads its
// filters, and drops those events; it records what meta.attachments held.
const dropByAttachment = `
let dropped = []
export function setupPlugin({ attachments, global }) {
  global.kind = attachments.drop.contents instanceof Buffer ? 'buffer' : typeof attachments.drop.contents
  dropped = attachments.drop ? JSON.parse(attachments.drop.contents) : []
  attachments.drop.contents[0] = 0x20 // writes into this instance's copy only
}
export function processEvent(event, { attachments, global }) {
  if (dropped.includes(event.event)) return null
  event.properties.kind = global.kind
  event.properties.file = attachments.drop.file_name + ' ' + attachments.drop.content_type
  event.properties.keys = Object.keys(attachments).join(',')
  event.properties.first = attachments.drop.contents.toString('utf8', 0, 1)
  return event
}`

// TestAttachmentsReachThePlugin: meta.attachments holds {content_type,
// file_name, contents} with contents a Buffer, in setupPlugin and
// processEvent; a plugin writing into its Buffer does not change the
// attachment another instance gets.
func TestAttachmentsReachThePlugin(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	step := Step{ConfigID: 1, PluginID: 1, Filename: "index.js", Source: dropByAttachment, Config: map[string]any{},
		Attachments: map[string]plugin.AttachmentFile{"drop": attachmentFile("drop.json", `["$pageleave"]`)}}
	ctx := context.Background()
	if res := r.Run(ctx, []Step{step}, sample("$pageleave")); res.Event != nil {
		t.Fatalf("not dropped: %+v", res.Steps)
	}
	res := r.Run(ctx, []Step{step}, sample("$pageview"))
	if res.Event == nil {
		t.Fatalf("dropped: %+v", res.Steps)
	}
	p := res.Event.Properties
	if p["kind"] != "buffer" || p["file"] != "drop.json application/json" || p["keys"] != "drop" || p["first"] != " " {
		t.Fatalf("properties %v", p)
	}
	if string(step.Attachments["drop"].Contents) != `["$pageleave"]` {
		t.Fatalf("the step's contents changed: %q", step.Attachments["drop"].Contents)
	}
	other, _ := newRuntime(t, Limits{})
	if res := other.Run(ctx, []Step{step}, sample("$pageleave")); res.Event != nil {
		t.Fatalf("a second instance read the first one's writes: %+v", res.Steps)
	}
	// Without attachments meta.attachments is {}, as PostHog gives it.
	props := runOne(t, `export function processEvent(e, meta) { e.properties.n = Object.keys(meta.attachments).length; return e }`, sample("x"))
	if props["n"] != int64(0) && props["n"] != float64(0) {
		t.Fatalf("meta.attachments without attachments: %v", props["n"])
	}
}

// TestReplayAfterAttachmentChange: an attachment is part of the version,
// so a replay (a fresh process reading the versions back) gives each
// event the attachment current when it was captured, though the file was
// replaced in between.
func TestReplayAfterAttachmentChange(t *testing.T) {
	ctx := context.Background()
	n, vs := natsVersions(t)
	v := func(contents string) string {
		h, err := vs.Put(ctx, Version{Filename: "index.js", Source: dropByAttachment, Config: map[string]any{},
			Attachments: map[string]plugin.AttachmentFile{"drop": attachmentFile("drop.json", contents)}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	v1, v2 := v(`["a"]`), v(`["b"]`)
	plain, err := vs.Put(ctx, Version{Filename: "index.js", Source: dropByAttachment, Config: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if v1 == v2 || v1 == plain {
		t.Fatalf("the attachment does not change the version: %s %s %s", v1, v2, plain)
	}
	ev := func(name string) *Event { e := sample(name); return &e }
	log := []logEntry{
		{seq: 1, refs: []Ref{{ConfigID: 5, Order: 1, Version: v1}}},
		{seq: 2, event: ev("a")},
		{seq: 3, event: ev("b")},
		{seq: 4, refs: []Ref{{ConfigID: 5, Order: 1, Version: v2}}},
		{seq: 5, event: ev("a")},
		{seq: 6, event: ev("b")},
	}
	kept := func(evs []*Event) string {
		var s []string
		for _, e := range evs {
			if e != nil {
				s = append(s, e.Event)
			} else {
				s = append(s, "-")
			}
		}
		return strings.Join(s, ",")
	}
	first := kept(replay(t, ctx, n, log))
	if want := "-,b,a,-"; first != want {
		t.Fatalf("first run %s, want %s", first, want)
	}
	if second := kept(replay(t, ctx, n, log)); second != first {
		t.Fatalf("replay %s, first run %s", second, first)
	}
	// An attachment object altered in place is refused, not run.
	obj, err := n.JS.ObjectStore(ctx, ObjectVersions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.PutBytes(ctx, attachmentObject(attachmentFile("", `["a"]`).SHA256), []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	fresh, _ := OpenVersions(ctx, n.JS)
	if _, err := fresh.Get(ctx, v1); err == nil || !strings.Contains(err.Error(), "another hash") {
		t.Fatalf("tampered attachment read: %v", err)
	}
}
