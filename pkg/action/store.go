package action

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/kvjson"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Bucket is the JetStream KV bucket of actions: key "<project>.<id>",
// value the JSON Action; key "seq" the last id given out.
const Bucket = "actions"

// Limits of an action's fields.
const (
	MaxNameRunes = 400
	MaxSteps     = 100
)

// Error is an invalid input: the API answers 400 naming Attr.
type Error struct {
	Attr, Detail string
}

func (e *Error) Error() string { return e.Detail }

// Field is the input field the error is about.
func (e *Error) Field() string { return e.Attr }

func invalid(attr, format string, a ...any) *Error {
	return &Error{Attr: attr, Detail: fmt.Sprintf(format, a...)}
}

// Store keeps the actions of every project in JetStream KV, with the
// control plane's records: they are definitions users write, small and
// few, read by id.
type Store struct {
	records *kvjson.Records[Action]
}

// Open creates (or binds to) the actions bucket.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	r, err := kvjson.OpenRecords[Action](ctx, js, Bucket, "personhub actions (saved event definitions)")
	if err != nil {
		return nil, fmt.Errorf("action: %w", err)
	}
	return &Store{records: r}, nil
}

// Input is a create or PATCH body; nil fields are not given.
type Input struct {
	Name    *string
	Steps   []Step
	Deleted *bool
	steps   bool // steps was given
}

// Decode reads a JSON body {"name", "steps", "deleted"}; other fields are
// ignored (PostHog's action has many this store does not keep).
func Decode(body []byte) (Input, error) {
	var raw struct {
		Name    json.RawMessage `json:"name"`
		Steps   json.RawMessage `json:"steps"`
		Deleted json.RawMessage `json:"deleted"`
	}
	var in Input
	if len(bytes.TrimSpace(body)) == 0 {
		return in, nil
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return in, invalid("body", "The body must be a JSON object.")
	}
	if raw.Name != nil {
		var s string
		if err := json.Unmarshal(raw.Name, &s); err != nil {
			return in, invalid("name", "name must be a string.")
		}
		in.Name = &s
	}
	if raw.Deleted != nil {
		var b bool
		if err := json.Unmarshal(raw.Deleted, &b); err != nil {
			return in, invalid("deleted", "deleted must be a boolean.")
		}
		in.Deleted = &b
	}
	if raw.Steps != nil {
		steps, err := decodeSteps(raw.Steps)
		if err != nil {
			return in, err
		}
		in.Steps, in.steps = steps, true
	}
	return in, nil
}

// decodeSteps checks the steps: a non-empty list of objects whose event is
// a string or null and whose properties parse as a filter.
func decodeSteps(raw json.RawMessage) ([]Step, error) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("steps", "steps must be a list of objects.")
	}
	if len(list) == 0 || len(list) > MaxSteps {
		return nil, invalid("steps", "An action needs 1 to %d steps.", MaxSteps)
	}
	steps := make([]Step, len(list))
	for i, m := range list {
		if ev, ok := m["event"]; ok && string(ev) != "null" {
			if err := json.Unmarshal(ev, &steps[i].Event); err != nil {
				return nil, invalid("steps", "Step %d: event must be a string or null.", i)
			}
		}
		if p, ok := m["properties"]; ok && string(p) != "null" {
			if _, err := propfilter.Parse(string(p)); err != nil {
				return nil, invalid("steps", "Step %d: properties are unparsable! %v", i, err)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, p); err != nil {
				return nil, invalid("steps", "Step %d: properties are unparsable!", i)
			}
			steps[i].Properties = buf.Bytes()
		}
	}
	return steps, nil
}

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxNameRunes {
		return invalid("name", "name must be 1 to %d characters.", MaxNameRunes)
	}
	return nil
}

// Create stores a new action; name and steps are required.
func (s *Store) Create(ctx context.Context, projectID uint64, in Input) (Action, error) {
	if in.Name == nil {
		return Action{}, invalid("name", "This field is required.")
	}
	if err := checkName(*in.Name); err != nil {
		return Action{}, err
	}
	if !in.steps {
		return Action{}, invalid("steps", "This field is required.")
	}
	id, err := s.records.NextID(ctx)
	if err != nil {
		return Action{}, fmt.Errorf("action: %w", err)
	}
	a := Action{ID: id, Name: *in.Name, Steps: in.Steps, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if in.Deleted != nil {
		a.Deleted = *in.Deleted
	}
	if err := s.records.Create(ctx, projectID, id, a); err != nil {
		return Action{}, fmt.Errorf("action: %w", err)
	}
	a.ProjectID = projectID
	return a, nil
}

// Get returns a live action (the Getter of analysis).
func (s *Store) Get(ctx context.Context, projectID, id uint64) (Action, error) {
	a, err := s.Retrieve(ctx, projectID, id)
	if err == nil && a.Deleted {
		return Action{}, ErrNotFound
	}
	return a, err
}

// Retrieve returns an action, soft-deleted ones included.
func (s *Store) Retrieve(ctx context.Context, projectID, id uint64) (Action, error) {
	a, err := s.records.Get(ctx, projectID, id)
	if errors.Is(err, kvjson.ErrNotFound) {
		return Action{}, ErrNotFound
	}
	if err != nil {
		return Action{}, fmt.Errorf("action: %w", err)
	}
	a.ProjectID = projectID
	return a, nil
}

// List returns the project's live actions, by id.
func (s *Store) List(ctx context.Context, projectID uint64) ([]Action, error) {
	all, err := s.records.List(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("action: %w", err)
	}
	out := all[:0]
	for _, a := range all {
		if !a.Deleted {
			a.ProjectID = projectID
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Action) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Update applies the given fields; a soft-deleted action can be restored
// with deleted=false.
func (s *Store) Update(ctx context.Context, projectID, id uint64, in Input) (Action, error) {
	if in.Name != nil {
		if err := checkName(*in.Name); err != nil {
			return Action{}, err
		}
	}
	a, err := s.records.Modify(ctx, projectID, id, func(a *Action) error {
		if in.Name != nil {
			a.Name = *in.Name
		}
		if in.steps {
			a.Steps = in.Steps
		}
		if in.Deleted != nil {
			a.Deleted = *in.Deleted
		}
		return nil
	})
	if errors.Is(err, kvjson.ErrNotFound) {
		return Action{}, ErrNotFound
	}
	if err != nil {
		return Action{}, fmt.Errorf("action: %w", err)
	}
	a.ProjectID = projectID
	return a, nil
}

// Delete soft-deletes a live action: ErrNotFound when it is already
// deleted, so deleting twice is a 404 like persons.
func (s *Store) Delete(ctx context.Context, projectID, id uint64) error {
	_, err := s.records.Modify(ctx, projectID, id, func(a *Action) error {
		if a.Deleted {
			return ErrNotFound
		}
		a.Deleted = true
		return nil
	})
	if errors.Is(err, kvjson.ErrNotFound) {
		return ErrNotFound
	}
	return err
}
