package httpapi

import (
	"net/url"
	"strings"
)

// walkCase is one operation's requests in TestOpenAPIWalk: path (default:
// the route's, ids of the fixtures filled in), a good request and bad
// ones (each is also sent without a key when the route needs one).
type walkCase struct {
	path string
	good walkReq
	bad  []walkReq
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

// Bad inputs the document describes.
var (
	badLimit  = walkReq{query: "limit=0"}
	badFormat = walkReq{query: "format=xml"}
	badPage   = walkReq{query: "page=0"}
)

// badID is path with an id that is not an integer: 404, as an unknown one.
func badID(path string) walkReq { return walkReq{path: path, status: 404} }

// walkCases are the walk's requests, keyed by method and path as the
// route table writes them; fixtures name the objects.
func walkCases(fx *walkFixtures) map[string]walkCase {
	proj := fx.fill("/api/projects/{project_id}/")
	persons := proj + "persons/"
	person := persons + fx.person + "/"
	pt := fx.fill("/api/organizations/{organization_id}/pipeline_transformations/")
	events := `[{"id":"signup","type":"events","order":0},{"id":"purchase","type":"events","order":1}]`
	pageview := `[{"id":"$pageview","type":"events"}]`
	trends := func(kv ...string) string {
		return q(append([]string{"events", pageview, "date_from", "2026-04-01", "date_to", "2026-05-31", "interval", "day",
			"entity_id", "$pageview", "entity_type", "events"}, kv...)...)
	}
	trendsQ := trends()
	// A transformation installed from the repository, which can be
	// checked for updates and upgraded.
	fromURL := fx.post(pt, `{"url":"https://github.com/personhub/plugin-drop-events"}`)
	otherPerson := func(distinctID string) string { return persons + fx.personID(distinctID) + "/" }
	c := map[string]walkCase{
		"GET /api/schema/": {good: walkReq{query: "format=yaml"}, bad: []walkReq{{query: "format=xml"}}},
		"GET /healthz":     {},
		"GET /readyz":      {},

		"GET /api/projects/":                {good: walkReq{query: "limit=10"}, bad: []walkReq{badLimit}},
		"GET /api/projects/{project_id}/":   {bad: []walkReq{{path: "/api/projects/999999/", status: 404, semantic: true}}},
		"PATCH /api/projects/{project_id}/": {good: walkReq{body: `{"timezone":"Europe/Berlin"}`}, bad: []walkReq{{body: `{"anonymize_ips":"yes"}`}}},

		"GET /api/projects/{project_id}/persons/": {good: walkReq{query: q("search", "walk", "limit", "5")},
			bad: []walkReq{{query: "limit=1001"}, badFormat, {query: q("properties", "[{"), semantic: true}}},
		"GET /api/projects/{project_id}/persons/values/":             {good: walkReq{query: q("key", "plan")}, bad: []walkReq{badFormat}},
		"GET /api/projects/{project_id}/persons/properties_at_time/": {good: walkReq{query: q("distinct_id", "walk-1", "timestamp", "2026-06-01T00:00:00Z")}, bad: []walkReq{{query: q("distinct_id", "walk-1")}}},
		"GET /api/projects/{project_id}/persons/cohorts/":            {good: walkReq{query: q("person_id", fx.person)}, bad: []walkReq{{}}},
		"GET /api/projects/{project_id}/persons/batch_by_distinct_ids/": {good: walkReq{query: q("distinct_ids", `["walk-1"]`)},
			bad: []walkReq{badFormat, {query: q("distinct_ids", "walk-1"), semantic: true}}},
		"POST /api/projects/{project_id}/persons/batch_by_distinct_ids/": {good: walkReq{body: `{"distinct_ids":["walk-1","nobody"]}`},
			bad: []walkReq{{body: `{"distinct_ids":"walk-1"}`}}},
		"GET /api/projects/{project_id}/persons/batch_by_uuids/": {good: walkReq{query: q("uuids", `["00000000-0000-0000-0000-000000000000"]`)},
			bad: []walkReq{badFormat}},
		"POST /api/projects/{project_id}/persons/batch_by_uuids/": {good: walkReq{body: `{"uuids":["00000000-0000-0000-0000-000000000000"]}`},
			bad: []walkReq{{body: `{"uuids":["x"]}`}}},
		"GET /api/projects/{project_id}/persons/activity/": {good: walkReq{query: "limit=5"}, bad: []walkReq{badPage, {query: "limit=101"}}},
		"POST /api/projects/{project_id}/persons/bulk_delete/": {good: walkReq{body: `{"distinct_ids":["walk-bulk"],"delete_events":false}`, status: 202},
			bad: []walkReq{{body: `{"distinct_ids":"walk-bulk"}`}}},
		"POST /api/projects/{project_id}/persons/reset_person_distinct_id/": {good: walkReq{body: `{"distinct_id":"walk-reset-2"}`, status: 202},
			bad: []walkReq{{body: `{}`}}},
		"GET /api/projects/{project_id}/persons/deletion_status/": {good: walkReq{query: q("status", "all")}, bad: []walkReq{{query: q("status", "lost")}}},

		"GET /api/projects/{project_id}/persons/trends/": {good: walkReq{query: trendsQ},
			bad: []walkReq{{query: trends("interval", "fortnight")}, {query: trends("limit", "0")}}},
		"GET /api/projects/{project_id}/persons/stickiness/": {good: walkReq{query: trends("stickiness_days", "1")},
			bad: []walkReq{{query: trends("offset", "-1")}}},
		"GET /api/projects/{project_id}/persons/lifecycle/": {good: walkReq{query: trends("target_date", "2026-05-01", "lifecycle_type", "new")},
			bad: []walkReq{{query: trends("target_date", "2026-05-01", "lifecycle_type", "old")}}},
		"GET /api/projects/{project_id}/persons/retention/": {good: walkReq{query: q("target_entity", `{"id":"signup","type":"events"}`,
			"returning_entity", `{"id":"purchase","type":"events"}`, "period", "Day", "total_intervals", "7", "selected_interval", "0", "date_to", "2026-05-05")},
			bad: []walkReq{{query: q("target_entity", `{"id":"signup","type":"events"}`, "period", "Year")}}},
		"GET /api/projects/{project_id}/persons/path/": {good: walkReq{query: q("date_from", "2026-04-01", "date_to", "2026-05-31", "include_event_types", `["$pageview","custom_event"]`)},
			bad: []walkReq{badFormat}},
		"POST /api/projects/{project_id}/persons/path/": {good: walkReq{body: `{"date_from":"2026-04-01","date_to":"2026-05-31","include_event_types":["$pageview"]}`},
			bad: []walkReq{{body: `{"date_from":"2026-04-01"}`, query: "limit=0"}}},
		"GET /api/projects/{project_id}/persons/funnel/": {good: walkReq{query: q("events", events, "date_from", "2026-04-01", "date_to", "2026-05-31", "funnel_step", "1")},
			bad: []walkReq{{query: q("events", events, "funnel_step", "first")}}},
		"POST /api/projects/{project_id}/persons/funnel/": {good: walkReq{body: `{"events":` + events + `,"date_from":"2026-04-01","date_to":"2026-05-31","funnel_step":2}`},
			bad: []walkReq{{body: `{"events":` + events + `}`, query: "format=xml"}}},
		"GET /api/projects/{project_id}/persons/funnel/correlation/": {good: walkReq{query: q("events", events, "date_from", "2026-04-01", "date_to", "2026-05-31",
			"funnel_correlation_person_entity", `{"id":"$pageview","type":"events"}`, "funnel_correlation_person_converted", "true")},
			bad: []walkReq{{query: q("events", events, "funnel_correlation_person_entity", `{"id":"$pageview","type":"events"}`, "funnel_correlation_person_limit", "0")}}},
		"POST /api/projects/{project_id}/persons/funnel/correlation/": {good: walkReq{body: `{"events":` + events + `,"date_from":"2026-04-01","date_to":"2026-05-31",` +
			`"funnel_correlation_person_entity":{"id":"$pageview","type":"events"},"funnel_correlation_person_converted":true}`},
			bad: []walkReq{{body: `{"events":` + events + `}`, query: "format=xml"}}},

		"GET /api/projects/{project_id}/persons/{id}/": {path: person, bad: []walkReq{badFormat}},
		"GET /api/projects/{project_id}/persons/{id}/properties_timeline/": {path: person + "properties_timeline/",
			good: walkReq{query: q("events", pageview, "date_from", "2026-04-01", "date_to", "2026-05-31")}, bad: []walkReq{badFormat}},
		"PATCH /api/projects/{project_id}/persons/{id}/": {path: person, good: walkReq{body: `{"properties":{"plan":"team"}}`},
			bad: []walkReq{{body: `{"properties":"plan"}`}}},
		"DELETE /api/projects/{project_id}/persons/{id}/": {path: otherPerson("walk-deleted"), good: walkReq{query: "delete_events=false", status: 204},
			bad: []walkReq{{query: "delete_events=maybe"}}},
		"POST /api/projects/{project_id}/persons/{id}/update_property/": {path: person + "update_property/", good: walkReq{body: `{"key":"seats","value":3}`},
			bad: []walkReq{{body: `{"key":""}`}}},
		"POST /api/projects/{project_id}/persons/{id}/delete_property/": {path: person + "delete_property/", good: walkReq{body: `{"$unset":"seats"}`},
			bad: []walkReq{{body: `{}`}}},
		"POST /api/projects/{project_id}/persons/{id}/split/": {path: otherPerson("walk-split") + "split/", good: walkReq{body: `{}`},
			bad: []walkReq{{body: `{"distinct_ids_to_split":"walk-split"}`}}},
		"POST /api/projects/{project_id}/persons/{id}/merge/": {path: person + "merge/", good: walkReq{body: `{"distinct_ids":["walk-merged"]}`},
			bad: []walkReq{{body: `{"ids":"x"}`}}},
		"POST /api/projects/{project_id}/persons/{id}/delete_events/": {path: otherPerson("walk-events") + "delete_events/",
			good: walkReq{body: `{"after":"2026-01-01","event":["walk"]}`, status: 202},
			bad:  []walkReq{badFormat, {body: `{"event":[]}`}, {body: `{"after":"2026-03-03","before":"2026-03-02"}`, semantic: true}}},
		"POST /api/projects/{project_id}/events/delete/": {good: walkReq{body: `{"event":"walk-none","dry_run":true}`},
			bad: []walkReq{{body: `{"dry_run":"yes","event":"x"}`}, {body: `{}`, semantic: true}}},
		"GET /api/projects/{project_id}/persons/{id}/activity/": {path: person + "activity/", good: walkReq{query: "page=1"}, bad: []walkReq{badPage}},
		"GET /api/projects/{project_id}/persons/{id}/export/":   {path: person + "export/", bad: []walkReq{{query: "format=csv"}}},

		"GET /api/projects/{project_id}/cohorts/": {good: walkReq{query: q("type", "static")}, bad: []walkReq{{query: q("type", "smart")}, badLimit}},
		"POST /api/projects/{project_id}/cohorts/": {good: walkReq{body: `{"name":"walk dynamic","filters":{"properties":{"type":"AND","values":[` +
			`{"key":"plan","value":"pro","type":"person"}]}}}`, status: 201}, bad: []walkReq{{body: `{"name":"x","is_static":"yes"}`}}},
		"GET /api/projects/{project_id}/cohorts/{id}/":   {path: proj + "cohorts/" + fx.cohort + "/", bad: []walkReq{badID(proj + "cohorts/abc/")}},
		"PATCH /api/projects/{project_id}/cohorts/{id}/": {path: proj + "cohorts/" + fx.cohort + "/", good: walkReq{body: `{"description":"walked"}`}, bad: []walkReq{{body: `{"name":5}`}}},
		"DELETE /api/projects/{project_id}/cohorts/{id}/": {path: proj + "cohorts/" + fx.post(proj+"cohorts/", `{"name":"gone","is_static":true}`) + "/",
			good: walkReq{status: 204}, bad: []walkReq{{status: 404, semantic: true}}},
		"PATCH /api/projects/{project_id}/cohorts/{id}/add_persons_to_static_cohort/": {path: proj + "cohorts/" + fx.cohort + "/add_persons_to_static_cohort/",
			good: walkReq{body: `{"person_ids":[` + fx.person + `]}`}, bad: []walkReq{{body: `{"person_ids":"all"}`}}},
		"PATCH /api/projects/{project_id}/cohorts/{id}/remove_person_from_static_cohort/": {path: proj + "cohorts/" + fx.cohort + "/remove_person_from_static_cohort/",
			good: walkReq{body: `{"person_id":` + fx.person + `}`}, bad: []walkReq{{body: `{}`}}},
		"GET /api/projects/{project_id}/cohorts/{id}/persons/": {path: proj + "cohorts/" + fx.cohort + "/persons/", good: walkReq{query: "limit=10"}, bad: []walkReq{badLimit}},

		"GET /api/projects/{project_id}/actions/":      {bad: []walkReq{badLimit}},
		"POST /api/projects/{project_id}/actions/":     {good: walkReq{body: `{"name":"walk 2","steps":[{"event":"signup"}]}`, status: 201}, bad: []walkReq{{body: `{"name":5}`}}},
		"GET /api/projects/{project_id}/actions/{id}/": {path: proj + "actions/" + fx.action + "/", bad: []walkReq{badID(proj + "actions/abc/")}},
		"PATCH /api/projects/{project_id}/actions/{id}/": {path: proj + "actions/" + fx.action + "/", good: walkReq{body: `{"name":"walked"}`},
			bad: []walkReq{{body: `{"steps":"signup"}`}}},
		"DELETE /api/projects/{project_id}/actions/{id}/": {path: proj + "actions/" + fx.post(proj+"actions/", `{"name":"gone","steps":[{"event":"x"}]}`) + "/",
			good: walkReq{status: 204}, bad: []walkReq{{status: 404, semantic: true}}},

		"GET /api/organizations/{organization_id}/pipeline_transformations/": {bad: []walkReq{badLimit}},
		"POST /api/organizations/{organization_id}/pipeline_transformations/": {good: walkReq{body: `{"plugin_type":"source","name":"walk 2"}`, status: 201},
			bad: []walkReq{{body: `{"plugin_type":"magic","name":"x"}`}}},
		"GET /api/organizations/{organization_id}/pipeline_transformations/repository/":                  {},
		"GET /api/organizations/{organization_id}/pipeline_transformations/unused/":                      {},
		"GET /api/organizations/{organization_id}/pipeline_transformations/exports_unsubscribe_configs/": {},
		"GET /api/organizations/{organization_id}/pipeline_transformations/activity/":                    {bad: []walkReq{badPage}},
		"GET /api/organizations/{organization_id}/pipeline_transformations/{id}/":                        {path: pt + fx.plugin + "/", bad: []walkReq{badID(pt + "abc/")}},
		"PATCH /api/organizations/{organization_id}/pipeline_transformations/{id}/": {path: pt + fx.plugin + "/", good: walkReq{body: `{"name":"walked"}`},
			bad: []walkReq{{body: `{"name":5}`}}},
		"DELETE /api/organizations/{organization_id}/pipeline_transformations/{id}/": {
			path: pt + fx.post(pt, `{"plugin_type":"source","name":"gone"}`) + "/", good: walkReq{status: 204}, bad: []walkReq{{status: 404, semantic: true}}},
		"GET /api/organizations/{organization_id}/pipeline_transformations/{id}/check_for_updates/": {path: pt + fromURL + "/check_for_updates/", bad: []walkReq{badID(pt + "abc/check_for_updates/")}},
		"GET /api/organizations/{organization_id}/pipeline_transformations/{id}/source/": {path: pt + fx.plugin + "/source/", good: walkReq{query: "include=status"},
			bad: []walkReq{{query: "include=everything"}}},
		"PATCH /api/organizations/{organization_id}/pipeline_transformations/{id}/update_source/": {path: pt + fx.plugin + "/update_source/",
			good: walkReq{body: `{"index.ts":"export function processEvent(e) { return e }"}`}, bad: []walkReq{{body: `{"index.ts":5}`}}},
		"POST /api/organizations/{organization_id}/pipeline_transformations/{id}/upgrade/": {path: pt + fromURL + "/upgrade/", bad: []walkReq{badID(pt + "abc/upgrade/")}},

		"GET /api/projects/{project_id}/plugin_configs/":      {bad: []walkReq{badLimit}},
		"POST /api/projects/{project_id}/plugin_configs/":     {good: walkReq{body: `{"plugin":` + fx.plugin + `,"enabled":false,"order":2}`, status: 201}, bad: []walkReq{{body: `{"plugin":"walk"}`}}},
		"GET /api/projects/{project_id}/plugin_configs/{id}/": {path: proj + "plugin_configs/" + fx.config + "/", bad: []walkReq{badID(proj + "plugin_configs/abc/")}},
		"PATCH /api/projects/{project_id}/plugin_configs/{id}/": {path: proj + "plugin_configs/" + fx.config + "/", good: walkReq{body: `{"order":3}`},
			bad: []walkReq{{body: `{"enabled":"yes"}`}}},
		"DELETE /api/projects/{project_id}/plugin_configs/{id}/": {path: proj + "plugin_configs/" + fx.post(proj+"plugin_configs/", `{"plugin":`+fx.plugin+`}`) + "/",
			good: walkReq{status: 204}, bad: []walkReq{{status: 404, semantic: true}}},
		"POST /api/projects/{project_id}/plugin_configs/{id}/test/": {path: proj + "plugin_configs/" + fx.config + "/test/",
			good: walkReq{body: `{"event":"pageview","distinct_id":"u1","properties":{"a":1}}`}, bad: []walkReq{{body: `{"event":5}`}}},
	}
	for _, path := range capturePaths {
		event := `{"api_key":"` + fx.token + `","event":"walk","distinct_id":"walk-capture","properties":{}}`
		noToken := walkReq{body: `{"event":"walk","distinct_id":"walk-capture"}`, status: 401, semantic: true}
		switch path {
		case "/flags/", "/decide/":
			c["GET "+path] = walkCase{good: walkReq{query: q("token", fx.token)}, bad: []walkReq{{status: 400, semantic: true}}}
			c["POST "+path] = walkCase{good: walkReq{body: `{"token":"` + fx.token + `","distinct_id":"walk-capture"}`}, bad: []walkReq{noToken}}
		case "/array/{token}/config", "/array/{token}/config.js":
			bad := []walkReq{{path: strings.Replace(path, "{token}", "phc_none", 1), status: 404, semantic: true}}
			c["GET "+path] = walkCase{bad: bad}
			c["POST "+path] = walkCase{bad: bad}
		default:
			c["GET "+path] = walkCase{good: walkReq{query: q("data", event)}, bad: []walkReq{{query: q("data", `{"event":"walk"}`), status: 401, semantic: true}}}
			c["POST "+path] = walkCase{good: walkReq{body: event}, bad: []walkReq{noToken}}
		}
		c["OPTIONS "+path] = walkCase{good: walkReq{status: 204}}
	}
	return c
}
