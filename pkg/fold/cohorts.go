package fold

import (
	"context"

	"github.com/personhub/personhub/pkg/event"
)

// CohortMember is one row of cohort_people: a distinct id's membership of
// a static cohort as of the command at stream sequence Version.
type CohortMember struct {
	ProjectID  uint64
	CohortID   uint64
	DistinctID string
	// PersonID is the id's owner at that point of the log (0: none).
	PersonID  uint64
	IsDeleted bool
	Version   uint64
}

// cohortIDs returns the distinct ids a static cohort command names (at
// most event.MaxCohortIDsPerEvent; others are ignored).
func cohortIDs(ev *event.Event) []string {
	if ev.Event != event.AddToStaticCohort && ev.Event != event.RemoveFromStaticCohort {
		return nil
	}
	list, _ := ev.Properties[event.PropCohortDistinctIDs].([]any)
	var out []string
	for i, raw := range list {
		if d, ok := raw.(string); ok && d != "" && i < event.MaxCohortIDsPerEvent {
			out = append(out, d)
		}
	}
	return out
}

// cohortMembers folds $add_to_static_cohort and $remove_from_static_cohort.
// An add keeps the ids a live person owns at this point of the log (an id
// nobody owns would make whoever sends it later a member); a removal ends
// the membership of every id named. The rows depend only on the distinct
// id state, which a redelivery after a crash reads as of this very point
// (committedView), and carry this sequence as version: every fold of the
// command writes the same rows, and a later command wins.
func (f *Folder) cohortMembers(ctx context.Context, in Input) error {
	cohort, ok := numberProp(in.Event.Properties, event.PropCohortID)
	if !ok || cohort == 0 {
		return nil
	}
	add := in.Event.Event == event.AddToStaticCohort
	for _, d := range cohortIDs(&in.Event) {
		k := didKey{in.ProjectID, d}
		if _, ok := f.dids[k]; !ok {
			if err := f.loadDistinctIDs(ctx, in.ProjectID, []string{d}); err != nil {
				return err
			}
		}
		row := f.dids[k].row
		var owner uint64
		if !row.IsDeleted {
			owner = row.PersonID
		}
		if add && owner == 0 {
			continue
		}
		f.members = append(f.members, CohortMember{ProjectID: in.ProjectID, CohortID: cohort, DistinctID: d,
			PersonID: owner, IsDeleted: !add, Version: in.Seq})
	}
	return nil
}
