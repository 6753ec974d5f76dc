package fold

import (
	"context"

	"github.com/personhub/personhub/pkg/event"
)

// The write lane (docs/architecture.md, "The write lane"): the ingester may
// fold an API command ahead of its place in the log, right after the
// event at sequence P it has folded last, and records that order in the
// log first. Such an Input has Seq = P and Origin = the command's own
// sequence S > P. Its rows are versioned P, so every guard keeps meaning
// "everything up to the version is folded": events after P, folded later,
// have higher sequences. Ties at P are the new case: event P itself, or an
// earlier lane command applied after P, may have changed the same person or
// distinct id in the same batch. The person guards already let an event
// through a row changed at its own sequence in this batch (dirtyAt); the
// distinct id guard does so for lane commands (didState.ahead). A row at P
// read from the store (not changed in this batch) was written by a batch
// that folded P and, since P's lane commands are folded in the batch that
// folds P and their record precedes its writes, those commands too.
//
// Only commands that create no person go by the lane: a person's id is
// the sequence that created it and its liveness as of a sequence is read
// from that id (person counts), which a creation at P named by S > P would
// break. LaneReady says which.

// Own is the input's own stream sequence: Origin for a lane command, else
// Seq.
func (in *Input) Own() uint64 {
	if in.Origin != 0 {
		return in.Origin
	}
	return in.Seq
}

// ahead reports whether the id's row already reflects in: a newer row, or
// one at in's sequence not made by this batch (for an ordinary event,
// any row at its sequence: only itself writes at it).
func (d *didState) ahead(in Input) bool {
	return d.row.Version > in.Seq || d.row.Version == in.Seq && (in.Origin == 0 || !d.dirty)
}

// LaneReady reports whether in, a command prepared (Prepare) after the
// inputs folded before it, may be folded ahead of its place: a deletion
// by person id, or a property write whose distinct id has a live owner
// at this point (a property write to an id without one creates a person).
func (f *Folder) LaneReady(ctx context.Context, in Input) (bool, error) {
	switch in.Event.Event {
	case event.DeletePerson, event.DeletePersonEvents:
		return true, nil
	case event.Set, event.DeletePersonProperty:
		p, err := f.personOf(ctx, in.ProjectID, in.Event.DistinctID)
		return p != nil, err
	}
	return false, nil
}
