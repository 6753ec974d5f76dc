package transform

import (
	"bytes"
	"maps"
	"slices"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"

	"github.com/personhub/personhub/pkg/plugin"
)

// attachments builds meta.attachments as PostHog's plugin server gives it:
// {KEY: {content_type, file_name, contents}}, contents a Buffer (Node's
// Buffer of the file's bytes: JSON.parse and toString read it as UTF-8
// text), {} when the config has none. Each instance gets its own copy of
// the bytes: a plugin that writes into its Buffer changes nothing another
// instance, or a later replay, reads.
func (in *instance) attachments(atts map[string]plugin.AttachmentFile) goja.Value {
	vm := in.vm
	out := vm.NewObject()
	for _, k := range slices.Sorted(maps.Keys(atts)) {
		a := atts[k]
		o := vm.NewObject()
		_ = o.Set("content_type", a.ContentType)
		_ = o.Set("file_name", a.FileName)
		_ = o.Set("contents", buffer.WrapBytes(vm, bytes.Clone(a.Contents)))
		_ = out.Set(k, o)
	}
	return out
}
