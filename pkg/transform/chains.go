package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Ref is one step of a chain command: a plugin config in one version.
type Ref struct {
	ConfigID uint64 `json:"plugin_config_id"`
	PluginID uint64 `json:"plugin_id"`
	Order    int    `json:"order"`
	Version  string `json:"version"` // a Versions hash
}

// ParseRefs reads a chain command's payload (a JSON array of Ref): every
// ref needs a config id and a 64-hex-digit version.
func ParseRefs(data []byte) ([]Ref, error) {
	var refs []Ref
	if err := json.Unmarshal(data, &refs); err != nil {
		return nil, fmt.Errorf("transform: chain: %w", err)
	}
	for _, r := range refs {
		if r.ConfigID == 0 || !isHash(r.Version) {
			return nil, fmt.Errorf("transform: chain: bad step %+v", r)
		}
	}
	return refs, nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Chains is each project's chain as of the last chain command folded, and
// that command's stream sequence. The ingester sets it when it folds a
// chain command and reads it for every later event of the project, so the
// chain an event gets is fixed by its position in the log. Safe for
// concurrent use.
type Chains struct {
	mu sync.Mutex
	m  map[uint64]chainAt
}

type chainAt struct {
	seq  uint64
	refs []Ref
}

// NewChains returns an empty tracker (every project without steps).
func NewChains() *Chains { return &Chains{m: map[uint64]chainAt{}} }

// Set records the chain command at seq. A command at or below the
// sequence already recorded (a redelivery) changes nothing and answers
// false.
func (c *Chains) Set(project, seq uint64, refs []Ref) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.m[project]; ok && seq <= cur.seq {
		return false
	}
	c.m[project] = chainAt{seq: seq, refs: refs}
	return true
}

// At returns the project's chain and the sequence of the command that set
// it (0: none yet, no steps).
func (c *Chains) At(project uint64) ([]Ref, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.m[project]
	return cur.refs, cur.seq
}

// Resolve reads the versions of refs into runnable steps.
func Resolve(ctx context.Context, vs *Versions, refs []Ref) ([]Step, error) {
	steps := make([]Step, 0, len(refs))
	for _, r := range refs {
		v, err := vs.Get(ctx, r.Version)
		if err != nil {
			return nil, err
		}
		steps = append(steps, Step{ConfigID: r.ConfigID, PluginID: r.PluginID, Order: r.Order, Filename: v.Filename, Source: v.Source, Config: v.Config})
	}
	return steps, nil
}
