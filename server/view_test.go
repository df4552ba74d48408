package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sofDir holds the official SQL on FHIR v2 suite.
const sofDir = "../testdata/sql-on-fhir"

// runBody is a $viewdefinition-run Parameters body: the view inline, the
// resources inline, and further parameters (name → value[x] object).
func runBody(t testing.TB, view any, resources []any, extra ...map[string]any) string {
	t.Helper()
	params := []any{map[string]any{"name": "viewResource", "resource": view}}
	for _, r := range resources {
		params = append(params, map[string]any{"name": "resource", "resource": r})
	}
	for _, e := range extra {
		params = append(params, e)
	}
	b, err := json.Marshal(map[string]any{"resourceType": "Parameters", "parameter": params})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canonJSONRows sorts rows rendered as canonical JSON.
func canonJSONRows(t testing.TB, rows []any) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		b, _ := json.Marshal(r)
		out[i] = string(b)
	}
	slices.Sort(out)
	return out
}

// TestOfficialSuiteOverHTTP runs every test of the official suite through
// POST [base]/$viewdefinition-run with the view and resources inline:
// the rows as a JSON array (order ignored), or a 4xx for an expected error.
func TestOfficialSuiteOverHTTP(t *testing.T) {
	e := newEnv(t)
	files, _ := filepath.Glob(filepath.Join(sofDir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no suite files")
	}
	passed, total := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var suite struct {
			Resources []any `json:"resources"`
			Tests     []struct {
				Title         string   `json:"title"`
				View          any      `json:"view"`
				Expect        []any    `json:"expect"`
				ExpectColumns []string `json:"expectColumns"`
				ExpectError   bool     `json:"expectError"`
			} `json:"tests"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&suite); err != nil {
			t.Fatal(err)
		}
		for _, tc := range suite.Tests {
			total++
			r := e.post("/$viewdefinition-run", runBody(t, tc.View, suite.Resources, map[string]any{"name": "_format", "valueCode": "json"}))
			name := filepath.Base(f) + " :: " + tc.Title
			if tc.ExpectError {
				if r.Status < 400 || r.Status >= 500 {
					t.Errorf("%s: status %d, want a 4xx: %s", name, r.Status, r.Body)
					continue
				}
				passed++
				continue
			}
			var rows []any
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rows) != nil {
				t.Errorf("%s: status %d: %s", name, r.Status, r.Body)
				continue
			}
			if tc.Expect != nil && !slices.Equal(canonJSONRows(t, rows), canonJSONRows(t, tc.Expect)) {
				t.Errorf("%s: rows %s", name, r.Body)
				continue
			}
			passed++
		}
	}
	if passed != total {
		t.Errorf("%d of %d pass over HTTP", passed, total)
	}
}

// namesView reads each patient's id, official family name and birth date.
const namesView = `{"resourceType":"ViewDefinition","url":"http://example.org/ViewDefinition/patient_names","name":"patient_names",` +
	`"status":"active","resource":"Patient","select":[{"column":[{"name":"id","path":"getResourceKey()"},` +
	`{"name":"family","path":"name.where(use = 'official').family.first()"},{"name":"birth_date","path":"birthDate","type":"date"}]}]}`

func patientWith(family, birth string) string {
	return fmt.Sprintf(`{"resourceType":"Patient","name":[{"use":"official","family":%q}],"birthDate":%q}`, family, birth)
}

func TestViewDefinitionIsAResourceTypeOfItsOwn(t *testing.T) {
	e := newEnv(t)
	id := e.create("ViewDefinition", namesView)
	if r := e.get("/ViewDefinition/" + id); r.Status != http.StatusOK || r.JSON(t)["name"] != "patient_names" {
		t.Fatalf("read: %d %s", r.Status, r.Body)
	}
	updated := strings.Replace(namesView, `"status":"active"`, `"status":"retired"`, 1)
	updated = strings.Replace(updated, `{"resourceType":"ViewDefinition",`, `{"resourceType":"ViewDefinition","id":"`+id+`",`, 1)
	if r := e.put("/ViewDefinition/"+id, updated); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	if r := e.get("/ViewDefinition/" + id + "/_history"); r.Status != http.StatusOK || r.JSON(t)["total"] != json.Number("2") {
		t.Fatalf("history: %d %s", r.Status, r.Body)
	}
	for _, q := range []string{"name=patient_names", "url=http://example.org/ViewDefinition/patient_names", "status=retired", "resource=Patient"} {
		if r := e.get("/ViewDefinition?" + q); r.Status != http.StatusOK || r.JSON(t)["total"] != json.Number("1") {
			t.Errorf("search %s: %d %s", q, r.Status, r.Body)
		}
	}
	if r := e.get("/ViewDefinition?status=active"); r.JSON(t)["total"] != json.Number("0") {
		t.Errorf("search status=active finds the retired view: %s", r.Body)
	}
	if r := e.do(request{Method: http.MethodDelete, Path: "/ViewDefinition/" + id}); r.Status != http.StatusOK && r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.get("/ViewDefinition/" + id); r.Status != http.StatusGone {
		t.Errorf("read after delete: %d", r.Status)
	}
	r := e.get("/metadata")
	if !strings.Contains(string(r.Body), `"type":"ViewDefinition"`) || !strings.Contains(string(r.Body), "viewdefinition-run") {
		t.Errorf("the CapabilityStatement does not list ViewDefinition and its operations")
	}
}

// TestBadViewDefinitionsAreRefusedOnWrite: the IG's rules decide, with an
// issue at the element at fault, and nothing is stored.
func TestBadViewDefinitionsAreRefusedOnWrite(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, body, at string }{
		{"no resource", `{"resourceType":"ViewDefinition","status":"active","select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.resource"},
		{"no status", `{"resourceType":"ViewDefinition","resource":"Patient","select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.status"},
		{"a path that does not compile", `{"resourceType":"ViewDefinition","status":"active","resource":"Patient","select":[{"column":[{"name":"id","path":"name.where("}]}]}`, "ViewDefinition.select[0].column[0].path"},
		{"an unknown function", `{"resourceType":"ViewDefinition","status":"active","resource":"Patient","select":[{"column":[{"name":"id","path":"nme.frist()"}]}]}`, "ViewDefinition.select[0].column[0].path"},
		{"a where that is not boolean", `{"resourceType":"ViewDefinition","status":"active","resource":"Patient","where":[{"path":"name.family"}],"select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.where[0].path"},
		{"a column name used twice", `{"resourceType":"ViewDefinition","status":"active","resource":"Patient","select":[{"column":[{"name":"id","path":"id"},{"name":"id","path":"gender"}]}]}`, "ViewDefinition.select[0].column[1].name"},
		{"a path into a choice without a type", `{"resourceType":"ViewDefinition","status":"active","resource":"Observation","select":[{"column":[{"name":"v","path":"value"}]}]}`, "ViewDefinition.select[0].column[0].path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, e.post("/ViewDefinition", tc.body), http.StatusUnprocessableEntity, tc.at)
		})
	}
	if r := e.get("/ViewDefinition"); r.JSON(t)["total"] != json.Number("0") {
		t.Errorf("a refused view was stored: %s", r.Body)
	}
}

// viewEnv is a tenant with three patients, two observations of the first
// and the names view stored.
type viewEnv struct {
	*env
	viewID   string
	patients []string
}

func newViewEnv(t *testing.T) *viewEnv {
	e := newEnv(t)
	x := &viewEnv{env: e}
	for _, p := range [][2]string{{"Smith", "1970-01-02"}, {"Jones", "1980-03-04"}, {"Brown", "1990-05-06"}} {
		x.patients = append(x.patients, e.create("Patient", patientWith(p[0], p[1])))
	}
	for _, code := range []string{"8480-6", "8462-4"} {
		e.create("Observation", fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":%q}]},"subject":{"reference":"Patient/%s"},"valueQuantity":{"value":120,"unit":"mm[Hg]"}}`, code, x.patients[0]))
	}
	x.viewID = e.create("ViewDefinition", namesView)
	return x
}

func (x *viewEnv) run(query string) *response {
	return x.get("/ViewDefinition/" + x.viewID + "/$viewdefinition-run?" + query)
}

func TestViewRunOverTheStoreInEachFormat(t *testing.T) {
	x := newViewEnv(t)
	r := x.run("_format=csv")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	recs, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	if err != nil || len(recs) != 4 || strings.Join(recs[0], ",") != "id,family,birth_date" {
		t.Fatalf("csv: %v %q", err, recs)
	}
	byID := map[string][]string{}
	for _, rec := range recs[1:] {
		byID[rec[0]] = rec
	}
	if got := byID[x.patients[1]]; len(got) != 3 || got[1] != "Jones" || got[2] != "1980-03-04" {
		t.Errorf("row of %s: %q", x.patients[1], got)
	}
	if recs, _ := csv.NewReader(bytes.NewReader(x.run("_format=csv&header=false").Body)).ReadAll(); len(recs) != 3 {
		t.Errorf("header=false: %d records, want 3", len(recs))
	}
	r = x.run("_format=ndjson")
	lines := splitLines(r.Body)
	if r.Status != http.StatusOK || len(lines) != 3 || r.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("ndjson: %d %q", r.Status, lines)
	}
	var rows []map[string]any
	if r = x.run("_format=json"); json.Unmarshal(r.Body, &rows) != nil || len(rows) != 3 {
		t.Fatalf("json: %s", r.Body)
	}
	if r = x.run("_format=parquet"); r.Status != http.StatusOK || !bytes.HasPrefix(r.Body, []byte("PAR1")) || !bytes.HasSuffix(r.Body, []byte("PAR1")) {
		t.Fatalf("parquet: %d %q", r.Status, r.Body[:min(len(r.Body), 40)])
	}
}

func TestViewRunSelectsByLimitPatientGroupAndSince(t *testing.T) {
	x := newViewEnv(t)
	count := func(query string) int {
		t.Helper()
		r := x.run("_format=ndjson&" + query)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, r.Status, r.Body)
		}
		return len(splitLines(r.Body))
	}
	group := x.create("Group", fmt.Sprintf(`{"resourceType":"Group","type":"person","actual":true,"member":[{"entity":{"reference":"Patient/%s"}},{"entity":{"reference":"Patient/%s"}}]}`, x.patients[0], x.patients[2]))
	empty := x.create("Group", `{"resourceType":"Group","type":"person","actual":true}`)
	later := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		name, query string
		rows        int
	}{
		{"_limit cuts the rows", "_limit=2", 2},
		{"patient keeps the patient's compartment", "patient=Patient/" + x.patients[1], 1},
		{"an unknown patient has no rows", "patient=Patient/no-such", 0},
		{"group keeps its members", "group=Group/" + group, 2},
		{"an empty group has no rows", "group=" + empty, 0},
		{"_since keeps what was written since", "_since=" + later, 0},
		{"_since in the past keeps all", "_since=2000-01-01T00:00:00Z", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := count(tc.query); n != tc.rows {
				t.Errorf("%d rows, want %d", n, tc.rows)
			}
		})
	}
}

func TestViewRunFindsTheViewByReferenceOrURL(t *testing.T) {
	x := newViewEnv(t)
	for _, body := range []string{
		`{"resourceType":"Parameters","parameter":[{"name":"viewReference","valueReference":{"reference":"ViewDefinition/` + x.viewID + `"}},{"name":"_format","valueCode":"ndjson"}]}`,
		`{"resourceType":"Parameters","parameter":[{"name":"viewReference","valueCanonical":"http://example.org/ViewDefinition/patient_names"},{"name":"_format","valueCode":"ndjson"}]}`,
	} {
		for _, path := range []string{"/ViewDefinition/$viewdefinition-run", "/$viewdefinition-run"} {
			if r := x.post(path, body); r.Status != http.StatusOK || len(splitLines(r.Body)) != 3 {
				t.Errorf("%s: %d %s", path, r.Status, r.Body)
			}
		}
	}
	if r := x.get("/ViewDefinition/$viewdefinition-run?viewReference=ViewDefinition/" + x.viewID); r.Status != http.StatusOK {
		t.Errorf("GET with viewReference: %d %s", r.Status, r.Body)
	}
}

func TestViewRunRefusesBadInput(t *testing.T) {
	x := newViewEnv(t)
	inline := `{"name":"viewResource","resource":{"resourceType":"ViewDefinition","resource":"Patient","select":[{"column":[{"name":"id","path":"id"}]}]}}`
	params := func(ps ...string) string {
		return `{"resourceType":"Parameters","parameter":[` + strings.Join(ps, ",") + `]}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		at                       string
	}{
		{"no view", "POST", "/$viewdefinition-run", params(`{"name":"_format","valueCode":"json"}`), 400, ""},
		{"two views", "POST", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run", params(inline), 400, ""},
		{"an unknown parameter", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?colour=red", "", 400, "colour"},
		{"an unknown format", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?_format=xlsx", "", 400, "_format"},
		{"a huge _limit", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?_limit=99999999999", "", 400, "_limit"},
		{"a _limit of 0", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?_limit=0", "", 400, "_limit"},
		{"a _since that is no instant", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?_since=yesterday", "", 400, "_since"},
		{"header neither true nor false", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?_format=csv&header=maybe", "", 400, "header"},
		{"a view that does not compile", "POST", "/$viewdefinition-run", params(`{"name":"viewResource","resource":{"resourceType":"ViewDefinition","resource":"Patient","select":[{"column":[{"name":"x","path":"name.where("}]}]}}`), 400, "ViewDefinition.select[0].column[0].path"},
		{"a cyclic repeat", "POST", "/$viewdefinition-run", params(`{"name":"viewResource","resource":{"resourceType":"ViewDefinition","resource":"QuestionnaireResponse","select":[{"repeat":["$this"],"column":[{"name":"x","path":"linkId"}]}]}}`), 400, "ViewDefinition.select[0].repeat[0]"},
		{"an unknown stored view", "GET", "/ViewDefinition/no-such/$viewdefinition-run", "", 404, ""},
		{"an unknown view URL", "POST", "/$viewdefinition-run", params(`{"name":"viewReference","valueCanonical":"http://example.org/none"}`), 404, ""},
		{"a body that is no Parameters", "POST", "/$viewdefinition-run", `{"resourceType":"Patient"}`, 400, "Parameters"},
		{"a view over data it cannot evaluate", "POST", "/$viewdefinition-run", params(`{"name":"viewResource","resource":{"resourceType":"ViewDefinition","resource":"Patient","select":[{"column":[{"name":"g","path":"name.given"}]}]}}`,
			`{"name":"resource","resource":{"resourceType":"Patient","id":"p","name":[{"given":["A","B"]}]}}`), 422, "ViewDefinition.select[0].column[0].path"},
		{"PUT", "PUT", "/$viewdefinition-run", params(inline), 405, ""},
		{"another data source", "GET", "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?source=https://other.example/fhir", "", 400, "source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, x.do(request{Method: tc.method, Path: tc.path, Body: tc.body}), tc.status, tc.at)
		})
	}
}

// TestViewRunStreamsLargeAnswers: an answer larger than what is held back
// arrives whole; an error after that point cuts the connection rather than
// end the answer as if it were complete.
func TestViewRunStreamsLargeAnswers(t *testing.T) {
	e := newEnv(t)
	view := map[string]any{"resourceType": "ViewDefinition", "resource": "Patient", "select": []any{map[string]any{"column": []any{
		map[string]any{"name": "id", "path": "id"}, map[string]any{"name": "given", "path": "name.given"}}}}}
	var resources []any
	for i := range 5000 {
		resources = append(resources, map[string]any{"resourceType": "Patient", "id": fmt.Sprintf("p%05d", i),
			"name": []any{map[string]any{"given": []any{strings.Repeat("x", 20)}}}})
	}
	r := e.post("/$viewdefinition-run", runBody(t, view, resources, map[string]any{"name": "_format", "valueCode": "ndjson"}))
	if r.Status != http.StatusOK || len(splitLines(r.Body)) != 5000 {
		t.Fatalf("%d, %d lines", r.Status, len(splitLines(r.Body)))
	}
	resources = append(resources, map[string]any{"resourceType": "Patient", "id": "twice", "name": []any{map[string]any{"given": []any{"A", "B"}}}})
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/fhir/r4/$viewdefinition-run", strings.NewReader(runBody(t, view, resources, map[string]any{"name": "_format", "valueCode": "ndjson"})))
	req.Host = e.tenant + ".localhost"
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/fhir+json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Errorf("status %d, read error %v: want 200 and a cut connection", resp.StatusCode, err)
	}
}

// TestViewRunUnderAPatientScopeSeesThePatientOnly: a patient-scoped token
// runs views over its patient's compartment only.
func TestViewRunUnderAPatientScopeSeesThePatientOnly(t *testing.T) {
	x := newViewEnv(t)
	tok := scopedToken(t, x.tenant, "patient/*.read", x.patients[0])
	run := func(query string) *response {
		return x.do(request{Method: http.MethodGet, Path: "/ViewDefinition/" + x.viewID + "/$viewdefinition-run?" + query, Token: &tok})
	}
	if r := run("_format=ndjson"); r.Status != http.StatusOK || len(splitLines(r.Body)) != 1 || !strings.Contains(string(r.Body), x.patients[0]) {
		t.Errorf("patient scope: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, run("patient=Patient/"+x.patients[1]), http.StatusForbidden, "patient")
	noRead := scopedToken(t, x.tenant, "system/Observation.read system/ViewDefinition.read", "")
	wantOutcome(t, x.do(request{Method: http.MethodGet, Path: "/ViewDefinition/" + x.viewID + "/$viewdefinition-run", Token: &noRead}), http.StatusForbidden, "")
}

// sqlBody is a $sqlquery-run body with an inline SQLQuery Library over
// the names view as table patient_names.
func sqlBody(sql string, extra ...string) string {
	lib := map[string]any{"resourceType": "Library", "status": "active",
		"type":            map[string]any{"coding": []any{map[string]any{"system": "https://sql-on-fhir.org/ig/CodeSystem/LibraryTypesCodes", "code": "sql-query"}}},
		"relatedArtifact": []any{map[string]any{"type": "depends-on", "resource": "http://example.org/ViewDefinition/patient_names", "label": "patient_names"}},
		"parameter":       []any{map[string]any{"name": "family", "use": "in", "type": "string"}},
		"content":         []any{map[string]any{"contentType": "application/sql", "data": b64(sql)}}}
	b, _ := json.Marshal(lib)
	ps := append([]string{`{"name":"queryResource","resource":` + string(b) + `}`, `{"name":"_format","valueCode":"json"}`}, extra...)
	return `{"resourceType":"Parameters","parameter":[` + strings.Join(ps, ",") + `]}`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestSQLQueryRunOverViews(t *testing.T) {
	x := newViewEnv(t)
	var rows []map[string]any
	r := x.post("/$sqlquery-run", sqlBody("SELECT count(*) AS n FROM patient_names"))
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rows) != nil || len(rows) != 1 || fmt.Sprint(rows[0]["n"]) != "3" {
		t.Fatalf("count: %d %s", r.Status, r.Body)
	}
	r = x.post("/Library/$sqlquery-run", sqlBody("SELECT id FROM patient_names WHERE family = :family",
		`{"name":"parameters","resource":{"resourceType":"Parameters","parameter":[{"name":"family","valueString":"Jones"}]}}`))
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rows) != nil || len(rows) != 1 || rows[0]["id"] != x.patients[1] {
		t.Fatalf("parameter: %d %s", r.Status, r.Body)
	}
	r = x.post("/$sqlquery-run", strings.Replace(sqlBody("SELECT family, birth_date FROM patient_names ORDER BY family"), `"valueCode":"json"`, `"valueCode":"csv"`, 1))
	if r.Status != http.StatusOK || !strings.HasPrefix(string(r.Body), "family,birth_date\nBrown,1990-05-06\n") {
		t.Fatalf("csv: %d %s", r.Status, r.Body)
	}
	var lib map[string]any
	dec := json.NewDecoder(strings.NewReader(sqlBody("SELECT count(*) AS n FROM patient_names")))
	dec.UseNumber()
	_ = dec.Decode(&lib)
	stored, _ := json.Marshal(lib["parameter"].([]any)[0].(map[string]any)["resource"])
	libID := x.create("Library", string(stored))
	if r := x.get("/Library/" + libID + "/$sqlquery-run?_format=csv"); r.Status != http.StatusOK || string(r.Body) != "n\n3\n" {
		t.Errorf("instance level: %d %q", r.Status, r.Body)
	}
}

func TestSQLQueryRunIsReadOnlyAndRefusesBadQueries(t *testing.T) {
	x := newViewEnv(t)
	notSQLQuery := strings.Replace(sqlBody("SELECT 1"), `"code":"sql-query"`, `"code":"logic-library"`, 1)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"a DELETE", sqlBody("DELETE FROM patient_names"), 400},
		{"ATTACH", sqlBody("ATTACH DATABASE '/tmp/x.db' AS x"), 400},
		{"two statements", sqlBody("SELECT 1; DROP TABLE patient_names"), 400},
		{"a table that is not one of its views", sqlBody("SELECT * FROM Patient"), 400},
		{"the schema table", sqlBody("SELECT * FROM sqlite_master"), 403},
		{"a function not allowed", sqlBody("SELECT load_extension('x')"), 403},
		{"a write in a CTE", sqlBody("WITH a AS (SELECT 1) UPDATE patient_names SET family = 'X'"), 403},
		{"a Library that is not an SQLQuery", notSQLQuery, 400},
		{"an undeclared parameter", sqlBody("SELECT 1", `{"name":"parameters","resource":{"resourceType":"Parameters","parameter":[{"name":"colour","valueString":"red"}]}}`), 400},
		{"a view URL nobody has", strings.Replace(sqlBody("SELECT 1"), "ViewDefinition/patient_names", "ViewDefinition/none", 1), 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, x.post("/$sqlquery-run", tc.body), tc.status, "")
		})
	}
	if r := x.get("/Patient?_summary=count"); r.JSON(t)["total"] != json.Number("3") {
		t.Errorf("the tenant's data changed: %s", r.Body)
	}
	if r := x.run("_format=ndjson"); len(splitLines(r.Body)) != 3 {
		t.Errorf("the view's data changed: %s", r.Body)
	}
}

func TestViewDefinitionExportWritesFilesPerView(t *testing.T) {
	x := newExportEnv(t)
	ve := &viewEnv{env: x.env}
	for _, p := range [][2]string{{"Smith", "1970-01-02"}, {"Jones", "1980-03-04"}} {
		ve.patients = append(ve.patients, x.create("Patient", patientWith(p[0], p[1])))
	}
	ve.viewID = x.create("ViewDefinition", namesView)
	body := `{"resourceType":"Parameters","parameter":[{"name":"_format","valueCode":"csv"},` +
		`{"name":"view","part":[{"name":"name","valueString":"names"},{"name":"viewReference","valueReference":{"reference":"ViewDefinition/` + ve.viewID + `"}}]},` +
		`{"name":"view","part":[{"name":"viewResource","resource":{"resourceType":"ViewDefinition","name":"births","resource":"Patient","select":[{"column":[{"name":"born","path":"birthDate"}]}]}}]}]}`
	r := x.do(request{Method: http.MethodPost, Path: "/ViewDefinition/$viewdefinition-export", Body: body, Header: async})
	if r.Status != http.StatusAccepted {
		t.Fatalf("kick-off: %d %s", r.Status, r.Body)
	}
	status := x.relative(r.Header.Get("Content-Location"))
	done := x.await(status)
	var m struct {
		Output []struct {
			Type, Name, URL string
			Count           int
		} `json:"output"`
	}
	if done.Status != http.StatusOK || json.Unmarshal(done.Body, &m) != nil || len(m.Output) != 2 {
		t.Fatalf("manifest: %d %s", done.Status, done.Body)
	}
	for _, o := range m.Output {
		f := x.get(x.relative(o.URL))
		recs, err := csv.NewReader(bytes.NewReader(f.Body)).ReadAll()
		if f.Status != http.StatusOK || err != nil || !strings.HasPrefix(f.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("download %s: %d %s", o.Name, f.Status, f.Body)
		}
		want := map[string]string{"names": "id,family,birth_date", "births": "born"}[o.Name]
		if o.Type != "Patient" || len(recs) != 3 || o.Count != 2 || strings.Join(recs[0], ",") != want {
			t.Errorf("%s: type %s, count %d, records %q", o.Name, o.Type, o.Count, recs)
		}
	}
	// A data source other than this server is refused, not ignored.
	wantOutcome(t, x.do(request{Method: http.MethodPost, Path: "/ViewDefinition/" + ve.viewID + "/$viewdefinition-export?source=s3://bucket/data", Header: async}), http.StatusBadRequest, "source")
	r = x.do(request{Method: http.MethodPost, Path: "/ViewDefinition/" + ve.viewID + "/$viewdefinition-export?_format=parquet&patient=Patient/" + ve.patients[1], Header: async})
	done = x.await(x.relative(r.Header.Get("Content-Location")))
	if json.Unmarshal(done.Body, &m) != nil || len(m.Output) != 1 || m.Output[0].Count != 1 {
		t.Fatalf("patient-level parquet: %d %s", done.Status, done.Body)
	}
	if f := x.get(x.relative(m.Output[0].URL)); !bytes.HasPrefix(f.Body, []byte("PAR1")) || f.Header.Get("Content-Type") != "application/vnd.apache.parquet" {
		t.Errorf("parquet file: %q", f.Header.Get("Content-Type"))
	}
	wantOutcome(t, x.do(request{Method: http.MethodPost, Path: "/$viewdefinition-export", Body: `{"resourceType":"Parameters","parameter":[{"name":"_format","valueCode":"csv"}]}`, Header: async}), http.StatusBadRequest, "view")
}
