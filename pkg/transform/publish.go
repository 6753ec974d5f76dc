package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/stream"
)

// Publisher puts a project's chain on the log (plugin.ChainPublisher): it
// stores each step's code and config as a content-addressed Version, then
// publishes an event.SetTransformations command naming them on the
// project's command subject. The ingester applies the chain to the events
// after the command in the stream (docs/architecture.md,
// "Transformations").
type Publisher struct {
	js       jetstream.JetStream
	versions *Versions
}

// NewPublisher returns a publisher over js (opening the version store).
func NewPublisher(ctx context.Context, js jetstream.JetStream) (*Publisher, error) {
	vs, err := OpenVersions(ctx, js)
	if err != nil {
		return nil, err
	}
	return &Publisher{js: js, versions: vs}, nil
}

// chainDistinctID is the distinct id of chain commands: the envelope
// needs one; the ingester never folds the command.
const chainDistinctID = "$transformations"

// PublishChain stores the chain's versions and publishes the command; the
// versions are stored before the command that names them.
func (p *Publisher) PublishChain(ctx context.Context, projectID uint64, chain []plugin.Link) error {
	refs := make([]Ref, 0, len(chain))
	for _, l := range chain {
		h, err := p.versions.Put(ctx, Version{Filename: l.Filename, Source: l.Source, Config: l.Config})
		if err != nil {
			return err
		}
		refs = append(refs, Ref{ConfigID: l.ConfigID, PluginID: l.PluginID, Order: l.Order, Version: h})
	}
	id := uuid.New()
	data, err := json.Marshal(map[string]any{
		"uuid": id.String(), "event": event.SetTransformations, "distinct_id": chainDistinctID,
		"timestamp":  time.Now().UTC().Format(time.RFC3339Nano),
		"properties": map[string]any{event.PropTransformations: refs},
	})
	if err != nil {
		return err
	}
	if _, err := stream.PublishCommand(ctx, p.js, projectID, id.String(), data); err != nil {
		return fmt.Errorf("transform: publish chain of project %d: %w", projectID, err)
	}
	return nil
}
