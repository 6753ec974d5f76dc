// Package action holds PostHog actions: saved event definitions that
// analysis entities of type "actions" name by id. An action matches an
// event when any of its steps does.
package action

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound: no live action with that id in the project.
var ErrNotFound = errors.New("action: not found")

// Step is one way an event matches the action.
type Step struct {
	// Event is the event name; "" matches every event.
	Event string `json:"event"`
	// Properties are filters in the persons list's filter language
	// (event and person properties), as the client gave them; nil: none.
	Properties json.RawMessage `json:"properties,omitempty"`
}

// Action is a saved event definition of a project.
type Action struct {
	ID        uint64    `json:"id"`
	ProjectID uint64    `json:"-"`
	Name      string    `json:"name"`
	Steps     []Step    `json:"steps"`
	Deleted   bool      `json:"deleted"`
	CreatedAt time.Time `json:"created_at"`
}

// Getter is what analysis needs of the action store.
type Getter interface {
	// Get returns a live action of the project, or ErrNotFound.
	Get(ctx context.Context, projectID, id uint64) (Action, error)
}
