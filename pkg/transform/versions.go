package transform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/plugin"
)

// ObjectVersions is the Object Store of transformation versions: object
// <version hash> -> JSON Version. Objects are written once and never
// changed, so a chain command in the log (which names versions, see Ref)
// means the same code and config on every replay (docs/architecture.md,
// "Transformations"). Secrets live here, not in the event stream.
const ObjectVersions = "transformation_versions"

// Version is a step's code, config and attachments, what its hash names.
// The attachments' contents are objects of their own (attachmentObject),
// written once like versions: a replay reads the file the version named,
// whatever the config holds now.
type Version struct {
	Filename    string                           `json:"filename"`
	Source      string                           `json:"source"`
	Config      map[string]any                   `json:"config"`
	Attachments map[string]plugin.AttachmentFile `json:"attachments,omitempty"`
}

// Hash is the version's name: SHA-256 of filename, source, config and the
// attachments' names, types and SHA-256s.
func (v Version) Hash() string {
	return Step{Filename: v.Filename, Source: v.Source, Config: v.Config, Attachments: v.Attachments}.version()
}

// attachmentObject names the object of an attachment's contents.
func attachmentObject(sha string) string { return "attachments/" + sha }

// Versions reads and writes ObjectVersions, caching what it read (objects
// never change). Safe for concurrent use.
type Versions struct {
	obj   jetstream.ObjectStore
	mu    sync.Mutex
	cache map[string]Version
}

// OpenVersions opens (creating if needed) the version store.
func OpenVersions(ctx context.Context, js jetstream.JetStream) (*Versions, error) {
	obj, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ObjectVersions, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		obj, err = js.ObjectStore(ctx, ObjectVersions)
	}
	if err != nil {
		return nil, fmt.Errorf("transform: open object store %s: %w", ObjectVersions, err)
	}
	return &Versions{obj: obj, cache: map[string]Version{}}, nil
}

// Put stores v under its hash (a no-op when stored already) and returns
// the hash. It must succeed before a chain command naming it is published.
func (s *Versions) Put(ctx context.Context, v Version) (string, error) {
	h := v.Hash()
	for k, a := range v.Attachments {
		if err := s.putAttachment(ctx, a); err != nil {
			return "", fmt.Errorf("transform: version %s, attachment %q: %w", h, k, err)
		}
	}
	if _, err := s.obj.GetInfo(ctx, h); err == nil {
		return h, nil
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", fmt.Errorf("transform: version %s: %w", h, err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if _, err := s.obj.PutBytes(ctx, h, data); err != nil {
		return "", fmt.Errorf("transform: store version %s: %w", h, err)
	}
	return h, nil
}

// Get reads the version named hash and checks that its content has that
// hash (an object altered in place would otherwise change a replay
// silently).
func (s *Versions) Get(ctx context.Context, hash string) (Version, error) {
	s.mu.Lock()
	v, ok := s.cache[hash]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	data, err := s.obj.GetBytes(ctx, hash)
	if err != nil {
		return Version{}, fmt.Errorf("transform: read version %s: %w", hash, err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return Version{}, fmt.Errorf("transform: version %s: %w", hash, err)
	}
	if v.Hash() != hash {
		return Version{}, fmt.Errorf("transform: version %s holds content of another hash", hash)
	}
	for k, a := range v.Attachments {
		if a.Contents, err = s.getAttachment(ctx, a.SHA256); err != nil {
			return Version{}, fmt.Errorf("transform: version %s, attachment %q: %w", hash, k, err)
		}
		v.Attachments[k] = a
	}
	s.mu.Lock()
	s.cache[hash] = v
	s.mu.Unlock()
	return v, nil
}

// putAttachment stores an attachment's contents under their SHA-256 (a
// no-op when stored already).
func (s *Versions) putAttachment(ctx context.Context, a plugin.AttachmentFile) error {
	if sha256Hex(a.Contents) != a.SHA256 {
		return fmt.Errorf("contents do not have the SHA-256 %s", a.SHA256)
	}
	name := attachmentObject(a.SHA256)
	if _, err := s.obj.GetInfo(ctx, name); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	_, err := s.obj.PutBytes(ctx, name, a.Contents)
	return err
}

// getAttachment reads an attachment's contents and checks their SHA-256.
func (s *Versions) getAttachment(ctx context.Context, sha string) ([]byte, error) {
	data, err := s.obj.GetBytes(ctx, attachmentObject(sha))
	if err != nil {
		return nil, err
	}
	if sha256Hex(data) != sha {
		return nil, fmt.Errorf("object %s holds contents of another hash", attachmentObject(sha))
	}
	return data, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
