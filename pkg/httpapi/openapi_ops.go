package httpapi

import (
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/person"
)

// operationDocs documents each operation of the route table, keyed by
// method and path as the table writes them; TestOpenAPIOperations fails
// when a route has no entry or an entry no route. Parameters' bounds and
// enums are the handlers' (params.go and each route's file).

// Schema helpers.
var (
	anyValue = sch{}
	object   = sch{"type": "object", "additionalProperties": true} // free-form
	str      = sch{"type": "string"}
	boolean  = sch{"type": "boolean"}
)

func arrayOf(s sch) sch { return sch{"type": "array", "items": s} }

func enum(values ...string) sch {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return sch{"type": "string", "enum": out}
}

func intIn(lo, hi int) sch { return sch{"type": "integer", "minimum": lo, "maximum": hi} }

// props is an object with the given properties (others are not refused
// unless the handler refuses them).
func props(required []string, kv ...any) sch {
	p := sch{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	o := sch{"type": "object", "properties": p}
	if len(required) > 0 {
		r := make([]any, len(required))
		for i, s := range required {
			r[i] = s
		}
		o["required"] = r
	}
	return o
}

func ok(s sch) map[int]resp                   { return map[int]resp{200: {Schema: s}} }
func created(s sch) map[int]resp              { return map[int]resp{201: {Description: "Created.", Schema: s}} }
func noContent() map[int]resp                 { return map[int]resp{204: {Description: "Done; no body."}} }
func qp(name string, s sch, d string) opParam { return opParam{Name: name, Schema: s, Description: d} }

// Parameters shared by routes.
var (
	limitParam  = qp("limit", intIn(1, MaxLimit), "Page size (default 100).")
	offsetParam = qp("offset", intIn(0, MaxOffset), "Items to skip.")
	paged       = []opParam{limitParam, offsetParam}
	activityQ   = []opParam{qp("limit", intIn(1, 100), "Page size (default 10)."),
		qp("page", intIn(1, MaxOffset/100+1), "Page, from 1.")}
	formatParam = qp("format", enum("json", "csv"), "csv: the answer as CSV (also Accept: text/csv); its rows are the results.")
	// The persons list's filters (docs/api.md).
	personFilters = []opParam{
		qp("distinct_id", str, "Persons with this distinct id."),
		qp("email", str, "Persons whose email property is this."),
		qp("search", str, "Persons whose email, name or distinct ids contain this."),
		qp("properties", str, "A JSON list (or group) of property filters; unparsable: 400."),
	}
	// The analysis routes' filter (docs/analysis.md): the insight's
	// definition as query parameters, JSON-valued ones as JSON text.
	insightFilter = []opParam{
		qp("events", str, "JSON list of event entities."),
		qp("actions", str, "JSON list of action entities."),
		qp("date_from", str, "A date, a date-time, or relative like -7d."),
		qp("date_to", str, "A date, a date-time, or relative like -7d."),
		qp("interval", enum("minute", "hour", "day", "week", "month"), "Bucket size (case-insensitive; minute is read as hour)."),
		qp("properties", str, "JSON property filters."),
		qp("breakdown", str, "Breakdown property (or JSON list)."),
		qp("breakdown_type", str, "event, person, cohort, ..."),
		qp("breakdown_value", str, "The breakdown value whose actors are listed."),
		qp("entity_id", str, "The entity (event name or action id) whose actors are listed."),
		qp("entity_type", enum("events", "actions"), "The entity's kind."),
		qp("entity_math", str, "The entity's aggregation."),
		qp("search", str, "Actors whose email, name or distinct ids contain this."),
		limitParam, offsetParam,
	}
	insightBody = sch{"type": "object", "additionalProperties": true, "description": "The insight's filter, as the query parameters (JSON values as JSON)."}
	actorsResp  = ok(schemaFor(actorsEnvelope{}))
	fullResp    = ok(schemaFor(trendsEnvelope{}))
	personResp  = ok(ref("Person"))
	// A write answered before the ingester applied it: 202 with the
	// pending error shape (person_writes.go).
	pendingResp = resp{Description: "Accepted; not yet visible (the ingester is late).", Schema: ref("Error")}
	personWrite = map[int]resp{200: {Description: "The person after the change.", Schema: ref("Person")}, 202: pendingResp}

	personBulkBody = props(nil,
		"ids", sch{"type": "array", "items": sch{"type": []any{"integer", "string"}}, "maxItems": 1000, "description": "Integer ids or uuids."},
		"distinct_ids", sch{"type": "array", "items": str, "maxItems": 1000},
		"delete_events", boolean, "keep_person", boolean,
		"after", deleteAfter, "before", deleteBefore, "event", deleteEvent)
	// The filter of an event deletion (docs/api.md, "Deleting events by
	// time, name or property").
	deleteAfter  = sch{"type": "string", "description": "ISO 8601 date or date-time: events at or after it (inclusive)."}
	deleteBefore = sch{"type": "string", "description": "ISO 8601 date or date-time: events before it (exclusive)."}
	deleteEvent  = sch{"description": "An event name, or a list of at most 100.",
		"oneOf": []any{sch{"type": "string", "minLength": 1}, sch{"type": "array", "items": sch{"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 100}}}
	personEventsFilter  = props(nil, "after", deleteAfter, "before", deleteBefore, "event", deleteEvent)
	projectEventsFilter = props(nil, "properties", sch{"description": "An event property filter: the persons list's properties grammar (a list, or its JSON text), type event."},
		"after", deleteAfter, "before", deleteBefore, "event", deleteEvent, "dry_run", boolean)
	personRefs  = arrayOf(sch{"type": []any{"integer", "string"}, "description": "A person's integer id or uuid."})
	cohortInput = props(nil, "name", sch{"type": []any{"string", "null"}}, "description", str, "is_static", boolean,
		"filters", object, "groups", arrayOf(anyValue), "query", anyValue,
		"person_ids", personRefs, "distinct_ids", arrayOf(str))
	actionInput = props(nil, "name", str, "steps", arrayOf(props(nil, "event", str, "properties", anyValue)), "deleted", boolean)
	pluginInput = props(nil, "plugin_type", enum("source", "custom", "repository", "local"), "name", str, "url", str,
		"description", str, "config_schema", anyValue, "source", str, "tag", str)
	configInput = props(nil, "plugin", sch{"type": "integer", "minimum": 0}, "enabled", boolean, "order", sch{"type": "integer"},
		"config", object, "name", str, "description", str, "deleted", boolean)
	sourceFiles = sch{"type": "object", "additionalProperties": str, "description": "File name to source."}
	sourceResp  = ok(sch{"anyOf": []any{sourceFiles, props([]string{"files", "status"}, "files", sourceFiles,
		"status", sch{"type": "object", "additionalProperties": schemaFor(sourceStatus{})})}})
	includeParam = qp("include", enum("status"), "status: also each file's build status.")
	captureBody  = sch{"description": "Events in any of the client libraries' formats (docs/capture.md)."}
	captureTypes = []string{"application/json", "text/plain", "application/x-www-form-urlencoded"}
	captureQ     = []opParam{qp("token", str, "The project token, when the body lacks it."),
		qp("compression", enum("gzip", "gzip-js", "base64", "lz64"), "How the body is encoded."),
		qp("ip", str, "1: record the client's address.")}
	captureOK   = ok(props([]string{"status"}, "status", sch{"type": "integer", "const": 1}))
	remoteCfg   = props([]string{"token", "supportedCompression"}, "token", str, "supportedCompression", arrayOf(str))
	flagsResp   = ok(props([]string{"flags", "featureFlags"}, "flags", object, "featureFlags", object, "featureFlagPayloads", object))
	preflight   = map[int]resp{204: {Description: "CORS preflight answer."}}
	cohortsList = ok(listOf(ref("Cohort")))
)

// capturePaths are capture's routes (capture.go).
var capturePaths = []string{"/capture/", "/batch/", "/e/", "/i/v0/e/", "/track/", "/engage/", "/flags/", "/decide/",
	"/array/{token}/config", "/array/{token}/config.js"}

func init() {
	for _, path := range capturePaths {
		var get, post opDoc
		switch path {
		case "/flags/", "/decide/":
			get = opDoc{Summary: "Feature flags and remote configuration (none served)", Query: captureQ, Responses: flagsResp}
			post = get
			post.Body, post.BodyTypes = captureBody, captureTypes
		case "/array/{token}/config":
			get = opDoc{Summary: "The browser library's remote configuration", Responses: ok(remoteCfg)}
			post = get
		case "/array/{token}/config.js":
			js := ok(str)
			js[200] = resp{Schema: str, Types: []string{"application/javascript"}}
			get = opDoc{Summary: "The remote configuration as a script", Responses: js}
			post = get
		default:
			get = opDoc{Summary: "Capture events (the body in the data query parameter)", Query: append(captureQ,
				qp("data", str, "The events, when sent as a GET.")), Responses: captureOK}
			post = opDoc{Summary: "Capture events", Query: captureQ, Body: captureBody, BodyTypes: captureTypes, BodyRequired: true, Responses: captureOK}
		}
		operationDocs["GET "+path], operationDocs["POST "+path] = get, post
		operationDocs["OPTIONS "+path] = opDoc{Summary: "CORS preflight", Responses: preflight, NoBadRequest: true}
	}
}

var operationDocs = map[string]opDoc{
	"GET /api/schema/": {Summary: "This document", Query: []opParam{qp("format", enum("json", "yaml"), "yaml: the document as YAML.")},
		Responses: map[int]resp{200: {Schema: object, Types: []string{"application/json", "application/yaml"}}}},
	"GET /healthz": {Summary: "Liveness", NoBadRequest: true, Responses: ok(props([]string{"status"}, "status", enum("ok")))},
	"GET /readyz": {Summary: "Readiness: ClickHouse and NATS answer", NoBadRequest: true,
		Responses: ok(props([]string{"status"}, "status", enum("ready")))},

	"GET /api/projects/":              {Summary: "List the key's organization's projects", Query: paged, Responses: ok(listOf(ref("Project")))},
	"GET /api/projects/{project_id}/": {Summary: "Retrieve a project", Responses: ok(ref("Project"))},
	"PATCH /api/projects/{project_id}/": {Summary: "Change a project's timezone or anonymize_ips", Responses: ok(ref("Project")),
		Body: props(nil, "timezone", sch{"type": "string", "description": "An IANA time zone name."}, "anonymize_ips", boolean)},

	"GET /api/projects/{project_id}/persons/": {Summary: "List persons", Query: append(append([]opParam{}, personFilters...), paged...),
		Responses: ok(ref("PersonList")), Description: "Newest first. format=csv without limit exports every match."},
	"GET /api/projects/{project_id}/persons/values/": {Summary: "A property's most common values",
		Query:     []opParam{{Name: "key", Schema: str, Description: "The property.", Required: true}, qp("value", str, "Values containing this.")},
		Responses: ok(arrayOf(schemaFor(chstore.PropertyValue{})))},
	"GET /api/projects/{project_id}/persons/properties_at_time/": {Summary: "A person's properties at a moment",
		Query: []opParam{qp("distinct_id", str, "The person by a distinct id (or person_id)."), qp("person_id", str, "The person's integer id or uuid."),
			{Name: "timestamp", Schema: str, Description: "ISO 8601 moment.", Required: true},
			qp("include_set_once", boolean, "Apply $set_once too.")},
		Responses: ok(propertiesAtTimeSchema())},
	"GET /api/projects/{project_id}/persons/cohorts/": {Summary: "The cohorts a person is in",
		Query:     []opParam{{Name: "person_id", Schema: str, Description: "The person's integer id or uuid.", Required: true}},
		Responses: ok(props([]string{"results"}, "results", arrayOf(ref("Cohort"))))},
	"GET /api/projects/{project_id}/persons/batch_by_distinct_ids/": {Summary: "Persons by distinct ids",
		Query:     []opParam{qp("distinct_ids", str, "JSON list of at most 200 distinct ids.")},
		Responses: ok(props([]string{"results"}, "results", sch{"type": "object", "additionalProperties": ref("Person")}))},
	"POST /api/projects/{project_id}/persons/batch_by_distinct_ids/": {Summary: "Persons by distinct ids",
		Body:      props(nil, "distinct_ids", sch{"type": "array", "items": str, "maxItems": 200}),
		Responses: ok(props([]string{"results"}, "results", sch{"type": "object", "additionalProperties": ref("Person")}))},
	"GET /api/projects/{project_id}/persons/batch_by_uuids/": {Summary: "Persons by uuids",
		Query:     []opParam{qp("uuids", str, "JSON list of at most 200 uuids.")},
		Responses: ok(props([]string{"results"}, "results", sch{"type": "object", "additionalProperties": ref("Person")}))},
	"POST /api/projects/{project_id}/persons/batch_by_uuids/": {Summary: "Persons by uuids",
		Body:      props(nil, "uuids", sch{"type": "array", "items": sch{"type": "string", "format": "uuid"}, "maxItems": 200}),
		Responses: ok(props([]string{"results"}, "results", sch{"type": "object", "additionalProperties": ref("Person")}))},
	"GET /api/projects/{project_id}/persons/activity/": {Summary: "The project's person activity log", Query: activityQ,
		Responses: ok(ref("ActivityPage"))},
	"POST /api/projects/{project_id}/persons/bulk_delete/": {Summary: "Delete persons (and optionally their events)",
		Body: personBulkBody, BodyRequired: true, Responses: map[int]resp{202: {Description: "Accepted.", Schema: schemaFor(bulkDeleteResult{})}}},
	"POST /api/projects/{project_id}/persons/reset_person_distinct_id/": {Summary: "Detach a distinct id from its person",
		Body: props([]string{"distinct_id"}, "distinct_id", sch{"type": "string", "minLength": 1}), BodyRequired: true,
		Responses: map[int]resp{202: {Description: "Accepted, with the outcome.", Schema: schemaFor(resetResult{})}}},
	"GET /api/projects/{project_id}/persons/deletion_status/": {Summary: "Queued event deletions",
		Query: append([]opParam{qp("status", enum("pending", "completed", "all", "waiting", "running", "verified"), "Which deletions."),
			qp("person_uuid", sch{"type": "string", "format": "uuid"}, "One person's."), qp("person_id", sch{"type": "integer", "minimum": 0}, "One person's.")}, paged...),
		Responses: ok(deletionStatusSchema())},

	"GET /api/projects/{project_id}/persons/trends/":     {Summary: "Actors of a trends data point", Query: insightFilter, Responses: fullResp},
	"GET /api/projects/{project_id}/persons/stickiness/": {Summary: "Actors of a stickiness data point", Query: insightFilter, Responses: actorsResp},
	"GET /api/projects/{project_id}/persons/lifecycle/": {Summary: "Actors of a lifecycle status",
		Query: append([]opParam{qp("lifecycle_type", enum("new", "returning", "resurrecting", "dormant"), "The status."),
			qp("target_date", str, "The bucket.")}, insightFilter...), Responses: actorsResp},
	"GET /api/projects/{project_id}/persons/retention/": {Summary: "Actors of a retention cohort",
		Query: append([]opParam{qp("selected_interval", sch{"type": "integer", "minimum": 0}, "The cohort."),
			qp("period", enum("Hour", "Day", "Week", "Month"), "The period (case-insensitive)."),
			qp("total_intervals", intIn(1, 1000), "Intervals in the insight (default 11; pkg/insight maxRetentionIntervals)."), qp("target_entity", str, "JSON entity."),
			qp("returning_entity", str, "JSON entity."), qp("retention_type", str, "retention_first_time or retention_recurring.")}, insightFilter...),
		Responses: ok(schemaFor(retentionBody{}))},
	"GET /api/projects/{project_id}/persons/path/":  {Summary: "Actors of a paths step", Query: insightFilter, Responses: fullResp},
	"POST /api/projects/{project_id}/persons/path/": {Summary: "Actors of a paths step", Query: insightFilter, Body: insightBody, Responses: fullResp},
	"GET /api/projects/{project_id}/persons/funnel/": {Summary: "Actors of a funnel step",
		Query: append([]opParam{qp("funnel_step", sch{"type": "integer"}, "The step (negative: dropped off before it).")}, insightFilter...), Responses: fullResp},
	"POST /api/projects/{project_id}/persons/funnel/": {Summary: "Actors of a funnel step", Query: insightFilter, Body: insightBody, Responses: fullResp},
	"GET /api/projects/{project_id}/persons/funnel/correlation/": {Summary: "Actors of a funnel correlation",
		Query: append([]opParam{qp("funnel_correlation_person_entity", str, "JSON entity."),
			qp("funnel_correlation_person_converted", boolean, "Converted (true) or dropped (false); absent: both."),
			qp("funnel_correlation_person_limit", intIn(1, MaxLimit), "Page size (default 100)."),
			qp("funnel_correlation_person_offset", intIn(0, MaxOffset), "Actors to skip.")}, insightFilter[:len(insightFilter)-2]...), Responses: fullResp},
	"POST /api/projects/{project_id}/persons/funnel/correlation/": {Summary: "Actors of a funnel correlation", Query: insightFilter,
		Body: insightBody, Responses: fullResp},

	"GET /api/projects/{project_id}/persons/{id}/": {Summary: "Retrieve a person", Responses: personResp},
	"GET /api/projects/{project_id}/persons/{id}/properties_timeline/": {Summary: "How a person's properties changed",
		Query: append([]opParam{}, insightFilter[:6]...), Responses: ok(props([]string{"points", "crucial_property_keys"},
			"points", arrayOf(object), "crucial_property_keys", arrayOf(str), "effective_date_from", str, "effective_date_to", str))},
	"PATCH /api/projects/{project_id}/persons/{id}/": {Summary: "Set person properties",
		Body: props([]string{"properties"}, "properties", object), BodyRequired: true, Responses: personWrite},
	"DELETE /api/projects/{project_id}/persons/{id}/": {Summary: "Delete a person",
		Query:     []opParam{qp("delete_events", boolean, "Also delete the person's events."), qp("keep_person", boolean, "Delete the events only.")},
		Responses: map[int]resp{202: {Description: "Events queued for deletion (keep_person)."}, 204: {Description: "Deleted."}}},
	"POST /api/projects/{project_id}/persons/{id}/update_property/": {Summary: "Set one property",
		Body: props([]string{"key", "value"}, "key", sch{"type": "string", "minLength": 1}, "value", anyValue), BodyRequired: true, Responses: personWrite},
	"POST /api/projects/{project_id}/persons/{id}/delete_property/": {Summary: "Remove one property",
		Body: props([]string{"$unset"}, "$unset", sch{"type": "string", "minLength": 1}), BodyRequired: true, Responses: personWrite},
	"POST /api/projects/{project_id}/persons/{id}/split/": {Summary: "Split a person into one per distinct id",
		Body:      props(nil, "main_distinct_id", str, "distinct_ids_to_split", arrayOf(str)),
		Responses: ok(schemaFor(splitResult{}))},
	"POST /api/projects/{project_id}/persons/{id}/merge/": {Summary: "Merge persons into this one",
		Body: personBulkBody, BodyRequired: true, Responses: ok(schemaFor(mergeResult{}))},
	"POST /api/projects/{project_id}/persons/{id}/delete_events/": {Summary: "Queue the deletion of a person's events",
		Body: personEventsFilter, Responses: map[int]resp{202: {Description: "Queued."}}},
	"POST /api/projects/{project_id}/events/delete/": {Summary: "Delete the project's events by property, time or name",
		Body: projectEventsFilter, BodyRequired: true,
		Responses: map[int]resp{200: {Description: "Dry run: the events the filter matches now.", Schema: schemaFor(eventDeletionResult{})},
			202: {Description: "Queued; follow request_id in deletion_status/.", Schema: schemaFor(eventDeletionResult{})}}},
	"GET /api/projects/{project_id}/persons/{id}/activity/": {Summary: "A person's activity log", Query: activityQ, Responses: ok(ref("ActivityPage"))},
	"GET /api/projects/{project_id}/persons/{id}/export/": {Summary: "Everything stored about a person (one JSON document)",
		Query: []opParam{qp("format", enum("json"), "json only.")}, Responses: ok(props([]string{"person"}, "person", ref("Person")))},

	"GET /api/projects/{project_id}/cohorts/": {Summary: "List cohorts", Responses: cohortsList,
		Query: append([]opParam{qp("type", enum("static", "dynamic"), "Which cohorts."), qp("search", str, "Name contains.")}, paged...)},
	"POST /api/projects/{project_id}/cohorts/": {Summary: "Create a cohort (JSON, or multipart with a csv file for a static one)",
		Body: cohortInput, BodyTypes: []string{"application/json", "multipart/form-data"}, BodyRequired: true,
		Responses: map[int]resp{201: {Description: "Created.", Schema: ref("Cohort")}, 202: {Description: "Created; members being added.", Schema: ref("Cohort")}}},
	"GET /api/projects/{project_id}/cohorts/{id}/":    {Summary: "Retrieve a cohort", Responses: ok(ref("Cohort"))},
	"PATCH /api/projects/{project_id}/cohorts/{id}/":  {Summary: "Change a cohort", Body: cohortInput, Responses: ok(ref("Cohort"))},
	"DELETE /api/projects/{project_id}/cohorts/{id}/": {Summary: "Delete a cohort", Responses: noContent()},
	"PATCH /api/projects/{project_id}/cohorts/{id}/add_persons_to_static_cohort/": {Summary: "Add persons to a static cohort",
		Body: props(nil, "person_ids", personRefs, "distinct_ids", arrayOf(str)), BodyRequired: true, Responses: ok(ref("Cohort"))},
	"PATCH /api/projects/{project_id}/cohorts/{id}/remove_person_from_static_cohort/": {Summary: "Remove a person from a static cohort",
		Body: props([]string{"person_id"}, "person_id", sch{"type": []any{"string", "integer"}}), BodyRequired: true, Responses: ok(ref("Cohort"))},
	"GET /api/projects/{project_id}/cohorts/{id}/persons/": {Summary: "A cohort's persons", Query: append(append([]opParam{}, personFilters...), paged...),
		Responses: ok(schemaFor(cohortPersonsPage{}))},

	"GET /api/projects/{project_id}/actions/":         {Summary: "List actions", Query: paged, Responses: ok(listOf(ref("Action")))},
	"POST /api/projects/{project_id}/actions/":        {Summary: "Create an action", Body: actionInput, BodyRequired: true, Responses: created(ref("Action"))},
	"GET /api/projects/{project_id}/actions/{id}/":    {Summary: "Retrieve an action", Responses: ok(ref("Action"))},
	"PATCH /api/projects/{project_id}/actions/{id}/":  {Summary: "Change an action", Body: actionInput, Responses: ok(ref("Action"))},
	"DELETE /api/projects/{project_id}/actions/{id}/": {Summary: "Delete an action", Responses: noContent()},

	"GET /api/organizations/{organization_id}/pipeline_transformations/": {Summary: "List transformations", Query: paged,
		Responses: ok(listOf(ref("Plugin")))},
	"POST /api/organizations/{organization_id}/pipeline_transformations/": {Summary: "Install a transformation", Body: pluginInput,
		BodyRequired: true, Responses: created(ref("Plugin"))},
	"GET /api/organizations/{organization_id}/pipeline_transformations/repository/": {Summary: "The transformations one can install",
		Responses: ok(arrayOf(object))},
	"GET /api/organizations/{organization_id}/pipeline_transformations/unused/": {Summary: "Ids of transformations no config uses",
		Responses: ok(arrayOf(sch{"type": "integer", "minimum": 0}))},
	"GET /api/organizations/{organization_id}/pipeline_transformations/exports_unsubscribe_configs/": {Summary: "Export configs to unsubscribe",
		Responses: ok(arrayOf(ref("PluginConfig")))},
	"GET /api/organizations/{organization_id}/pipeline_transformations/activity/": {Summary: "The organization's plugin activity log",
		Query: activityQ, Responses: ok(ref("ActivityPage"))},
	"GET /api/organizations/{organization_id}/pipeline_transformations/{id}/":    {Summary: "Retrieve a transformation", Responses: ok(ref("Plugin"))},
	"PATCH /api/organizations/{organization_id}/pipeline_transformations/{id}/":  {Summary: "Change a transformation", Body: pluginInput, Responses: ok(ref("Plugin"))},
	"DELETE /api/organizations/{organization_id}/pipeline_transformations/{id}/": {Summary: "Uninstall a transformation", Responses: noContent()},
	"GET /api/organizations/{organization_id}/pipeline_transformations/{id}/check_for_updates/": {Summary: "Look for a newer version",
		Responses: ok(props([]string{"plugin"}, "plugin", ref("Plugin")))},
	"GET /api/organizations/{organization_id}/pipeline_transformations/{id}/source/": {Summary: "A source transformation's files",
		Query: []opParam{includeParam}, Responses: sourceResp},
	"PATCH /api/organizations/{organization_id}/pipeline_transformations/{id}/update_source/": {Summary: "Change a source transformation's files",
		Query: []opParam{includeParam}, Body: sch{"type": "object", "additionalProperties": sch{"type": []any{"string", "null"}}}, BodyRequired: true,
		Responses: sourceResp},
	"POST /api/organizations/{organization_id}/pipeline_transformations/{id}/upgrade/": {Summary: "Upgrade to the latest version",
		Responses: ok(ref("Plugin"))},

	"GET /api/projects/{project_id}/plugin_configs/": {Summary: "List plugin configs", Query: paged, Responses: ok(listOf(ref("PluginConfig")))},
	"POST /api/projects/{project_id}/plugin_configs/": {Summary: "Create a plugin config (JSON or multipart with attachments)",
		Body: configInput, BodyTypes: []string{"application/json", "multipart/form-data"}, BodyRequired: true, Responses: created(ref("PluginConfig"))},
	"GET /api/projects/{project_id}/plugin_configs/{id}/": {Summary: "Retrieve a plugin config", Responses: ok(ref("PluginConfig"))},
	"PATCH /api/projects/{project_id}/plugin_configs/{id}/": {Summary: "Change a plugin config", Body: configInput,
		BodyTypes: []string{"application/json", "multipart/form-data"}, Responses: ok(ref("PluginConfig"))},
	"DELETE /api/projects/{project_id}/plugin_configs/{id}/": {Summary: "Delete a plugin config", Responses: noContent()},
	"POST /api/projects/{project_id}/plugin_configs/{id}/test/": {Summary: "Dry-run the config's chain on an event",
		Body: props(nil, "event", str, "distinct_id", str, "properties", object), BodyRequired: true,
		Description: "The body is the sample event.", Responses: ok(schemaFor(dryRunJSON{}))},
}

// propertiesAtTimeSchema: a person with point_in_time_metadata.
func propertiesAtTimeSchema() sch {
	s := schemaFor(person.Person{})
	s["properties"].(sch)["point_in_time_metadata"] = schemaFor(pointInTime{})
	s["required"] = append(s["required"].([]any), "point_in_time_metadata")
	return s
}

// deletionStatusSchema: the list envelope of deletions with counts.
func deletionStatusSchema() sch {
	s := listOf(schemaFor(deletionItem{}))
	s["properties"].(sch)["counts"] = schemaFor(deletion.Counts{})
	s["properties"].(sch)["event_deletions"] = props([]string{"count", "results"}, "count", sch{"type": "integer"},
		"results", arrayOf(schemaFor(filteredDeletionItem{})))
	s["required"] = append(s["required"].([]any), "counts", "event_deletions")
	return s
}
