package transform

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/personhub/personhub/pkg/plugin"
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

// Chains is each project's chain as of every chain command folded: a
// history, so the chain an event gets is fixed by its position in the log
// (the last command below its sequence), whatever order batches are
// folded, refolded or replayed in. Chain changes are rare, so the history
// is small. Safe for concurrent use.
type Chains struct {
	mu sync.Mutex
	m  map[uint64][]chainAt // by project, ascending seq
}

type chainAt struct {
	seq  uint64
	refs []Ref
}

// NewChains returns an empty tracker (every project without steps).
func NewChains() *Chains { return &Chains{m: map[uint64][]chainAt{}} }

// Set records the chain command at seq. A command already recorded (a
// redelivery, a refold) changes nothing and answers false.
func (c *Chains) Set(project, seq uint64, refs []Ref) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.m[project]
	i, found := slices.BinarySearchFunc(h, seq, func(a chainAt, s uint64) int { return cmp.Compare(a.seq, s) })
	if found {
		return false
	}
	c.m[project] = slices.Insert(h, i, chainAt{seq: seq, refs: refs})
	return true
}

// At returns the chain in force for an event of the project at seq, and
// the sequence of the command that set it (0: none, no steps).
func (c *Chains) At(project, seq uint64) ([]Ref, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.m[project]
	i, _ := slices.BinarySearchFunc(h, seq, func(a chainAt, s uint64) int { return cmp.Compare(a.seq, s) })
	if i == 0 {
		return nil, 0
	}
	return h[i-1].refs, h[i-1].seq
}

// Resolve reads the versions of refs into runnable steps.
func Resolve(ctx context.Context, vs *Versions, refs []Ref) ([]Step, error) {
	steps := make([]Step, 0, len(refs))
	for _, r := range refs {
		v, err := vs.Get(ctx, r.Version)
		if err != nil {
			return nil, err
		}
		steps = append(steps, Step{ConfigID: r.ConfigID, PluginID: r.PluginID, Order: r.Order, Filename: v.Filename, Source: v.Source, Config: v.Config, Attachments: v.Attachments, hash: r.Version})
	}
	return steps, nil
}

// Steps are a chain read from the plugin store as runnable steps.
func Steps(links []plugin.Link) []Step {
	steps := make([]Step, len(links))
	for i, l := range links {
		steps[i] = Step{ConfigID: l.ConfigID, PluginID: l.PluginID, Order: l.Order, Filename: l.Filename, Source: l.Source, Config: l.Config, Attachments: l.Attachments}
	}
	return steps
}
