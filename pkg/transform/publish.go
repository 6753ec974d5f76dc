package transform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/plugin"
)

// Publisher puts a project's chain on the log (plugin.ChainPublisher): it
// stores each step's code and config as a content-addressed Version, then
// appends a command.SetTransformations naming them on the project's
// command subject. The ingester applies the chain to the events
// after the command in the stream (docs/architecture.md,
// "Transformations").
type Publisher struct {
	js       jetstream.JetStream
	versions *Versions
	// last holds, per project, the hash of the refs last published: an
	// unchanged chain (a config's name edited, the chains republished at
	// start) is not published again.
	last jetstream.KeyValue
}

// BucketChains is the publisher's KV bucket: decimal project id -> the
// SHA-256 of the chain (refs JSON) last published for it.
const BucketChains = "transformation_chains"

// NewPublisher returns a publisher over js (opening the version store and
// BucketChains).
func NewPublisher(ctx context.Context, js jetstream.JetStream) (*Publisher, error) {
	vs, err := OpenVersions(ctx, js)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BucketChains, History: 1, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, BucketChains)
	}
	if err != nil {
		return nil, fmt.Errorf("transform: open %s: %w", BucketChains, err)
	}
	return &Publisher{js: js, versions: vs, last: kv}, nil
}

// PublishChain stores the chain's versions and publishes the command; the
// versions are stored before the command that names them.
func (p *Publisher) PublishChain(ctx context.Context, projectID uint64, chain []plugin.Link) error {
	refs := make([]Ref, 0, len(chain))
	for _, l := range chain {
		h, err := p.versions.Put(ctx, Version{Filename: l.Filename, Source: l.Source, Config: l.Config, Attachments: l.Attachments})
		if err != nil {
			return err
		}
		refs = append(refs, Ref{ConfigID: l.ConfigID, PluginID: l.PluginID, Order: l.Order, Version: h})
	}
	text, err := json.Marshal(refs)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(text)
	hash, key := hex.EncodeToString(sum[:]), strconv.FormatUint(projectID, 10)
	if e, err := p.last.Get(ctx, key); err == nil && string(e.Value()) == hash {
		return nil
	} else if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("transform: chain of project %d: %w", projectID, err)
	}
	if _, err := command.Append(ctx, p.js, projectID, nil, 0, command.SetTransformations(text)); err != nil {
		return fmt.Errorf("transform: publish chain of project %d: %w", projectID, err)
	}
	// After the publish: a lost write only means the same chain is
	// published again next time.
	if _, err := p.last.PutString(ctx, key, hash); err != nil {
		return fmt.Errorf("transform: chain of project %d published, not noted: %w", projectID, err)
	}
	return nil
}
