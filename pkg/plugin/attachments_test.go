package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin"
)

// formPart is one part of a multipart body: a file when file is set.
type formPart struct {
	name, file, ctype, value string
}

// form writes parts with the standard library's multipart writer and
// decodes the body.
func form(t testing.TB, parts ...formPart) (plugin.ConfigInput, error) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.file != "" {
			if p.file == "-" { // an empty file input
				p.file = ""
			}
			h.Set("Content-Disposition", `form-data; name="`+p.name+`"; filename="`+p.file+`"`)
			if p.ctype != "" {
				h.Set("Content-Type", p.ctype)
			}
		} else {
			h.Set("Content-Disposition", `form-data; name="`+p.name+`"`)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = pw.Write([]byte(p.value))
	}
	_ = w.Close()
	return plugin.DecodeConfigForm(&buf, w.Boundary())
}

func mustForm(t testing.TB, parts ...formPart) plugin.ConfigInput {
	t.Helper()
	in, err := form(t, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// attrOf is the attr of a *plugin.Error (400s), failing on anything else.
func attrOf(t *testing.T, err error) string {
	t.Helper()
	var pe *plugin.Error
	if !errors.As(err, &pe) || pe.Kind != plugin.KindInvalid {
		t.Fatalf("error %v (%T), want a 400", err, err)
	}
	return pe.Attr
}

// TestDecodeConfigForm: the fields of a form are those of a JSON body
// (config as JSON text, enabled and order as text), files go to
// AddAttachments with their name and type, removals to RemoveAttachments;
// anything else is a 400 naming the field.
func TestDecodeConfigForm(t *testing.T) {
	in := mustForm(t, formPart{name: "plugin", value: "3"}, formPart{name: "enabled", value: "True"},
		formPart{name: "order", value: "2"}, formPart{name: "config", value: `{"eventsToDrop":"a,b"}`},
		formPart{name: "add_attachment[filters]", file: `C:\Users\me\filters.json`, ctype: "application/json", value: `[[]]`},
		formPart{name: "remove_attachment[old]", value: "true"})
	if !in.Plugin.Set || in.Plugin.Value != 3 || !in.Enabled.Value || in.Order.Value != 2 || in.Config.Value["eventsToDrop"] != "a,b" {
		t.Fatalf("fields %+v", in)
	}
	if len(in.AddAttachments) != 1 {
		t.Fatalf("uploads %+v", in.AddAttachments)
	}
	if u := in.AddAttachments[0]; u.Key != "filters" || u.FileName != "filters.json" || u.ContentType != "application/json" || string(u.Contents) != "[[]]" {
		t.Fatalf("upload %+v", u)
	}
	if len(in.RemoveAttachments) != 1 || in.RemoveAttachments[0] != "old" {
		t.Fatalf("removals %v", in.RemoveAttachments)
	}
	// An empty file input (filename="") is skipped, as PostHog skips it.
	if in := mustForm(t, formPart{name: "add_attachment[k]", file: "-"}); len(in.AddAttachments) != 0 {
		t.Fatalf("empty file input: %+v", in.AddAttachments)
	}
	big := strings.Repeat("x", plugin.MaxAttachmentBytes+1)
	for _, c := range []struct {
		parts []formPart
		attr  string
	}{
		{[]formPart{{name: "add_attachment[k]", file: "f", value: big}}, "add_attachment[k]"},
		{[]formPart{{name: "add_attachment[k]", value: "not a file"}}, "add_attachment[k]"},
		{[]formPart{{name: "add_attachments[k]", file: "f", value: "x"}}, "add_attachments[k]"},
		{[]formPart{{name: "add_attachment[]", file: "f", value: "x"}}, "add_attachment[]"},
		{[]formPart{{name: "color", value: "red"}}, "color"},
		{[]formPart{{name: "enabled", value: "maybe"}}, "enabled"},
		{[]formPart{{name: "order", value: "1.5"}}, "order"},
		{[]formPart{{name: "config", value: `{"a":`}}, "config"},
		{[]formPart{{name: "config", value: `[1]`}}, "config"},
		{[]formPart{{name: "order", value: "1"}, {name: "order", value: "2"}}, "order"},
		{[]formPart{{name: "add_attachment[k]", file: "f", value: "x"}, {name: "remove_attachment[k]", value: "1"}}, "add_attachment[k]"},
		{[]formPart{{name: "add_attachment[k]", file: strings.Repeat("n", 201), value: "x"}}, "add_attachment[k]"},
	} {
		_, err := form(t, c.parts...)
		if got := attrOf(t, err); got != c.attr {
			t.Errorf("%v: attr %q, want %q (%v)", c.parts[0].name, got, c.attr, err)
		}
	}
	for _, body := range []string{"--b\r\nnot a header\r\n\r\nx\r\n--b--\r\n", "--b\r\nContent-Disposition: form-data; name=\"order\"\r\n\r\n1"} {
		if _, err := plugin.DecodeConfigForm(strings.NewReader(body), "b"); attrOf(t, err) != "body" {
			t.Errorf("%q: %v", body, err)
		}
	}
	if _, err := plugin.DecodeConfigForm(strings.NewReader("x"), ""); attrOf(t, err) != "body" {
		t.Errorf("no boundary: %v", err)
	}
}

// attachmentPlugin is a transformation whose config_schema has an
// attachment field "filters" and a plain field "mode".
func (e *svcEnv) attachmentPlugin(t *testing.T) plugin.Plugin {
	t.Helper()
	return e.create(t, `{"plugin_type":"source","name":"filter","capabilities":{"methods":["processEvent"]},
		"config_schema":[{"key":"filters","type":"attachment"},{"key":"mode","type":"string","secret":true}]}`)
}

// TestAttachmentsStored: an upload is stored with the config (name, type,
// size, SHA-256) and reaches the chain with its contents; a PATCH replaces
// or removes it; limits, undeclared keys and removals are checked; what
// reads show never holds the contents; a removed file's object is swept.
func TestAttachmentsStored(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.attachmentPlugin(t)
	in := mustForm(t, formPart{name: "enabled", value: "true"}, formPart{name: "config", value: `{"mode":"strict"}`},
		formPart{name: "add_attachment[filters]", file: "filters.json", ctype: "application/json", value: `["drop me"]`})
	in.Plugin = plugin.Field[uint64]{Set: true, Value: p.ID}
	c, err := e.svc.CreateConfig(ctx, e.actor, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Attachments["filters"]
	if a.FileName != "filters.json" || a.ContentType != "application/json" || a.Size != 11 || len(a.SHA256) != 64 {
		t.Fatalf("attachment %+v", a)
	}
	if c.Config["mode"] != plugin.SecretMask {
		t.Fatalf("secret value shown: %v", c.Config)
	}
	shown, _ := json.Marshal(c)
	if bytes.Contains(shown, []byte("drop me")) {
		t.Fatalf("contents in the config as returned: %s", shown)
	}
	chain, err := e.svc.Chain(ctx, e.actor, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 1 || string(chain[0].Attachments["filters"].Contents) != `["drop me"]` || chain[0].Attachments["filters"].FileName != "filters.json" {
		t.Fatalf("chain %+v", chain)
	}

	// A key the schema does not declare an attachment: 400 naming it.
	for _, key := range []string{"mode", "other"} {
		_, err := e.svc.PatchConfig(ctx, e.actor, 1, c.ID, mustForm(t, formPart{name: "add_attachment[" + key + "]", file: "f", value: "x"}))
		if attrOf(t, err) != "add_attachment["+key+"]" {
			t.Fatalf("%s: %v", key, err)
		}
	}
	// Over the config's total: 400, nothing changes.
	p2 := e.create(t, `{"plugin_type":"source","name":"many","capabilities":{"methods":["processEvent"]},
		"config_schema":[{"key":"a","type":"attachment"},{"key":"b","type":"attachment"},{"key":"c","type":"attachment"},{"key":"d","type":"attachment"},{"key":"e","type":"attachment"},{"key":"f","type":"attachment"}]}`)
	mb := strings.Repeat("y", plugin.MaxAttachmentBytes)
	var parts []formPart
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		parts = append(parts, formPart{name: "add_attachment[" + k + "]", file: k + ".txt", value: mb})
	}
	many := mustForm(t, parts...)
	many.Plugin = plugin.Field[uint64]{Set: true, Value: p2.ID}
	if _, err := e.svc.CreateConfig(ctx, e.actor, 1, many); !strings.HasPrefix(attrOf(t, err), "add_attachment[") {
		t.Fatalf("over the config's total: %v", err)
	}

	// Writing back what a read shows keeps the attachment and the secret.
	back := map[string]any{"filters": a.Shown(), "mode": plugin.SecretMask}
	if c, err = e.svc.PatchConfig(ctx, e.actor, 1, c.ID, plugin.ConfigInput{Config: plugin.Field[map[string]any]{Set: true, Value: back}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Config["filters"]; ok || c.Attachments["filters"] != a {
		t.Fatalf("after writing back: %+v %+v", c.Config, c.Attachments)
	}
	chain, _ = e.svc.Chain(ctx, e.actor, 1, 0)
	if chain[0].Config["mode"] != "strict" {
		t.Fatalf("secret lost: %v", chain[0].Config)
	}

	// Replace, then remove.
	c, err = e.svc.PatchConfig(ctx, e.actor, 1, c.ID, mustForm(t, formPart{name: "add_attachment[filters]", file: "v2.json", ctype: "text/plain", value: `["v2"]`}))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Attachments["filters"]; b.FileName != "v2.json" || b.ContentType != "text/plain" || b.SHA256 == a.SHA256 {
		t.Fatalf("replaced %+v", b)
	}
	chain, _ = e.svc.Chain(ctx, e.actor, 1, 0)
	if string(chain[0].Attachments["filters"].Contents) != `["v2"]` {
		t.Fatalf("chain after replace %+v", chain[0].Attachments)
	}
	if n, err := e.svc.SweepAttachments(ctx, 0); err != nil || n != 2 {
		// the replaced file, and the one object (six equal files) of the
		// refused create
		t.Fatalf("swept %d, %v", n, err)
	}
	if chain, err = e.svc.Chain(ctx, e.actor, 1, 0); err != nil || string(chain[0].Attachments["filters"].Contents) != `["v2"]` {
		t.Fatalf("the live file was swept: %v", err)
	}
	if c, err = e.svc.PatchConfig(ctx, e.actor, 1, c.ID, mustForm(t, formPart{name: "remove_attachment[filters]", value: "true"})); err != nil {
		t.Fatal(err)
	}
	if len(c.Attachments) != 0 {
		t.Fatalf("after removal %+v", c.Attachments)
	}
	chain, _ = e.svc.Chain(ctx, e.actor, 1, 0)
	if len(chain[0].Attachments) != 0 {
		t.Fatalf("chain after removal %+v", chain[0].Attachments)
	}
	// Removing a key that is neither declared nor held: 400.
	_, err = e.svc.PatchConfig(ctx, e.actor, 1, c.ID, mustForm(t, formPart{name: "remove_attachment[nope]", value: "true"}))
	if attrOf(t, err) != "remove_attachment[nope]" {
		t.Fatalf("removal of an undeclared key: %v", err)
	}
}

// FuzzDecodeConfigForm: any body and boundary decode to an input or a
// *plugin.Error (a 400), never a panic; uploads are within their limits.
func FuzzDecodeConfigForm(f *testing.F) {
	f.Add("--b\r\nContent-Disposition: form-data; name=\"config\"\r\n\r\n{\"a\":1}\r\n--b\r\nContent-Disposition: form-data; name=\"add_attachment[k]\"; filename=\"f.json\"\r\nContent-Type: application/json\r\n\r\n[1]\r\n--b--\r\n", "b")
	f.Add("--b\r\nContent-Disposition: form-data; name=\"remove_attachment[k]\"\r\n\r\ntrue\r\n--b\r\nContent-Disposition: form-data; name=\"enabled\"\r\n\r\n1\r\n--b--\r\n", "b")
	f.Add("--b\r\nContent-Disposition: form-data; name=\"x\"; filename*=UTF-8''%e2%82%ac.txt\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=41\r\n--b--", "b")
	f.Fuzz(func(t *testing.T, body, boundary string) {
		in, err := plugin.DecodeConfigForm(strings.NewReader(body), boundary)
		if err != nil {
			if _, ok := err.(*plugin.Error); !ok {
				t.Fatalf("error %T is not a *plugin.Error: %v", err, err)
			}
			return
		}
		for _, u := range in.AddAttachments {
			if len(u.Contents) > plugin.MaxAttachmentBytes || u.Key == "" || u.FileName == "" {
				t.Fatalf("upload %q %q (%d bytes)", u.Key, u.FileName, len(u.Contents))
			}
		}
	})
}
