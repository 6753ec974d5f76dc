package cohort

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/distinctids"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Static members go through the event log like person writes: the API
// records $add_to_static_cohort and $remove_from_static_cohort commands,
// the ingester folds them into cohort_people (pkg/fold), and the API
// answers once its commands are folded, so reads show the change and a
// replay of the log rebuilds the table.

// Log is where membership changes are recorded: the API's command log,
// bound to the key making the change (command.Log).
type Log interface {
	// Append publishes the commands of a project, in order, on its
	// command subject, and returns the last one's stream sequence.
	Append(ctx context.Context, projectID uint64, cmds ...command.Command) (uint64, error)
	// Await returns once the ingester of the project's partition has
	// folded seq; ErrPending when it has not within the writes' wait.
	Await(ctx context.Context, projectID, seq uint64) error
}

// ErrPending: the change is in the event log and will be applied, but the
// ingester has not folded it yet, so reads do not show it.
var ErrPending = command.ErrPending

var errNoLog = errors.New("cohort: static members need the event log, which is not configured")

// record publishes the commands and waits until they are folded.
func record(ctx context.Context, log Log, projectID uint64, cmds []command.Command) error {
	if len(cmds) == 0 {
		return nil
	}
	if log == nil {
		return errNoLog
	}
	seq, err := log.Append(ctx, projectID, cmds...)
	if err != nil {
		return err
	}
	return log.Await(ctx, projectID, seq)
}

// staticCohort returns a live static cohort.
func (s *Service) staticCohort(ctx context.Context, projectID, id uint64, verb string) (Cohort, error) {
	c, err := s.get(ctx, projectID, id)
	if err != nil {
		return c, err
	}
	if c.Deleted {
		return c, ErrNotFound
	}
	if !c.IsStatic {
		return c, invalid("is_static", "Persons can be %s static cohorts only.", verb)
	}
	return c, nil
}

// AddMembers adds persons to a live static cohort: 1 to MaxMembersPerAdd
// ids; unknown ones are ignored, none known is a 400. It returns the
// cohort once the ingester has folded the change (ErrPending with the
// cohort when it has not in time).
func (s *Service) AddMembers(ctx context.Context, log Log, projectID, id uint64, in Input) (View, error) {
	c, err := s.staticCohort(ctx, projectID, id, "added to")
	if err != nil {
		return View{}, err
	}
	if !in.HasMembers() {
		return View{}, invalid("person_ids", "Give 1 to %d person_ids or distinct_ids.", MaxMembersPerAdd)
	}
	ids, err := s.resolve(ctx, projectID, in, MaxMembersPerAdd)
	if err != nil {
		return View{}, err
	}
	return s.afterRecord(ctx, projectID, c, record(ctx, log, projectID, command.AddToStaticCohort(id, ids)))
}

// RemoveMember removes a person (integer id or uuid) from a live static
// cohort: every distinct id of the person that is a member stops being
// one. A person that is not a member (or does not exist) is ErrNotFound.
func (s *Service) RemoveMember(ctx context.Context, log Log, projectID, id uint64, person string) (View, error) {
	c, err := s.staticCohort(ctx, projectID, id, "removed from")
	if err != nil {
		return View{}, err
	}
	cond, arg, err := personCondition(person)
	if err != nil {
		return View{}, err
	}
	sql, args := chstore.StaticMembersAmong(projectID, id, chstore.LiveDistinctIDs(projectID, cond, arg)).Text()
	ids, err := s.strings(readCtx(ctx), sql+" ORDER BY distinct_id", args...)
	if err != nil {
		return View{}, fmt.Errorf("cohort: find members: %w", err)
	}
	if len(ids) == 0 {
		return View{}, ErrNotFound
	}
	return s.afterRecord(ctx, projectID, c, record(ctx, log, projectID, command.RemoveFromStaticCohort(id, ids)))
}

// afterRecord is the answer to a membership change: the cohort as reads
// now see it, and ErrPending when the change is not folded yet.
func (s *Service) afterRecord(ctx context.Context, projectID uint64, c Cohort, err error) (View, error) {
	if err != nil && !errors.Is(err, ErrPending) {
		return View{}, err
	}
	v, verr := s.view(ctx, projectID, c)
	if verr != nil {
		return View{}, verr
	}
	return v, err
}

// personCondition is the condition over a persons row naming the person
// given by integer id or uuid.
func personCondition(ref string) (string, any, error) {
	if n, err := strconv.ParseUint(ref, 10, 64); err == nil {
		return "id = ?", n, nil
	}
	if u, err := uuid.Parse(ref); err == nil {
		return "uuid = ?", u, nil
	}
	return "", nil, invalid("person_id", "A person is identified by its integer id or its uuid, not %q.", ref)
}

// resolve returns the distinct ids the given persons stand for: every id
// a person given by integer id or uuid has now, and each distinct id given
// that a live person owns. Unknown ids are ignored; none known is a 400.
// The fold checks ownership again at the command's point of the log.
func (s *Service) resolve(ctx context.Context, projectID uint64, in Input, max int) ([]string, error) {
	field := "person_ids"
	if len(in.PersonIDs) == 0 {
		field = "distinct_ids"
	}
	if len(in.PersonIDs)+len(in.DistinctIDs) > max {
		return nil, invalid(field, "At most %d persons can be added at once.", max)
	}
	var ints []uint64
	var uuids []uuid.UUID
	for _, id := range in.PersonIDs {
		cond, arg, err := personCondition(id)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(cond, "id") {
			ints = append(ints, arg.(uint64))
		} else {
			uuids = append(uuids, arg.(uuid.UUID))
		}
	}
	ctx = readCtx(ctx)
	var found []string
	if len(ints)+len(uuids) > 0 {
		var conds []string
		var args []any
		if len(ints) > 0 {
			conds, args = append(conds, "id IN ?"), append(args, statement.Set(ints))
		}
		if len(uuids) > 0 {
			conds, args = append(conds, "uuid IN ?"), append(args, statement.Set(uuids))
		}
		sql, sargs := chstore.LiveDistinctIDs(projectID, "("+strings.Join(conds, " OR ")+")", args...).Text()
		ids, err := s.strings(ctx, sql, sargs...)
		if err != nil {
			return nil, fmt.Errorf("cohort: find persons: %w", err)
		}
		found = append(found, ids...)
	}
	if len(in.DistinctIDs) > 0 {
		sql, args := distinctids.LiveIDs(projectID, in.DistinctIDs).Text()
		ids, err := s.strings(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("cohort: find distinct ids: %w", err)
		}
		found = append(found, ids...)
	}
	if len(found) == 0 {
		return nil, invalid(field, "None of the given persons exists.")
	}
	return uniqueSorted(found), nil
}

// strings runs a query of one String column.
func (s *Service) strings(ctx context.Context, sql string, args ...any) ([]string, error) {
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func uniqueSorted(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0]
	for _, v := range list {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// Members is the membership condition of a cohort (a soft-deleted one
// too) over a persons row: GET /cohorts/{id}/persons/.
func (s *Service) Members(ctx context.Context, projectID, id uint64) (propfilter.Clause, error) {
	c, err := s.get(ctx, projectID, id)
	if err != nil {
		return propfilter.Clause{}, err
	}
	return s.compile(ctx, projectID, c, nil)
}
