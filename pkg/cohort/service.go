package cohort

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/kvjson"
)

// Bucket is the JetStream KV bucket of cohort definitions: key
// "<project>.<id>", value the JSON Cohort; key "seq" the last id given out.
const Bucket = "cohorts"

// Service stores cohorts and evaluates their membership.
type Service struct {
	records *kvjson.Records[Cohort]
	conn    driver.Conn
	actions Actions // nil: every action a behavioural filter names is unknown
	now     func() time.Time
	// countCache holds the counts persons/cohorts/ answers with.
	countCache countCache
	// refreshes recalculates stale counts in the background.
	refreshes *background
	// defs holds each project's definitions as of the bucket's version.
	defs definitions
}

// Open creates (or binds to) the cohorts bucket; conn is ClickHouse
// (cohort_people, persons, person_distinct_ids, events); actions resolves
// the actions behavioural filters name (nil: none is known).
func Open(ctx context.Context, js jetstream.JetStream, conn driver.Conn, actions Actions) (*Service, error) {
	r, err := kvjson.OpenRecords[Cohort](ctx, js, Bucket, "personhub cohort definitions")
	if err != nil {
		return nil, fmt.Errorf("cohort: %w", err)
	}
	return &Service{records: r, conn: conn, actions: actions, now: time.Now, refreshes: newBackground()}, nil
}

// Close stops the background recalculation of counts and waits for it;
// call it before closing the ClickHouse connection.
func (s *Service) Close() { s.refreshes.close() }

// View is a cohort with its member count (nil when the definition cannot
// be evaluated, e.g. it names a cohort since deleted) at CalculatedAt;
// Calculating: a newer count is being calculated.
type View struct {
	Cohort
	Count        *uint64
	CalculatedAt time.Time
	Calculating  bool
}

// Create stores a new cohort. A static cohort's members, when given, are
// recorded in the log first, so a cohort never appears without them; none
// of them known is a 400. ErrPending comes with the stored cohort when the
// ingester has not folded its members in time.
func (s *Service) Create(ctx context.Context, log Log, projectID uint64, in Input) (View, error) {
	c := Cohort{Name: in.Name, Groups: in.Groups, CreatedAt: s.now().UTC().Truncate(time.Millisecond)}
	if in.Description != nil {
		c.Description = *in.Description
	}
	if in.IsStatic != nil {
		c.IsStatic = *in.IsStatic
	}
	if in.Deleted != nil {
		c.Deleted = *in.Deleted
	}
	if c.Groups == nil {
		c.Groups = []byte("[]")
	}
	switch {
	case !c.IsStatic && in.HasMembers():
		return View{}, invalid("is_static", "Members can be given to static cohorts only (is_static: true).")
	case !c.IsStatic:
		if in.Filters == nil {
			return View{}, invalid("filters", "Must contain a 'properties' key with type and values.")
		}
		c.Filters = in.Filters
		if _, err := s.compile(ctx, projectID, c, nil); err != nil {
			return View{}, err
		}
	}
	id, err := s.records.NextID(ctx)
	if err != nil {
		return View{}, fmt.Errorf("cohort: %w", err)
	}
	c.ID = id
	var seq uint64
	if c.IsStatic && in.HasMembers() {
		ids, err := s.resolve(ctx, projectID, in, MaxMembersPerCreate)
		if err != nil {
			return View{}, err
		}
		if log == nil {
			return View{}, errNoLog
		}
		if seq, err = log.Append(ctx, projectID, command.AddToStaticCohort(id, ids)...); err != nil {
			return View{}, err
		}
	}
	if err := s.records.Create(ctx, projectID, id, c); err != nil {
		return View{}, fmt.Errorf("cohort: %w", err)
	}
	var waited error
	if seq > 0 {
		waited = log.Await(ctx, projectID, seq)
	}
	return s.afterRecord(ctx, projectID, c, waited)
}

// Get returns a cohort, soft-deleted ones included (as PostHog).
func (s *Service) Get(ctx context.Context, projectID, id uint64) (View, error) {
	c, err := s.get(ctx, projectID, id)
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, projectID, c)
}

func (s *Service) get(ctx context.Context, projectID, id uint64) (Cohort, error) {
	c, err := s.records.Get(ctx, projectID, id)
	if errors.Is(err, kvjson.ErrNotFound) {
		return Cohort{}, ErrNotFound
	}
	if err != nil {
		return Cohort{}, fmt.Errorf("cohort: %w", err)
	}
	return c, nil
}

func (s *Service) view(ctx context.Context, projectID uint64, c Cohort) (View, error) {
	views, err := s.withCounts(ctx, projectID, []Cohort{c})
	if err != nil {
		return View{}, err
	}
	return views[0], nil
}

// ListQuery selects cohorts of a project.
type ListQuery struct {
	// Type is "static", "dynamic" or "" (both).
	Type string
	// Search is a case-insensitive substring of the name.
	Search string
}

// List returns the live cohorts, newest first (created_at, then id), with
// no counts (Counts adds them to a page).
func (s *Service) List(ctx context.Context, projectID uint64, q ListQuery) ([]Cohort, error) {
	all, err := s.live(ctx, projectID)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, c := range all {
		switch {
		case q.Type == "static" && !c.IsStatic, q.Type == "dynamic" && c.IsStatic:
			continue
		case q.Search != "" && (c.Name == nil || !strings.Contains(strings.ToLower(*c.Name), strings.ToLower(q.Search))):
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Cohort) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return out, nil
}

// live returns the project's non-deleted cohorts by id.
func (s *Service) live(ctx context.Context, projectID uint64) ([]Cohort, error) {
	all, err := s.defs.list(ctx, s.records, projectID)
	if err != nil {
		return nil, fmt.Errorf("cohort: %w", err)
	}
	out := all[:0]
	for _, c := range all {
		if !c.Deleted {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Cohort) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Counts adds the member counts to a page of cohorts.
func (s *Service) Counts(ctx context.Context, projectID uint64, page []Cohort) ([]View, error) {
	return s.withCounts(ctx, projectID, page)
}

// Update applies the given fields. deleted=true soft-deletes, false
// restores. A dynamic cohort's new filters are compiled first (an unknown
// cohort or a reference loop is a 400).
func (s *Service) Update(ctx context.Context, projectID, id uint64, in Input) (View, error) {
	if in.HasMembers() {
		return View{}, invalid("person_ids", "Add members with PATCH .../add_persons_to_static_cohort/.")
	}
	if in.IsStatic != nil {
		cur, err := s.get(ctx, projectID, id)
		if err != nil {
			return View{}, err
		}
		if *in.IsStatic != cur.IsStatic {
			return View{}, invalid("is_static", "A cohort cannot change between static and dynamic.")
		}
	}
	c, err := s.records.Modify(ctx, projectID, id, func(c *Cohort) error {
		if in.Name != nil || in.nameNull {
			c.Name = in.Name
		}
		if in.Description != nil {
			c.Description = *in.Description
		}
		if in.Deleted != nil {
			c.Deleted = *in.Deleted
		}
		if in.Groups != nil {
			c.Groups = in.Groups
		}
		if in.Filters != nil {
			if c.IsStatic {
				return invalid("filters", "A static cohort has members, not filters.")
			}
			c.Filters = in.Filters
			if _, err := s.compile(ctx, projectID, *c, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, kvjson.ErrNotFound) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, projectID, c)
}

// Delete soft-deletes a live cohort; deleting twice is ErrNotFound.
func (s *Service) Delete(ctx context.Context, projectID, id uint64) error {
	_, err := s.records.Modify(ctx, projectID, id, func(c *Cohort) error {
		if c.Deleted {
			return ErrNotFound
		}
		c.Deleted = true
		return nil
	})
	if errors.Is(err, kvjson.ErrNotFound) {
		return ErrNotFound
	}
	if err == nil {
		s.countCache.drop(projectID, id)
	}
	return err
}

// PersonCohorts returns the live cohorts the person (its id and the
// distinct ids its row lists) is a member of, by id. Membership is
// evaluated now, for this person alone; counts are the last calculated
// ones (CountMaxAge).
func (s *Service) PersonCohorts(ctx context.Context, projectID, personID uint64, distinctIDs []string) ([]View, error) {
	all, err := s.live(ctx, projectID)
	if err != nil {
		return nil, err
	}
	member, err := s.memberships(ctx, projectID, all, personScope{id: personID, distinctIDs: distinctIDs})
	if err != nil {
		return nil, err
	}
	var in []Cohort
	for i, c := range all {
		if member[i] {
			in = append(in, c)
		}
	}
	return s.cachedCounts(ctx, projectID, in)
}
