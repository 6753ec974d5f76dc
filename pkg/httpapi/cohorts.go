package httpapi

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/cohort"
)

// cohortBody is the body limit of cohort writes: a create may upload a
// CSV of members.
const cohortBody = 8 << 20

// cohortJSON is PostHog's cohort shape. Membership is evaluated when read;
// last_calculation is the time of the count (the answer's, except in
// persons/cohorts/, which answers with the last count and is_calculating
// while a newer one is calculated); keys act for organizations, so
// created_by is null.
type cohortJSON struct {
	ID                uint64          `json:"id"`
	Name              *string         `json:"name"`
	Description       string          `json:"description"`
	Groups            json.RawMessage `json:"groups"`
	Deleted           bool            `json:"deleted"`
	Filters           json.RawMessage `json:"filters"`
	Query             any             `json:"query"`
	IsCalculating     bool            `json:"is_calculating"`
	CreatedBy         any             `json:"created_by"`
	CreatedAt         time.Time       `json:"created_at"`
	LastCalculation   time.Time       `json:"last_calculation"`
	ErrorsCalculating int             `json:"errors_calculating"`
	Count             *uint64         `json:"count"`
	IsStatic          bool            `json:"is_static"`
	CohortType        string          `json:"cohort_type"`
	ExperimentSet     []any           `json:"experiment_set"`
}

func toCohortJSON(v cohort.View) cohortJSON {
	groups := v.Groups
	if groups == nil {
		groups = json.RawMessage("[]")
	}
	return cohortJSON{ID: v.ID, Name: v.Name, Description: v.Description, Groups: groups, Deleted: v.Deleted,
		Filters: v.Filters, CreatedAt: v.CreatedAt, LastCalculation: v.CalculatedAt.UTC().Truncate(time.Millisecond), IsCalculating: v.Calculating,
		Count: v.Count, IsStatic: v.IsStatic, CohortType: v.Type(), ExperimentSet: []any{}}
}

// listCohorts serves GET /api/projects/{project_id}/cohorts/: live cohorts,
// newest first; type=static|dynamic, search (name contains).
func (a *API) listCohorts(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	win, err := paginate(q, offsetPaging)
	if err != nil {
		return err
	}
	lq := cohort.ListQuery{Type: q.Get("type"), Search: q.Get("search")}
	if lq.Type != "" && lq.Type != "static" && lq.Type != "dynamic" {
		return invalid("type", "type must be static or dynamic.")
	}
	all, err := a.cohorts.List(r.Context(), proj.ID, lq)
	if err != nil {
		return err
	}
	start, end := win.bounds(len(all))
	page, err := a.cohorts.Counts(r.Context(), proj.ID, all[start:end])
	if err != nil {
		return err
	}
	results := make([]cohortJSON, len(page))
	for i, v := range page {
		results[i] = toCohortJSON(v)
	}
	next, prev := a.pageLinks(r, win, uint64(len(all)))
	writeJSON(w, http.StatusOK, envelope{Count: uint64(len(all)), Next: next, Previous: prev, Results: results})
	return nil
}

// createCohort serves POST /api/projects/{project_id}/cohorts/: a JSON
// body, or multipart/form-data with a `csv` file of members (a static
// cohort) and the other fields as form values.
func (a *API) createCohort(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	var in cohort.Input
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		in, err = cohortForm(r)
	} else {
		var body []byte
		if body, err = readJSON(r); err == nil {
			in, err = cohort.Decode(body)
		}
	}
	if err != nil {
		return err
	}
	v, err := a.cohorts.Create(r.Context(), a.cohortLog(), proj.ID, in)
	if errors.Is(err, cohort.ErrPending) {
		// The cohort exists and its members are in the log: the client
		// needs its id, so the answer is the cohort, 202 (count partial).
		writeJSON(w, http.StatusAccepted, toCohortJSON(v))
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toCohortJSON(v))
	return nil
}

// cohortForm reads a multipart create: name, description, is_static and
// the csv file (which makes the cohort static).
func cohortForm(r *http.Request) (cohort.Input, error) {
	if err := r.ParseMultipartForm(cohortBody); err != nil {
		return cohort.Input{}, bodyError(r, invalid("body", "The multipart body could not be read."))
	}
	fields := map[string]any{"is_static": true}
	for _, k := range []string{"name", "description"} {
		if v := r.PostFormValue(k); v != "" {
			fields[k] = v
		}
	}
	if v := r.PostFormValue("is_static"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cohort.Input{}, invalid("is_static", "is_static must be true or false.")
		}
		fields["is_static"] = b
	}
	f, _, err := r.FormFile("csv")
	if err != nil {
		return cohort.Input{}, required("csv")
	}
	defer f.Close()
	field, ids, err := readMemberCSV(f)
	if err != nil {
		return cohort.Input{}, err
	}
	fields[field] = ids
	body, err := json.Marshal(fields)
	if err != nil {
		return cohort.Input{}, err
	}
	return cohort.Decode(body)
}

// readMemberCSV reads one id per row from the first column. A first row
// "person_id" (integer ids or uuids) or "distinct_id" is a header naming
// the kind; without one every row is a distinct id (as PostHog's
// single-column upload). Blank rows are skipped.
func readMemberCSV(f io.Reader) (field string, ids []string, err error) {
	rd := csv.NewReader(f)
	rd.FieldsPerRecord = -1
	field = "distinct_ids"
	for row := 0; ; row++ {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, invalid("csv", "The CSV file is malformed: "+err.Error())
		}
		cell := strings.TrimSpace(strings.TrimPrefix(rec[0], "\ufeff"))
		if row == 0 {
			switch strings.ToLower(cell) {
			case "person_id":
				field = "person_ids"
				continue
			case "distinct_id":
				continue
			}
		}
		if cell != "" {
			ids = append(ids, cell)
		}
		if len(ids) > cohort.MaxMembersPerCreate {
			return "", nil, invalid("csv", "At most "+strconv.Itoa(cohort.MaxMembersPerCreate)+" rows.")
		}
	}
	if len(ids) == 0 {
		return "", nil, invalid("csv", "The CSV file names no persons.")
	}
	return field, ids, nil
}

// getCohort serves GET /api/projects/{project_id}/cohorts/{id}/ (a
// soft-deleted cohort too, as PostHog).
func (a *API) getCohort(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	v, err := a.cohorts.Get(r.Context(), project, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCohortJSON(v))
	return nil
}

// patchCohort serves PATCH /api/projects/{project_id}/cohorts/{id}/;
// deleted: true soft-deletes, false restores.
func (a *API) patchCohort(w http.ResponseWriter, r *http.Request) error {
	return a.changeCohort(w, r, a.cohorts.Update)
}

// addPersonsToCohort serves PATCH .../cohorts/{id}/add_persons_to_static_cohort/
// with {"person_ids": [...]} and/or {"distinct_ids": [...]}.
func (a *API) addPersonsToCohort(w http.ResponseWriter, r *http.Request) error {
	return a.changeCohort(w, r, func(ctx context.Context, project, id uint64, in cohort.Input) (cohort.View, error) {
		return a.cohorts.AddMembers(ctx, a.cohortLog(), project, id, in)
	})
}

type cohortChange func(ctx context.Context, project, id uint64, in cohort.Input) (cohort.View, error)

func (a *API) changeCohort(w http.ResponseWriter, r *http.Request, change cohortChange) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	in, err := cohort.Decode(body)
	if err != nil {
		return err
	}
	v, err := change(r.Context(), project, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCohortJSON(v))
	return nil
}

// deleteCohort serves DELETE /api/projects/{project_id}/cohorts/{id}/: a
// soft delete, 204 (PostHog deletes with PATCH deleted: true only).
func (a *API) deleteCohort(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	if err := a.cohorts.Delete(r.Context(), project, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// personCohorts serves GET /api/projects/{project_id}/persons/cohorts/?person_id=:
// the live cohorts the person is a member of, by id.
func (a *API) personCohorts(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	raw := r.URL.Query().Get("person_id")
	var p chstore.PersonRecord
	if raw == "" {
		return required("person_id")
	} else if n, err := parseID(raw); err == nil {
		p, err = a.store.GetPerson(r.Context(), proj.ID, n)
		if err != nil {
			return err
		}
	} else if u, err := uuid.Parse(raw); err == nil {
		p, err = a.store.GetPersonByUUID(r.Context(), proj.ID, u)
		if err != nil {
			return err
		}
	} else {
		return invalid("person_id", "A person is identified by its integer id or its uuid.")
	}
	views, err := a.cohorts.PersonCohorts(r.Context(), proj.ID, p.ID, p.DistinctIDs)
	if err != nil {
		return err
	}
	results := make([]cohortJSON, len(views))
	for i, v := range views {
		results[i] = toCohortJSON(v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results})
	return nil
}
