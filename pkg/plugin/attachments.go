package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/activity"
)

// Attachments are files uploaded for a config's fields of type
// "attachment" (multipart add_attachment[KEY], as PostHog's API takes
// them). Their contents live in the Object Store ObjectAttachments, named
// by their SHA-256, and the config record holds what each key names. A
// transformation gets them as meta.attachments[KEY] = {content_type,
// file_name, contents} (contents a Buffer), and the chain published for
// the ingester carries them in its versions (pkg/transform), so a replay
// uses the file that was current when the event was captured.

// ObjectAttachments is the Object Store of attachment contents: object
// <sha256 hex of the contents> -> the contents.
const ObjectAttachments = "plugin_attachments"

// Attachment limits: a file, and all the files of one config together.
// A config's attachments reach every instance of the transformation and
// its versions on the log, so they are kept small.
const (
	MaxAttachmentBytes       = 1 << 20
	MaxConfigAttachmentBytes = 5 << 20
	MaxAttachments           = 16
	maxAttachmentNameLen     = 200
)

// Attachment is what a config's record holds of one attachment.
type Attachment struct {
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type"`
	FileName    string `json:"file_name"`
	Size        int64  `json:"size"`
}

// AttachmentUpload is one add_attachment[KEY] file of a request.
type AttachmentUpload struct {
	Key         string
	ContentType string
	FileName    string
	Contents    []byte
}

// AttachmentFile is an attachment with its contents, as a transformation
// gets it (Link, and the transformation versions: Contents is stored
// apart from the JSON, by SHA256).
type AttachmentFile struct {
	ContentType string `json:"content_type"`
	FileName    string `json:"file_name"`
	SHA256      string `json:"sha256"`
	Contents    []byte `json:"-"`
}

// Shown is how the API shows an attachment in the config's values, as
// PostHog's does: {"uid", "saved": true, "size", "name", "type"}; uid is
// the contents' SHA-256 here. Writing it back keeps the attachment
// (mergeConfig).
func (a Attachment) Shown() map[string]any {
	return map[string]any{"uid": a.SHA256, "saved": true, "size": a.Size, "name": a.FileName, "type": a.ContentType}
}

// isShownAttachment reports whether a config value is what a read shows
// for an attachment (a client writing back what it read).
func isShownAttachment(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m["saved"] == true && m["uid"] != nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func openAttachments(ctx context.Context, js jetstream.JetStream) (jetstream.ObjectStore, error) {
	obj, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ObjectAttachments, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		obj, err = js.ObjectStore(ctx, ObjectAttachments)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin: open object store %s: %w", ObjectAttachments, err)
	}
	return obj, nil
}

// attachmentKeys returns the keys a config_schema gives type
// "attachment" (read leniently: a stored schema was checked on entry).
func attachmentKeys(raw json.RawMessage) map[string]bool {
	out := map[string]bool{}
	eachField(raw, func(key string, f map[string]any) {
		if f["type"] == "attachment" {
			out[key] = true
		}
	})
	return out
}

// checkAttachmentKeys refuses an upload or removal of a key that the
// plugin's config_schema does not declare of type "attachment": a key
// nothing declares is a typo the plugin would never read. (PostHog takes
// any key.) Removing a key the config holds is always allowed, so an
// attachment whose field a new schema dropped can still go.
func checkAttachmentKeys(p Plugin, c *Config, in ConfigInput) error {
	keys := attachmentKeys(p.ConfigSchema)
	for _, u := range in.AddAttachments {
		if !keys[u.Key] {
			return invalid(addAttachmentField(u.Key), "Plugin %q has no config field %q of type \"attachment\" (config_schema).", p.Name, u.Key)
		}
	}
	for _, k := range in.RemoveAttachments {
		_, held := c.Attachments[k]
		if !keys[k] && !held {
			return invalid(removeAttachmentField(k), "Plugin %q has no config field %q of type \"attachment\" (config_schema).", p.Name, k)
		}
	}
	return nil
}

func addAttachmentField(key string) string    { return "add_attachment[" + key + "]" }
func removeAttachmentField(key string) string { return "remove_attachment[" + key + "]" }

// storeUploads puts the uploaded contents in the object store before the
// record that names them is written. A put replaces an object of the same
// contents, which refreshes its time, so a sweep (SweepAttachments) does
// not remove it before the record names it.
func (s *Service) storeUploads(ctx context.Context, in ConfigInput) error {
	for _, u := range in.AddAttachments {
		if _, err := s.st.attachments.PutBytes(ctx, sha256Hex(u.Contents), u.Contents); err != nil {
			return fmt.Errorf("plugin: store attachment %q: %w", u.Key, err)
		}
	}
	return nil
}

// applyAttachments applies the removals, then the uploads, of in to c and
// checks the config's limits.
func applyAttachments(c *Config, in ConfigInput) error {
	if len(in.AddAttachments) == 0 && len(in.RemoveAttachments) == 0 {
		return nil
	}
	next := maps.Clone(c.Attachments)
	if next == nil {
		next = map[string]Attachment{}
	}
	for _, k := range in.RemoveAttachments {
		delete(next, k)
	}
	for _, u := range in.AddAttachments {
		next[u.Key] = Attachment{SHA256: sha256Hex(u.Contents), ContentType: u.ContentType, FileName: u.FileName, Size: int64(len(u.Contents))}
	}
	var total int64
	for _, a := range next {
		total += a.Size
	}
	if len(next) > MaxAttachments {
		return invalid(addAttachmentField(in.AddAttachments[0].Key), "A plugin config holds at most %d attachments.", MaxAttachments)
	}
	if total > MaxConfigAttachmentBytes {
		return invalid(addAttachmentField(in.AddAttachments[0].Key), "The attachments of a plugin config are at most %d MiB together; these would be %d bytes.", MaxConfigAttachmentBytes>>20, total)
	}
	if len(next) == 0 {
		next = nil
	}
	c.Attachments = next
	return nil
}

// attachmentChanges lists the attachments changed between two records as
// activity changes (file names, never contents).
func attachmentChanges(before, after map[string]Attachment) []activity.Change {
	var out []activity.Change
	keys := slices.Collect(maps.Keys(before))
	for k := range after {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		b, hadB := before[k]
		a, hasA := after[k]
		if hadB == hasA && b == a {
			continue
		}
		ch := activity.Change{Type: ScopePluginConfig, Action: "changed", Field: "attachment:" + k}
		switch {
		case !hadB:
			ch.Action, ch.After = "created", a.FileName
		case !hasA:
			ch.Action, ch.Before = "deleted", b.FileName
		default:
			ch.Before, ch.After = b.FileName, a.FileName
		}
		out = append(out, ch)
	}
	return out
}

// attachmentFiles reads a config's attachments with their contents. An
// object that is gone, or holds other contents than its name says, is an
// error: a chain must not run with a file silently missing.
func (s *store) attachmentFiles(ctx context.Context, atts map[string]Attachment) (map[string]AttachmentFile, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	out := make(map[string]AttachmentFile, len(atts))
	for k, a := range atts {
		data, err := s.attachments.GetBytes(ctx, a.SHA256)
		if err != nil {
			return nil, fmt.Errorf("plugin: read attachment %q (%s): %w", k, a.SHA256, err)
		}
		if sha256Hex(data) != a.SHA256 {
			return nil, fmt.Errorf("plugin: attachment %q: object %s holds other contents", k, a.SHA256)
		}
		out[k] = AttachmentFile{ContentType: a.ContentType, FileName: a.FileName, SHA256: a.SHA256, Contents: data}
	}
	return out, nil
}

// attachmentGrace is how long an attachment object no record names is
// kept: an upload stores the object before the record that names it.
const attachmentGrace = 10 * time.Minute

// SweepAttachments deletes the attachment objects that no live config
// names and that are older than olderThan, and returns
// how many it deleted. Open runs it once in the background. The chains
// published for the ingester keep their own copies, so replays do not need
// these objects.
func (s *Service) SweepAttachments(ctx context.Context, olderThan time.Duration) (int, error) {
	configs, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, c := range configs {
		if c.Deleted {
			continue
		}
		for _, a := range c.Attachments {
			live[a.SHA256] = true
		}
	}
	return sweep(ctx, s.st.attachments, live, olderThan)
}
