package insight

import (
	"context"
	"time"

	"github.com/personhub/personhub/pkg/propfilter"
)

// endOfTime bounds scans that have no end: the last second a ClickHouse
// DateTime holds.
var endOfTime = time.Unix(1<<32-1, 0)

// ActionEvents is a SELECT of the events matching action actionID at or
// after since, attributed to current, live persons, with at least the
// columns pid (the person) and uuid: what behavioural cohort filters on
// actions count (pkg/cohort). The action resolves as the analysis routes
// resolve it (an unknown one is an *Error with Attr "actions"); cohort
// filters inside its steps compile through cohorts.
func (st *Store) ActionEvents(ctx context.Context, project, actionID uint64, since time.Time, cohorts propfilter.CohortResolver) (string, []any, error) {
	fs := newFilters()
	fs.ctx, fs.cohorts = ctx, cohorts
	if fs.cohorts == nil {
		fs.cohorts = noCohorts{}
	}
	where, err := st.seriesCond(ctx, project, fs, Entity{Type: "actions", ActionID: actionID})
	if err != nil {
		return "", nil, err
	}
	sql, args := scan{project: project, from: since, to: endOfTime, f: fs, where: where}.sql()
	return sql, args, nil
}
