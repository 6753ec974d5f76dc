package ingest

import (
	"context"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
)

// Hook changes a batch's events before the fold: pipeline transformations
// (pkg/transform.Hook). It is called with every foldable message of a
// batch, in stream order, each time the batch is folded (a retry or an
// extended batch calls it again with the messages as parsed, never with
// its own output), so its result must depend only on the messages and the
// log before them.
type Hook interface {
	// Transform returns the inputs to fold, in the same order: each
	// possibly with a new Event; without those it drops and without its
	// own commands (event.SetTransformations). It returns only once what
	// it must remember about the batch is durable: the batch is committed
	// after it.
	Transform(ctx context.Context, in []HookInput) ([]fold.Input, error)
}

// PassingHook is a Hook that can tell, cheaply, that it would return a
// batch's inputs unchanged and remember nothing of them (no chain in force
// for any of them, none of its commands among them): the ingester then
// skips Transform and its copies of the batch (three copies of 20,000
// inputs of ~250 bytes were an eighth of the ingester's allocation in the bench's ingest).
type PassingHook interface {
	Hook
	Passes(in []fold.Input) bool
}

// HookInput is a foldable message: the parsed event, and whether it came
// from the API's command subject (a person write, not to be transformed).
type HookInput struct {
	fold.Input
	Command bool
}

// transform runs the hook on the batch's foldable inputs. Without a hook,
// chain commands are still taken out: they are the hook's, and folding one
// would make a person of its distinct id.
func (i *Ingester) transform(ctx context.Context, batch []*pending, inputs []fold.Input) ([]fold.Input, error) {
	if i.cfg.Hook == nil {
		// In place: inputs is the batch's own slice.
		out := inputs[:0]
		for _, in := range inputs {
			if in.Event.Event != event.SetTransformations {
				out = append(out, in)
			}
		}
		return out, nil
	}
	if len(inputs) == 0 {
		return inputs, nil
	}
	if ph, ok := i.cfg.Hook.(PassingHook); ok && ph.Passes(inputs) {
		return inputs, nil
	}
	hin := make([]HookInput, 0, len(inputs))
	for _, p := range batch {
		if p.foldable() {
			hin = append(hin, HookInput{Input: p.in, Command: p.command})
		}
	}
	return i.cfg.Hook.Transform(ctx, hin)
}
