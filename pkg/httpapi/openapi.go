package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The OpenAPI 3.1 document of the API (docs/api.md, "OpenAPI schema") is
// generated, never written by hand: its paths, methods, scopes, body
// limits and public routes come from the route table, its per-operation
// parameters, bodies and answers from operationDocs (openapi_ops.go), and
// the schemas of the answers from the Go types the handlers encode
// (openapi_schema.go). docs/openapi.json is this document for an API with
// every family of routes; TestOpenAPIDoc keeps the two equal.

// sch is a JSON Schema (2020-12, OpenAPI 3.1's dialect) or any other
// object of the document.
type sch = map[string]any

// openAPIDocument builds the document of the routes rs (the twins served
// without their final slash are described once, with it).
func openAPIDocument(rs []route) sch {
	paths := sch{}
	for _, rt := range rs {
		if rt.Canonical != "" {
			continue
		}
		item, _ := paths[rt.Path].(sch)
		if item == nil {
			item = sch{}
			paths[rt.Path] = item
		}
		for _, m := range rt.Methods {
			item[strings.ToLower(m)] = operationObject(rt, m, operationDocs[m+" "+rt.Path])
		}
	}
	return sch{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": sch{
			"title":   "personhub API",
			"version": "1",
			"license": sch{"name": "Apache-2.0", "identifier": "Apache-2.0"},
			"description": "PostHog's persons API, served by personhub. Every path is also served without its final " +
				"slash, with the same answer. Authenticated routes take a personal API key as a Bearer token; the " +
				"scopes listed in an operation's security requirement must all be held (a scope `x:write` implies " +
				"`x:read`, `*` allows everything). Capture routes are public: the project token (phc_...) in the " +
				"body or the query authenticates them. Error answers have one shape, Error.",
		},
		"servers": []any{sch{"url": "/"}},
		"tags":    openAPITags(),
		"paths":   paths,
		"components": sch{
			"schemas": componentSchemas(),
			"securitySchemes": sch{
				"PersonalAPIKey": sch{"type": "http", "scheme": "bearer",
					"description": "A personal API key (phx_...). The roles of a security requirement are the scopes the key must hold."},
			},
			"responses": errorResponses(),
			"headers": sch{
				"Retry-After": sch{"description": "Seconds to wait before retrying.", "schema": sch{"type": "integer", "minimum": 0}},
			},
		},
	}
}

// operationObject is one method of one route: the route table gives its
// security, path parameters and error answers; doc the rest.
func operationObject(rt route, method string, doc opDoc) sch {
	op := sch{"operationId": operationID(method, rt.Path), "summary": doc.Summary, "tags": []any{routeTag(rt.Path)}}
	if doc.Description != "" {
		op["description"] = doc.Description
	}
	var params []any
	for _, name := range pathParams(rt.Path) {
		params = append(params, sch{"name": name, "in": "path", "required": true, "schema": pathParamSchema(rt.Path, name)})
	}
	persons := strings.Contains(rt.Path, "/persons/")
	query := doc.Query
	if persons && !hasParam(query, "format") {
		query = append(query, formatParam)
	}
	for _, p := range query {
		q := sch{"name": p.Name, "in": "query", "schema": p.Schema}
		if p.Description != "" {
			q["description"] = p.Description
		}
		if p.Required {
			q["required"] = true
		}
		params = append(params, q)
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if doc.Body != nil {
		content := sch{}
		for _, ct := range jsonUnless(doc.BodyTypes) {
			content[ct] = sch{"schema": doc.Body}
		}
		op["requestBody"] = sch{"required": doc.BodyRequired, "content": content}
	}
	responses := sch{}
	for status, r := range doc.Responses {
		responses[fmt.Sprint(status)] = r.object(persons && status < 300 && r.Schema != nil)
	}
	for _, e := range errorStatuses(rt, doc) {
		if _, ok := responses[e]; !ok {
			responses[e] = sch{"$ref": "#/components/responses/" + errorResponseName[e]}
		}
	}
	responses["default"] = sch{"$ref": "#/components/responses/Error"}
	op["responses"] = responses
	if rt.Public {
		op["security"] = []any{}
	} else {
		scopes := make([]any, len(rt.Scopes))
		for i, s := range rt.Scopes {
			scopes[i] = s
		}
		op["security"] = []any{sch{"PersonalAPIKey": scopes}}
		op["x-scopes"] = scopes
	}
	if rt.Body > 0 && !rt.CORS {
		op["x-body-limit"] = rt.Body
	}
	return op
}

// errorStatuses are the error answers the middleware gives a route
// (authentication, scopes, the key's rate limit, the body guard, an
// unavailable backend) and the ones its inputs allow (400, 404).
func errorStatuses(rt route, doc opDoc) []string {
	var out []string
	if !rt.Public || rt.CORS || rt.Path == "/readyz" { // a backend call, a body slot or the key's store
		out = append(out, "503")
	}
	if !doc.NoBadRequest {
		out = append(out, "400")
	}
	if !rt.Public {
		out = append(out, "401", "403", "404", "429")
	} else if len(pathParams(rt.Path)) > 0 || rt.CORS {
		out = append(out, "401", "404")
	}
	if rt.Body > 0 {
		out = append(out, "413")
	}
	sort.Strings(out)
	return out
}

var errorResponseName = map[string]string{"400": "BadRequest", "401": "Unauthorized", "403": "Forbidden",
	"404": "NotFound", "413": "TooLarge", "429": "TooManyRequests", "503": "Unavailable"}

func errorResponses() sch {
	errJSON := sch{"application/json": sch{"schema": sch{"$ref": "#/components/schemas/Error"}}}
	retry := sch{"Retry-After": sch{"$ref": "#/components/headers/Retry-After"}}
	return sch{
		"Error":           sch{"description": "An error.", "content": errJSON},
		"BadRequest":      sch{"description": "Invalid input; attr names the field.", "content": errJSON},
		"Unauthorized":    sch{"description": "No credentials, or invalid ones.", "content": errJSON},
		"Forbidden":       sch{"description": "The key lacks a scope the route needs.", "content": errJSON},
		"NotFound":        sch{"description": "Not found (or another organization's).", "content": errJSON},
		"TooLarge":        sch{"description": "The request body is over the route's limit.", "content": errJSON},
		"TooManyRequests": sch{"description": "The key's rate limit is spent.", "headers": retry, "content": errJSON},
		"Unavailable":     sch{"description": "A backing service is unavailable; retry after Retry-After.", "headers": retry, "content": errJSON},
	}
}

// opDoc is the per-operation part of the document, keyed by method and
// path in operationDocs.
type opDoc struct {
	Summary     string
	Description string
	Query       []opParam
	// Body is the request body's schema (nil: no body), in each of
	// BodyTypes (default application/json).
	Body         sch
	BodyTypes    []string
	BodyRequired bool
	Responses    map[int]resp
	// NoBadRequest: no input of the operation can be invalid.
	NoBadRequest bool
}

type opParam struct {
	Name        string
	Schema      sch
	Description string
	Required    bool
}

// resp is a successful answer: Schema nil means no body; Types are its
// content types (default application/json).
type resp struct {
	Description string
	Schema      sch
	Types       []string
	Headers     sch
}

// object renders the answer; csv adds text/csv (the persons routes'
// format=csv).
func (r resp) object(csv bool) sch {
	o := sch{"description": orDefault(r.Description, "OK")}
	if r.Schema != nil {
		content := sch{}
		for _, ct := range jsonUnless(r.Types) {
			content[ct] = sch{"schema": r.Schema}
		}
		if csv {
			content["text/csv"] = sch{"schema": sch{"type": "string"}}
		}
		o["content"] = content
	}
	if r.Headers != nil {
		o["headers"] = r.Headers
	}
	return o
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// jsonUnless is types, or application/json when none.
func jsonUnless(types []string) []string {
	if len(types) == 0 {
		return []string{"application/json"}
	}
	return types
}

func hasParam(ps []opParam, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// pathParams are the {names} of a path, in order.
func pathParams(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") {
			out = append(out, strings.Trim(seg, "{}"))
		}
	}
	return out
}

func pathParamSchema(path, name string) sch {
	switch {
	case name == "project_id":
		return sch{"type": "integer", "minimum": 0}
	case name == "id" && strings.Contains(path, "/persons/"):
		return sch{"type": "string", "description": "The person's integer id or its uuid."}
	case name == "id":
		return sch{"type": "integer", "minimum": 0}
	}
	return sch{"type": "string"}
}

// operationID names an operation after its path's fixed segments and its
// method, in drf-spectacular's manner (persons_list, persons_retrieve,
// persons_split_create); GET on one item or an action on it is retrieve.
func operationID(method, path string) string {
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	var names []string
	for i, s := range segs {
		switch {
		case strings.HasPrefix(s, "{"), s == "api" && i == 0:
		case (s == "projects" || s == "organizations") && i+2 < len(segs):
		default:
			names = append(names, strings.NewReplacer(".", "_", "-", "_").Replace(s))
		}
	}
	verb := map[string]string{"GET": "list", "POST": "create", "PATCH": "partial_update", "DELETE": "destroy",
		"OPTIONS": "options", "PUT": "update"}[method]
	if method == "GET" && (strings.Contains(path, "{id}") || strings.HasSuffix(path, "}/")) { // one item, or an action on one
		verb = "retrieve"
	}
	return strings.Join(append(names, verb), "_")
}

// routeTag groups operations by family.
func routeTag(path string) string {
	switch {
	case strings.HasPrefix(path, "/api/schema/"):
		return "schema"
	case strings.Contains(path, "/persons/"):
		return "persons"
	case strings.Contains(path, "/cohorts/"):
		return "cohorts"
	case strings.Contains(path, "/actions/"):
		return "actions"
	case strings.Contains(path, "/pipeline_transformations/"), strings.Contains(path, "/plugin_configs/"):
		return "plugins"
	case strings.HasPrefix(path, "/api/projects/"):
		return "projects"
	case path == "/healthz" || path == "/readyz":
		return "health"
	}
	return "capture"
}

func openAPITags() []any {
	var out []any
	for _, t := range [][2]string{
		{"persons", "Persons: lists, lookups, writes, activity, and the actors of analysis (docs/api.md, docs/analysis.md)."},
		{"cohorts", "Cohorts, static and dynamic (docs/cohorts.md)."},
		{"actions", "Actions: saved event definitions (docs/cohorts.md)."},
		{"plugins", "Pipeline transformations and plugin configs (docs/api.md, Plugins)."},
		{"projects", "The key's organization's projects."},
		{"capture", "The client libraries' public routes, authenticated by the project token (docs/capture.md)."},
		{"health", "Liveness and readiness for load balancers."},
		{"schema", "This document."},
	} {
		out = append(out, sch{"name": t[0], "description": t[1]})
	}
	return out
}

// openAPISchema serves GET /api/schema/: the document of the routes this
// API serves, as JSON or (?format=yaml) YAML.
func (a *API) openAPISchema(w http.ResponseWriter, r *http.Request) error {
	doc := openAPIDocument(a.routes())
	switch r.URL.Query().Get("format") {
	case "", "json":
		writeJSON(w, http.StatusOK, doc)
		return nil
	case "yaml":
		// Through JSON, so YAML has the same keys in the same order.
		raw, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		out, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, err = w.Write(out)
		return err
	}
	return invalid("format", "format must be json or yaml.")
}

// openAPIJSON is the document as docs/openapi.json holds it.
func openAPIJSON(rs []route) ([]byte, error) {
	raw, err := json.MarshalIndent(openAPIDocument(rs), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}
