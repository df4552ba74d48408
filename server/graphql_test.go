package server_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"fhirstore/server"
	"fhirstore/server/graphql"
	"fhirstore/store"
)

// graphqlDir holds the official FHIR GraphQL test cases.
const graphqlDir = "../testdata/graphql"

// graphqlCase is one test of the official manifest.
type graphqlCase struct {
	Name      string `xml:"name,attr"`
	Source    string `xml:"source,attr"`
	Output    string `xml:"output,attr"`
	Context   string `xml:"context,attr"`
	Operation string `xml:"operation,attr"`
}

// graphqlFixtures are the resources the official cases read, by their
// file under testdata/fhir/examples.
var graphqlFixtures = []string{
	"Patient-example", "Patient-xds", "Patient-glossy", "Observation-example",
	"Observation-20minute-apgar-score", "MedicationDispense-meddisp008", "Condition-example",
}

// loadGraphQLFixtures stores the resources the official cases read. The
// cases' List has the id long in its body, so it is stored as List/long
// and its case runs there.
func loadGraphQLFixtures(t *testing.T, e *env) {
	t.Helper()
	for _, f := range graphqlFixtures {
		body, err := os.ReadFile(filepath.Join(exampleDir, f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		typ, id, _ := strings.Cut(f, "-")
		if r := e.put("/"+typ+"/"+id, string(body)); r.Status >= 300 {
			t.Fatalf("store %s: %d %s", f, r.Status, r.Body)
		}
	}
	list, err := os.ReadFile(filepath.Join(graphqlDir, "resources", "list-example-long.xml"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.do(request{Method: http.MethodPut, Path: "/List/long", Body: string(list), Header: map[string]string{"Content-Type": "application/fhir+xml"}})
	if r.Status >= 300 {
		t.Fatalf("store List/long: %d %s", r.Status, r.Body)
	}
}

// gql posts a GraphQL JSON request to path with token ("" for the env's own).
func gql(e *env, token, path, query string, variables map[string]any) *response {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
	r := request{Method: http.MethodPost, Path: path, Body: string(body), Header: map[string]string{"Content-Type": "application/json"}}
	if token != "" {
		r.Token = &token
	}
	return e.do(r)
}

// data is the answer's data, failing the test on errors.
func data(t *testing.T, r *response) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var m struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &m); err != nil || len(m.Errors) > 0 || m.Data == nil {
		t.Fatalf("not a data answer (%v): %s", err, r.Body)
	}
	return m.Data
}

func TestGraphQLOfficialCases(t *testing.T) {
	e := newEnv(t)
	loadGraphQLFixtures(t, e)
	raw, err := os.ReadFile(filepath.Join(graphqlDir, "manifest.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Tests []graphqlCase `xml:"test"`
	}
	if err := xml.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Tests) != 29 {
		t.Fatalf("%d cases in the manifest, want 29", len(manifest.Tests))
	}
	for _, c := range manifest.Tests {
		t.Run(c.Name, func(t *testing.T) { runGraphQLCase(t, e, c) })
	}
}

// runGraphQLCase asks one case's query at its context, by GET, or by
// POST when it names an operation, and judges the answer.
func runGraphQLCase(t *testing.T, e *env, c graphqlCase) {
	query, err := os.ReadFile(filepath.Join(graphqlDir, c.Source))
	if err != nil {
		t.Fatal(err)
	}
	path := "/$graphql"
	if c.Context != "" {
		path = "/" + strings.Replace(c.Context, "List/example-long", "List/long", 1)
	}
	var r *response
	if c.Operation != "" {
		body, _ := json.Marshal(map[string]any{"query": string(query), "operationName": c.Operation, "variables": map[string]any{"var": true}})
		r = e.do(request{Method: http.MethodPost, Path: path, Body: string(body), Header: map[string]string{"Content-Type": "application/json"}})
	} else {
		r = e.get(path + "?query=" + url.QueryEscape(string(query)))
	}
	if c.Output == "$error" {
		status := http.StatusBadRequest
		if c.Name == "reference-broken" { // a reference to a resource the server does not have
			status = http.StatusNotFound
		}
		wantGraphQLError(t, r, status, 0, 0, "")
		return
	}
	got := data(t, r)
	want := readJSONFile(t, filepath.Join(graphqlDir, c.Output))
	if strings.HasPrefix(c.Name, "search-") { // written against a stub store: the shape and the ids
		if !reflect.DeepEqual(keysOf(got), keysOf(want)) || !subsetOf(idsIn(want), idsIn(got)) {
			t.Fatalf("got %s\nwant the shape and ids of %v", r.Body, want)
		}
		return
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("got  %s\nwant %v", r.Body, want)
	}
}

func readJSONFile(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// normalize re-reads v through JSON, so numbers compare as float64.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// idsIn collects the id of every object in v.
func idsIn(v any) map[string]bool {
	out := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if id, ok := v["id"].(string); ok {
				out[id] = true
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

func subsetOf(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return len(a) > 0
}

// wantGraphQLError checks an errors answer with status; when line is set,
// its location; when expr is set, its OperationOutcome's expression.
func wantGraphQLError(t *testing.T, r *response, status, line, column int, expr string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var m struct {
		Data   any `json:"data"`
		Errors []struct {
			Message   string `json:"message"`
			Locations []struct {
				Line, Column int
			} `json:"locations"`
			Extensions struct {
				Outcome struct {
					ResourceType string `json:"resourceType"`
					Issue        []struct {
						Expression []string `json:"expression"`
					} `json:"issue"`
				} `json:"outcome"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &m); err != nil || len(m.Errors) != 1 || m.Data != nil {
		t.Fatalf("not one GraphQL error without data (%v): %s", err, r.Body)
	}
	e := m.Errors[0]
	if e.Message == "" || e.Extensions.Outcome.ResourceType != "OperationOutcome" || len(e.Extensions.Outcome.Issue) == 0 {
		t.Fatalf("the error has no message or OperationOutcome: %s", r.Body)
	}
	if line > 0 && (len(e.Locations) == 0 || e.Locations[0].Line != line || e.Locations[0].Column != column) {
		t.Fatalf("want the error at line %d, column %d: %s", line, column, r.Body)
	}
	if expr != "" && (len(e.Extensions.Outcome.Issue[0].Expression) == 0 || e.Extensions.Outcome.Issue[0].Expression[0] != expr) {
		t.Fatalf("want the expression %q: %s", expr, r.Body)
	}
	var out map[string]any
	_ = json.Unmarshal(r.Body, &out)
	return out
}

func TestGraphQLRequestForms(t *testing.T) {
	e := newEnv(t)
	e.put("/Patient/p1", `{"resourceType":"Patient","id":"p1","active":true,"name":[{"family":"Ode"}]}`)
	query := `{ Patient(id: "p1") { id name { family } } }`
	forms := []struct {
		name string
		r    request
	}{
		{"GET with query=", request{Method: http.MethodGet, Path: "/$graphql?query=" + url.QueryEscape(query)}},
		{"POST application/graphql", request{Method: http.MethodPost, Path: "/$graphql", Body: query, Header: map[string]string{"Content-Type": "application/graphql"}}},
		{"POST application/json", request{Method: http.MethodPost, Path: "/$graphql", Body: mustJSON(map[string]any{"query": query}), Header: map[string]string{"Content-Type": "application/json"}}},
		{"POST with a variable", request{Method: http.MethodPost, Path: "/$graphql", Header: map[string]string{"Content-Type": "application/json"},
			Body: mustJSON(map[string]any{"query": `query q($id: String) { Patient(id: $id) { id name { family } } }`, "operationName": "q", "variables": map[string]any{"id": "p1"}})}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			got := data(t, e.do(f.r))
			want := map[string]any{"Patient": map[string]any{"id": "p1", "name": []any{map[string]any{"family": "Ode"}}}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v", got)
			}
		})
	}
	t.Run("Accept application/graphql-response+json", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPost, Path: "/$graphql", Body: query, Header: map[string]string{"Content-Type": "application/graphql", "Accept": "application/graphql-response+json"}})
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/graphql-response+json") {
			t.Fatalf("Content-Type %q, want application/graphql-response+json", ct)
		}
		if got := data(t, r); got["Patient"] == nil {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("an unsupported Content-Type", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPost, Path: "/$graphql", Body: query, Header: map[string]string{"Content-Type": "text/plain"}})
		wantGraphQLError(t, r, http.StatusUnsupportedMediaType, 0, 0, "")
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestGraphQLConnectionPages(t *testing.T) {
	e := newEnv(t)
	for i := range 7 {
		e.put(fmt.Sprintf("/Observation/o%d", i), fmt.Sprintf(`{"resourceType":"Observation","id":"o%d","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":%d}}`, i, 60+i))
	}
	e.put("/Observation/other", `{"resourceType":"Observation","id":"other","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]}}`)
	const q = `query page($cursor: String) { ObservationConnection(code: "http://loinc.org|8867-4", _count: 3, _cursor: $cursor) { count offset pagesize first previous next edges { mode resource { id } } } }`
	seen := map[string]bool{}
	var cursor any
	for page, want := range []int{3, 3, 1} {
		c := data(t, gql(e, "", "/$graphql", q, map[string]any{"cursor": cursor}))["ObservationConnection"].(map[string]any)
		edges := c["edges"].([]any)
		if len(edges) != want || c["count"] != 7.0 || c["offset"] != float64(3*page) || c["pagesize"] != 3.0 {
			t.Fatalf("page %d: %v", page, c)
		}
		for _, ed := range edges {
			ed := ed.(map[string]any)
			id := ed["resource"].(map[string]any)["id"].(string)
			if ed["mode"] != "match" || seen[id] || id == "other" {
				t.Fatalf("page %d: edge %v repeated or not a match", page, ed)
			}
			seen[id] = true
		}
		if _, ok := c["previous"]; ok != (page > 0) {
			t.Fatalf("page %d: previous cursor %v", page, c["previous"])
		}
		cursor = c["next"]
		if (cursor == nil) != (page == 2) {
			t.Fatalf("page %d: next cursor %v", page, cursor)
		}
	}
	t.Run("a cursor the server did not give", func(t *testing.T) {
		r := gql(e, "", "/$graphql", q, map[string]any{"cursor": "x.y"})
		wantGraphQLError(t, r, http.StatusBadRequest, 1, 97, "ObservationConnection")
	})
}

func TestGraphQLLinkedData(t *testing.T) {
	e := newEnv(t)
	e.put("/Patient/p1", `{"resourceType":"Patient","id":"p1","name":[{"use":"official","family":"Ode"},{"use":"nickname","given":["Ody"]}]}`)
	e.put("/Condition/c1", `{"resourceType":"Condition","id":"c1","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},"code":{"text":"asthma"},"subject":{"reference":"Patient/p1"}}`)
	e.put("/Condition/c2", `{"resourceType":"Condition","id":"c2","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"resolved"}]},"code":{"text":"flu"},"subject":{"reference":"Patient/p1"}}`)
	for i := range 3 {
		e.put(fmt.Sprintf("/Observation/v%d", i), fmt.Sprintf(`{"resourceType":"Observation","id":"v%d","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],"code":{"text":"pulse"},"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2024-01-0%dT10:00:00Z","valueQuantity":{"value":7%d,"unit":"/min"}}`, i, i+1, i))
	}
	q := `{
  name(use: official) { family }
  active: ConditionList(_reference: patient, clinical_status: "active") { code { text } subject { resource { ... on Patient { id } } } }
  latest: ObservationList(_reference: subject, category: "vital-signs", _sort: "-date", _count: 2) { id valueQuantity { value } }
}`
	got := data(t, gql(e, "", "/Patient/p1/$graphql", q, nil))
	want := map[string]any{
		"name":   []any{map[string]any{"family": "Ode"}},
		"active": []any{map[string]any{"code": map[string]any{"text": "asthma"}, "subject": map[string]any{"resource": map[string]any{"id": "p1"}}}},
		"latest": []any{map[string]any{"id": "v2", "valueQuantity": map[string]any{"value": 72.0}}, map[string]any{"id": "v1", "valueQuantity": map[string]any{"value": 71.0}}},
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestGraphQLRespectsScopes(t *testing.T) {
	e := newEnv(t)
	e.put("/Patient/p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"One"}]}`)
	e.put("/Patient/p2", `{"resourceType":"Patient","id":"p2","name":[{"family":"Two"}]}`)
	e.put("/Observation/o1", `{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p1"}}`)
	e.put("/Observation/o2", `{"resourceType":"Observation","id":"o2","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p2"}}`)
	e.put("/Condition/c2", `{"resourceType":"Condition","id":"c2","code":{"text":"y"},"subject":{"reference":"Patient/p2"}}`)
	obsOnly := scopedToken(t, e.tenant, "user/Observation.rs", "")
	patient1 := scopedToken(t, e.tenant, "patient/*.rs", "p1")
	cases := []struct {
		name, token, path, query string
		status                   int // 200: want the data
		want                     string
	}{
		{"Observation scope: no Patient list", obsOnly, "/$graphql", `{ PatientList { id name { family } } }`, http.StatusForbidden, ""},
		{"Observation scope: no Patient by id", obsOnly, "/$graphql", `{ Patient(id: "p1") { id } }`, http.StatusForbidden, ""},
		{"Observation scope: no Patient through a reference", obsOnly, "/$graphql", `{ ObservationList { id subject { resource { id } } } }`, http.StatusForbidden, ""},
		{"Observation scope: no Patient at instance level", obsOnly, "/Patient/p1/$graphql", `{ id }`, http.StatusForbidden, ""},
		{"Observation scope: no Conditions by reverse reference", obsOnly, "/Observation/o1/$graphql", `{ ConditionList(_reference: evidence_detail) { id } }`, http.StatusForbidden, ""},
		{"Observation scope: Observations", obsOnly, "/$graphql", `{ ObservationList(_sort: "_id") { id } }`, http.StatusOK, `{"ObservationList":[{"id":"o1"},{"id":"o2"}]}`},
		{"patient scope: its own Patient only", patient1, "/$graphql", `{ PatientList { id } }`, http.StatusOK, `{"PatientList":[{"id":"p1"}]}`},
		{"patient scope: its own Observations only", patient1, "/$graphql", `{ ObservationList { id } }`, http.StatusOK, `{"ObservationList":[{"id":"o1"}]}`},
		{"patient scope: not another Patient by id", patient1, "/$graphql", `{ Patient(id: "p2") { id } }`, http.StatusForbidden, ""},
		{"patient scope: not another Patient at instance level", patient1, "/Patient/p2/$graphql", `{ id }`, http.StatusForbidden, ""},
		{"patient scope: not another patient's record through a reference", patient1, "/Observation/o2/$graphql", `{ id }`, http.StatusForbidden, ""},
		{"patient scope: reverse references stay in the compartment", patient1, "/Patient/p1/$graphql", `{ ConditionList(_reference: subject) { id } ObservationList(_reference: subject) { id } }`, http.StatusOK, `{"ConditionList":[],"ObservationList":[{"id":"o1"}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := gql(e, c.token, c.path, c.query, nil)
			if c.status != http.StatusOK {
				wantGraphQLError(t, r, c.status, 0, 0, "")
				return
			}
			var want map[string]any
			_ = json.Unmarshal([]byte(c.want), &want)
			if got := data(t, r); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %s, want %s", r.Body, c.want)
			}
		})
	}
}

func TestGraphQLBounds(t *testing.T) {
	e := newEnv(t, func(c *server.Config, _ *store.Options) {
		c.GraphQL = graphql.Limits{MaxDepth: 4, MaxResources: 3}
	})
	for i := range 5 {
		e.put(fmt.Sprintf("/Patient/p%d", i), fmt.Sprintf(`{"resourceType":"Patient","id":"p%d","active":true}`, i))
	}
	slow := newEnv(t, func(c *server.Config, _ *store.Options) { c.GraphQL = graphql.Limits{Timeout: time.Nanosecond} })
	cases := []struct {
		name     string
		e        *env
		query    string
		line     int
		column   int
		expr     string
		contains string
	}{
		{"too deep", e, "{ Patient(id: \"p1\") {\n  name { period { extension { extension { url } } } } } }", 2, 31, "Patient.name.period.extension.extension", "deeper than 4"},
		{"too many resources", e, "{ PatientList(_count: 5) { id } }", 1, 3, "PatientList", "more than 3 resources"},
		{"a fragment that spreads itself", e, "{ Patient(id: \"p1\") { ...f } }\nfragment f on Patient { id ...f }", 2, 25, "Patient.id", "deeper than 4"},
		{"too long", slow, "{ PatientList { id } }", 1, 3, "", "longer than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := wantGraphQLError(t, gql(c.e, "", "/$graphql", c.query, nil), http.StatusBadRequest, c.line, c.column, c.expr)
			if msg := fmt.Sprint(m["errors"]); !strings.Contains(msg, c.contains) {
				t.Fatalf("the message does not say %q: %s", c.contains, msg)
			}
			issue := m["errors"].([]any)[0].(map[string]any)["extensions"].(map[string]any)["outcome"].(map[string]any)["issue"].([]any)[0].(map[string]any)
			if issue["code"] != "too-costly" {
				t.Fatalf("issue code %v, want too-costly", issue["code"])
			}
		})
	}
	t.Run("within bounds", func(t *testing.T) {
		data(t, gql(e, "", "/$graphql", `{ PatientList(_count: 3) { id } }`, nil))
	})
}

func TestGraphQLBadInput(t *testing.T) {
	e := newEnv(t)
	e.put("/Patient/p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"A"},{"family":"B"}]}`)
	cases := []struct {
		name, path, query string
		status, line, col int
		expr              string
	}{
		{"a query that does not parse", "/$graphql", "{\n  PatientList(name: \"x\" { id }\n}", 400, 2, 25, ""},
		{"an unknown field", "/Patient/p1/$graphql", "{\n  name { family nickname }\n}", 400, 2, 17, "name.nickname"},
		{"an unknown field of an absent element", "/Patient/p1/$graphql", "{ photo { colour } }", 400, 1, 11, "photo.colour"},
		{"an unknown type", "/$graphql", "{ Patientz(id: \"p1\") { id } }", 400, 1, 3, "Patientz"},
		{"an unknown search parameter", "/$graphql", "{ PatientList(nickname: \"x\") { id } }", 400, 1, 15, "PatientList"},
		{"a complex field without a selection", "/Patient/p1/$graphql", "{ name }", 400, 1, 3, "name"},
		{"a selection on a primitive", "/Patient/p1/$graphql", "{ id { value } }", 400, 1, 3, "id"},
		{"a FHIRPath filter that does not compile", "/Patient/p1/$graphql", "{ name(fhirpath: \"family.(\") { family } }", 400, 1, 8, "name"},
		{"an unknown directive", "/Patient/p1/$graphql", "{ id @shout }", 400, 1, 7, ""},
		{"a @singleton with two values", "/Patient/p1/$graphql", "{ name @flatten { family @singleton } }", 400, 1, 19, "name.family"},
		{"a fragment on an unknown type", "/Patient/p1/$graphql", "{ ... on Patientz { id } }", 400, 1, 7, ""},
		{"a mutation", "/$graphql", "mutation { PatientCreate { id } }", 400, 1, 1, ""},
		{"an undeclared variable", "/$graphql", "{ Patient(id: $who) { id } }", 400, 1, 15, ""},
		{"a missing resource", "/$graphql", "{ Patient(id: \"nobody\") { id } }", 404, 1, 3, "Patient"},
		{"a missing focus", "/Patient/nobody/$graphql", "{ id }", 404, 0, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantGraphQLError(t, gql(e, "", c.path, c.query, nil), c.status, c.line, c.col, c.expr)
		})
	}
	t.Run("bad input changes nothing", func(t *testing.T) {
		if r := e.get("/Patient/p1"); r.Status != http.StatusOK || r.JSON(t)["meta"].(map[string]any)["versionId"] != "1" {
			t.Fatalf("Patient/p1 changed: %d %s", r.Status, r.Body)
		}
	})
}

// BenchmarkGraphQLPatientScreen times one GraphQL query for a patient's
// screen (the patient, their conditions, their medications and their
// latest 10 vital signs) against the same four reads and searches made one
// after another over REST, in the same run, on Synthea-shaped data. Sizes
// come from FHIRSTORE_BENCH_SIZES (default 3000):
//
//	FHIRSTORE_BENCH_SIZES=3000,10000,100000 go test ./server -run '^$' -bench GraphQLPatientScreen -benchtime 1x -timeout 60m
//
// Figures: docs/performance.md, section "GraphQL".
func BenchmarkGraphQLPatientScreen(b *testing.B) {
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) { patientScreen(b, n) })
	}
}

// patientScreenQuery is the screen's GraphQL query for the patient PATIENT.
const patientScreenQuery = `{ Patient(id: "PATIENT") {
  id name { given family } birthDate gender
  ConditionList(_reference: patient, _count: 100) { id clinicalStatus { coding { code } } code { text coding { system code } } onsetDateTime }
  MedicationRequestList(_reference: patient, _count: 100) { id status medicationCodeableConcept { text } authoredOn }
  ObservationList(_reference: patient, category: "vital-signs", _sort: "-date", _count: 10) { id code { text } valueQuantity { value unit } effectiveDateTime }
} }`

// patientScreen loads n resources and times the screen both ways.
func patientScreen(b *testing.B, n int) {
	e := newEnv(b)
	b.Logf("%d resources loaded", loadSynthea(b, e, n))
	ref := newestSubjectOf(b, e, "/Observation?code=http://loinc.org|8867-4&_sort=-_lastUpdated&_count=1")
	id := strings.TrimPrefix(ref, "Patient/")
	query := mustJSON(map[string]any{"query": strings.ReplaceAll(patientScreenQuery, "PATIENT", id)})
	rest := []string{
		"/Patient/" + id,
		"/Condition?patient=" + id + "&_count=100",
		"/MedicationRequest?patient=" + id + "&_count=100",
		"/Observation?patient=" + id + "&category=vital-signs&_sort=-date&_count=10",
	}
	graph := func() {
		r := e.do(request{Method: http.MethodPost, Path: "/$graphql", Body: query, Header: map[string]string{"Content-Type": "application/json"}})
		if r.Status != http.StatusOK {
			b.Fatalf("$graphql: %d %.300s", r.Status, r.Body)
		}
	}
	restT, graphT := interleavedMedians(31, func() {
		for _, p := range rest {
			checkOK(b, e, p)
		}
	}, graph)
	b.ReportMetric(ms(graphT), "graphql-ms")
	b.ReportMetric(ms(restT), "rest-ms")
	b.ReportMetric(float64(graphT)/float64(restT), "ratio")
	b.Logf("graphql %.2f ms   4 REST requests %.2f ms   ratio %.2f", ms(graphT), ms(restT), float64(graphT)/float64(restT))
}

// interleavedMedians times f and g n times each, alternating, so that the
// load of a shared machine weighs on both alike; it returns their medians.
func interleavedMedians(n int, f, g func()) (time.Duration, time.Duration) {
	fs, gs := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		f()
		fs[i] = time.Since(start)
		start = time.Now()
		g()
		gs[i] = time.Since(start)
	}
	slices.Sort(fs)
	slices.Sort(gs)
	return fs[n/2], gs[n/2]
}

func TestGraphQLInCapabilityStatement(t *testing.T) {
	e := newEnv(t)
	rest := e.get("/metadata").JSON(t)["rest"].([]any)[0].(map[string]any)
	for _, op := range rest["operation"].([]any) {
		if op := op.(map[string]any); op["name"] == "graphql" && op["definition"] == "http://hl7.org/fhir/OperationDefinition/Resource-graphql" {
			return
		}
	}
	t.Fatalf("no graphql operation: %v", rest["operation"])
}

func TestGraphQLIntrospection(t *testing.T) {
	e := newEnv(t)
	const q = `query IntrospectionQuery {
  __schema { queryType { name } types { ...T } directives { name locations args { name } } }
  human: __type(name: "HumanName") { kind fields { name type { kind name ofType { kind name } } } }
  none: __type(name: "Nothing") { name }
}
fragment T on __Type { kind name fields(includeDeprecated: true) { name args { name } type { kind name ofType { kind name } } } interfaces { name } possibleTypes { name } }`
	got := data(t, gql(e, "", "/$graphql", q, nil))
	schema := got["__schema"].(map[string]any)
	if schema["queryType"].(map[string]any)["name"] != "Query" {
		t.Fatalf("query type: %v", schema["queryType"])
	}
	types := map[string]map[string]any{}
	for _, ty := range schema["types"].([]any) {
		ty := ty.(map[string]any)
		types[ty["name"].(string)] = ty
	}
	fieldOf := func(typ, name string) map[string]any {
		for _, f := range types[typ]["fields"].([]any) {
			if f := f.(map[string]any); f["name"] == name {
				return f
			}
		}
		t.Fatalf("%s has no field %s", typ, name)
		return nil
	}
	if ty := fieldOf("Patient", "name")["type"].(map[string]any); ty["kind"] != "LIST" || ty["ofType"].(map[string]any)["name"] != "HumanName" {
		t.Fatalf("Patient.name is %v", ty)
	}
	if ty := fieldOf("Reference", "resource")["type"].(map[string]any); ty["name"] != "Resource" {
		t.Fatalf("Reference.resource is %v", ty)
	}
	if ty := fieldOf("Query", "PatientConnection")["type"].(map[string]any); ty["name"] != "PatientConnection" || types["PatientConnection"] == nil {
		t.Fatalf("Query.PatientConnection is %v", ty)
	}
	if len(types["Patient"]["interfaces"].([]any)) != 1 || len(types["String"]["fields"].([]any)) != 0 {
		t.Fatalf("interfaces or empty lists missing: %v %v", types["Patient"]["interfaces"], types["String"])
	}
	if h := got["human"].(map[string]any); h["kind"] != "OBJECT" || !strings.Contains(fmt.Sprint(h["fields"]), "family") {
		t.Fatalf("__type(name: HumanName): %v", h)
	}
	if _, ok := got["none"]; ok {
		t.Fatalf("__type of an unknown name: %v", got["none"])
	}
}
