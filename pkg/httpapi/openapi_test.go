package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"go.yaml.in/yaml/v3"

	"github.com/personhub/personhub/pkg/capture"
)

var updateOpenAPI = flag.Bool("update-openapi", false, "rewrite docs/openapi.json from the route table and operationDocs")

const openAPIPath = "../../docs/openapi.json"

// TestOpenAPIDoc keeps docs/openapi.json equal to the document generated
// from the route table and operationDocs, checks that every route of the
// table has its entry in operationDocs and every entry a route, that the
// document parses as OpenAPI 3.1 (libopenapi), and that GET /api/schema/
// serves it as JSON and YAML. After changing either:
// go test ./pkg/httpapi/ -run TestOpenAPIDoc -update-openapi
func TestOpenAPIDoc(t *testing.T) {
	f := newFullAPI(t, Config{}, capture.Config{})
	routes := f.api.routes()
	documented := map[string]bool{}
	for _, rt := range routes {
		for _, m := range rt.Methods {
			key := m + " " + rt.Path
			if rt.Canonical != "" {
				key = m + " " + rt.Canonical
			}
			if _, ok := operationDocs[key]; !ok {
				t.Errorf("%s: no entry in operationDocs (openapi_ops.go)", key)
			}
			documented[key] = true
		}
	}
	for key := range operationDocs {
		if !documented[key] {
			t.Errorf("operationDocs has %s, which the route table does not serve", key)
		}
	}
	want, err := openAPIJSON(routes)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(want)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := doc.BuildV3Model(); err != nil {
		t.Fatalf("the document does not build as OpenAPI 3.1: %v", err)
	}
	ids := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		if m, ok := v.(map[string]any); ok {
			if id, ok := m["operationId"].(string); ok {
				if ids[id] {
					t.Errorf("operationId %s is not unique", id)
				}
				ids[id] = true
			}
			for _, x := range m {
				walk(x)
			}
		}
	}
	var generic any
	if err := json.Unmarshal(want, &generic); err != nil {
		t.Fatal(err)
	}
	walk(generic)

	// Served: the same document (for this API, the same routes).
	res, err := http.Get(f.url + "/api/schema/")
	if err != nil {
		t.Fatal(err)
	}
	var served any
	if err := json.NewDecoder(res.Body).Decode(&served); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /api/schema/: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	if mustJSON(served) != mustJSON(generic) {
		t.Error("GET /api/schema/ differs from the generated document")
	}
	res, err = http.Get(f.url + "/api/schema?format=yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML any
	if err := yaml.NewDecoder(res.Body).Decode(&fromYAML); err != nil || res.StatusCode != 200 ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "application/yaml") {
		t.Fatalf("GET /api/schema?format=yaml: %d %s %v", res.StatusCode, res.Header.Get("Content-Type"), err)
	}
	res.Body.Close()
	if fromYAML.(map[string]any)["openapi"] != "3.1.0" {
		t.Errorf("YAML document: openapi %v", fromYAML.(map[string]any)["openapi"])
	}
	if res, err := http.Get(f.url + "/api/schema/?format=xml"); err != nil || res.StatusCode != 400 {
		t.Errorf("format=xml: %v %v, want 400", res, err)
	} else {
		readBody(t, res)
	}

	got, _ := os.ReadFile(openAPIPath)
	if bytes.Equal(got, want) {
		return
	}
	if *updateOpenAPI {
		if err := os.WriteFile(openAPIPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("docs/openapi.json differs from the generated document; regenerate it with\n" +
		"  go test ./pkg/httpapi/ -run TestOpenAPIDoc -update-openapi")
}
