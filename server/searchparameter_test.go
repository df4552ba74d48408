package server_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// usCoreArchive is the US Core 6.1.0 FHIR package (testdata/ig).
const usCoreArchive = "../testdata/ig/hl7.fhir.us.core-6.1.0.tgz"

// usCoreFiles reads the JSON files of the US Core package whose names
// (under package/) start with prefix.
func usCoreFiles(t testing.TB, prefix string) map[string]string {
	t.Helper()
	f, err := os.Open(usCoreArchive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "package/")
		if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, ".json") {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = string(b)
		}
	}
}

// spBirthplace is a SearchParameter of the city a Patient was born in.
const spBirthplace = `{"resourceType":"SearchParameter","url":"http://example.org/fhir/SearchParameter/birthplace-city","name":"birthplace-city",
	"status":"active","description":"City of birth","code":"birthplace-city","base":["Patient"],"type":"string",
	"expression":"Patient.extension.where(url = 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace').value.city"}`

// bornIn is a Patient born in city.
func bornIn(id, city string) string {
	return fmt.Sprintf(`{"resourceType":"Patient","id":%q,"name":[{"family":"Early"}],
		"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthPlace","valueAddress":{"city":%q}}]}`, id, city)
}

// spBundle is a searchset as the tests read it.
type spBundle struct {
	Total *int `json:"total"`
	Entry []struct {
		Resource struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
			Issue        []struct {
				Severity    string   `json:"severity"`
				Code        string   `json:"code"`
				Diagnostics string   `json:"diagnostics"`
				Expression  []string `json:"expression"`
			} `json:"issue"`
		} `json:"resource"`
		Search struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

// spSearch runs a search that must answer 200.
func spSearch(t testing.TB, e *env, path string) *spBundle {
	t.Helper()
	r := e.get(path)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var b spBundle
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return &b
}

// ids are the ids of the matches of a search.
func (b *spBundle) ids() []string {
	var out []string
	for _, en := range b.Entry {
		if en.Search.Mode == "match" {
			out = append(out, en.Resource.ID)
		}
	}
	sort.Strings(out)
	return out
}

// incomplete is the warning of a search whose parameters are being
// re-indexed: its diagnostics, "" when there is none.
func (b *spBundle) incomplete() string {
	for _, en := range b.Entry {
		if en.Search.Mode != "outcome" || en.Resource.ResourceType != "OperationOutcome" {
			continue
		}
		for _, is := range en.Resource.Issue {
			if is.Severity == "warning" && is.Code == "incomplete" {
				return is.Diagnostics
			}
		}
	}
	return ""
}

// awaitComplete searches path until it answers without the re-indexing
// warning (at most 30 s) and returns that answer.
func awaitComplete(t testing.TB, e *env, path string) *spBundle {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b := spSearch(t, e, path)
		if b.incomplete() == "" {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still re-indexing after 30 s: %s", path, b.incomplete())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustWrite sends a write that must answer 200 or 201.
func mustWrite(t testing.TB, e *env, method, path, body string) {
	t.Helper()
	r := e.do(request{Method: method, Path: path, Body: body})
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
}

func TestASearchParameterPostedAfterTheDataReindexesIt(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e, http.MethodPut, "/Patient/born-boston", bornIn("born-boston", "Boston"))
	mustWrite(t, e, http.MethodPut, "/Patient/born-paris", bornIn("born-paris", "Paris"))
	mustWrite(t, e, http.MethodPost, "/SearchParameter", spBirthplace)
	if got := awaitComplete(t, e, "/Patient?birthplace-city=boston").ids(); !slices.Equal(got, []string{"born-boston"}) {
		t.Fatalf("birthplace-city=boston after the re-index: %v", got)
	}
	mustWrite(t, e, http.MethodPut, "/Patient/born-later", bornIn("born-later", "Boston"))
	b := spSearch(t, e, "/Patient?birthplace-city:exact=Boston")
	if got := b.ids(); !slices.Equal(got, []string{"born-boston", "born-later"}) || b.incomplete() != "" {
		t.Errorf("birthplace-city:exact=Boston with a resource written after: %v %q", got, b.incomplete())
	}
	status := e.get("/$reindex-status").JSON(t)
	if params, _ := json.Marshal(status); !strings.Contains(string(params), `"valueString":"birthplace-city"`) ||
		status["parameter"].([]any)[0].(map[string]any)["valueCode"] != "complete" {
		t.Errorf("$reindex-status after the re-index: %s", params)
	}
}

func TestSearchesSayWhenAParameterIsBeingReindexed(t *testing.T) {
	release := make(chan struct{})
	var blocked atomic.Bool
	e := newEnv(t, func(_ *server.Config, o *store.Options) {
		o.Fault = func(point string) error {
			if point == store.FaultReindexBatch && !blocked.Swap(true) {
				<-release
			}
			return nil
		}
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	mustWrite(t, e, http.MethodPut, "/Patient/born-boston", bornIn("born-boston", "Boston"))
	mustWrite(t, e, http.MethodPost, "/SearchParameter", spBirthplace)
	for deadline := time.Now().Add(30 * time.Second); !blocked.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // the job has recorded its start and waits before its first batch
	}
	b := spSearch(t, e, "/Patient?birthplace-city=Boston")
	if b.incomplete() == "" || b.Entry[0].Search.Mode != "outcome" {
		t.Fatalf("a search while re-indexing has no warning first: %+v", b)
	}
	if strings.Contains(b.incomplete(), "birthplace-city") == false {
		t.Errorf("the warning does not name the parameter: %s", b.incomplete())
	}
	if b := spSearch(t, e, "/Patient?name=Early"); b.incomplete() != "" {
		t.Errorf("a search of built-in parameters warns: %s", b.incomplete())
	}
	status, _ := json.Marshal(e.get("/$reindex-status").JSON(t))
	for _, want := range []string{`"valueCode":"in-progress"`, `"name":"pending","valueString":"birthplace-city"`, `"name":"total","valueInteger":1`} {
		if !strings.Contains(string(status), want) {
			t.Errorf("$reindex-status while re-indexing has no %s: %s", want, status)
		}
	}
	free()
	if got := awaitComplete(t, e, "/Patient?birthplace-city=Boston").ids(); !slices.Equal(got, []string{"born-boston"}) {
		t.Errorf("after the re-index: %v", got)
	}
}

func TestReindexingResumesAfterARestart(t *testing.T) {
	const patients = 26 // more than a batch of the job
	var batches atomic.Int32
	first := newEnv(t, func(_ *server.Config, o *store.Options) {
		o.ReindexBatch = 20
		o.Fault = func(point string) error {
			if point == store.FaultReindexBatch && batches.Add(1) >= 2 {
				return errors.New("the process stops")
			}
			return nil
		}
	})
	var entries []string
	for i := range patients {
		entries = append(entries, fmt.Sprintf(`{"resource":%s,"request":{"method":"PUT","url":"Patient/p%03d"}}`, bornIn(fmt.Sprintf("p%03d", i), "Boston"), i))
	}
	mustWrite(t, first, http.MethodPost, "/", `{"resourceType":"Bundle","type":"batch","entry":[`+strings.Join(entries, ",")+`]}`)
	mustWrite(t, first, http.MethodPost, "/SearchParameter", spBirthplace)
	deadline := time.Now().Add(30 * time.Second)
	for batches.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if b := spSearch(t, first, "/Patient?birthplace-city=Boston&_summary=count"); !strings.Contains(b.incomplete(), "20 of 26") {
		t.Fatalf("the stopped job: %q", b.incomplete())
	}
	if err := first.store.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zap.InfoLevel)
	second := restartEnv(t, first, true, func(o *store.Options) { o.ReindexBatch, o.Logger = 20, zap.New(core) })
	if n, err := second.store.ResumeSearchIndex(context.Background()); err != nil || n == 0 {
		t.Fatalf("resume: %d tenants, %v", n, err)
	}
	b := awaitComplete(t, second, "/Patient?birthplace-city=Boston&_summary=count")
	if b.Total == nil || *b.Total != patients {
		t.Errorf("after the restart: total %v, want %d", b.Total, patients)
	}
	resumed := false
	for _, entry := range logs.FilterMessageSnippet("re-indexing the resources written before them").All() {
		resumed = resumed || entry.ContextMap()["done"] == int64(20)
	}
	if !resumed {
		t.Errorf("the job did not resume after the 20 resources done: %v", logs.All())
	}
}

// restartEnv serves e's tenant from a new store on the same database, as
// a restarted (exclusive) or another (shared) server would.
func restartEnv(t testing.TB, e *env, exclusive bool, mutate ...func(*store.Options)) *env {
	t.Helper()
	opts := db.Options()
	opts.Exclusive = exclusive
	for _, m := range mutate {
		m(&opts)
	}
	st := db.Open(t, opts)
	h := server.New(e.cfg, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: st, tenant: e.tenant, token: e.token, cfg: e.cfg, h: h}
}

func TestEveryServerOfASharedDatabaseSeesANewSearchParameter(t *testing.T) {
	a := newEnv(t, func(_ *server.Config, o *store.Options) { o.Exclusive = false })
	b := restartEnv(t, a, false)
	mustWrite(t, a, http.MethodPut, "/Patient/born-boston", bornIn("born-boston", "Boston"))
	if r := b.do(request{Method: http.MethodGet, Path: "/Patient?birthplace-city=Boston", Header: map[string]string{"Prefer": "handling=strict"}}); r.Status != http.StatusBadRequest {
		t.Fatalf("before the SearchParameter: %d %s", r.Status, r.Body)
	}
	mustWrite(t, a, http.MethodPost, "/SearchParameter", spBirthplace)
	mustWrite(t, b, http.MethodPut, "/Patient/born-later", bornIn("born-later", "Boston"))
	// Servers sharing a database learn of each other's work by polling it:
	// the other server may answer "complete" a moment before the first
	// server's re-indexing of born-boston is visible to it.
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = awaitComplete(t, b, "/Patient?birthplace-city=Boston").ids(); slices.Equal(got, []string{"born-boston", "born-later"}) || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(got, []string{"born-boston", "born-later"}) {
		t.Errorf("the other server: %v", got)
	}
}

func TestDeletingOrRetiringASearchParameterRemovesIt(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(e *env, id string) *response
	}{
		{"deleted", func(e *env, id string) *response {
			return e.do(request{Method: http.MethodDelete, Path: "/SearchParameter/" + id})
		}},
		{"retired", func(e *env, id string) *response {
			body := strings.Replace(spBirthplace, `"status":"active"`, `"status":"retired"`, 1)
			body = strings.Replace(body, `{"resourceType":"SearchParameter",`, `{"resourceType":"SearchParameter","id":"`+id+`",`, 1)
			return e.put("/SearchParameter/"+id, body)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			mustWrite(t, e, http.MethodPut, "/Patient/born-boston", bornIn("born-boston", "Boston"))
			id := e.create("SearchParameter", spBirthplace)
			awaitComplete(t, e, "/Patient?birthplace-city=Boston")
			if r := c.remove(e, id); r.Status >= 300 {
				t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
			}
			strict := map[string]string{"Prefer": "handling=strict"}
			wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient?birthplace-city=Boston", Header: strict}), http.StatusBadRequest, "birthplace-city")
			if params := capabilityParams(t, e, "Patient"); params["birthplace-city"] != "" {
				t.Errorf("the CapabilityStatement still lists it")
			}
		})
	}
}

// capabilityParams maps the search parameters of a type in the
// CapabilityStatement to their definition URLs.
func capabilityParams(t testing.TB, e *env, typ string) map[string]string {
	t.Helper()
	var cs struct {
		Rest []struct {
			Resource []struct {
				Type        string `json:"type"`
				SearchParam []struct {
					Name, Type, Definition string
				} `json:"searchParam"`
			} `json:"resource"`
		} `json:"rest"`
	}
	r := e.get("/metadata")
	if err := json.Unmarshal(r.Body, &cs); err != nil || r.Status != http.StatusOK {
		t.Fatalf("metadata: %d %v", r.Status, err)
	}
	out := map[string]string{}
	for _, res := range cs.Rest[0].Resource {
		if res.Type == typ {
			for _, p := range res.SearchParam {
				out[p.Name] = p.Definition
				if out[p.Name] == "" {
					out[p.Name] = "(no definition)"
				}
			}
		}
	}
	return out
}

func TestABadSearchParameterIsRefusedWhereItIsWrong(t *testing.T) {
	e := newEnv(t)
	sp := func(field, value string) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(spBirthplace), &m); err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(m, field)
		} else {
			m[field] = json.RawMessage(value)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	deep := strings.Repeat("(", 5000) + "Patient.name" + strings.Repeat(")", 5000)
	long := "Patient.name" + strings.Repeat(".where(true)", 20000)
	for _, c := range []struct {
		name, body, where string
	}{
		{"an expression that does not parse", sp("expression", `"Patient.name.where("`), "SearchParameter.expression"},
		{"an unknown function", sp("expression", `"Patient.name.sing()"`), "SearchParameter.expression"},
		{"an element Patient does not have", sp("expression", `"Patient.birthPlace"`), "SearchParameter.expression"},
		{"an expression of another type", sp("expression", `"Observation.code"`), "SearchParameter.expression"},
		{"an expression nested too deep", sp("expression", fmt.Sprintf("%q", deep)), "SearchParameter.expression"},
		{"an expression too long", sp("expression", fmt.Sprintf("%q", long)), "SearchParameter.expression"},
		{"no expression", sp("expression", ""), "SearchParameter.expression"},
		{"a special parameter", sp("type", `"special"`), "SearchParameter.type"},
		{"a code that chains", sp("code", `"birth.city"`), "SearchParameter.code"},
		{"a base that is not a resource type", sp("base", `["Patient","Person","Citizen"]`), "SearchParameter.base[2]"},
		{"a base of every resource", sp("base", `["Resource"]`), "SearchParameter.base[0]"},
	} {
		r := e.post("/SearchParameter", c.body)
		wantOutcome(t, r, http.StatusBadRequest, c.where)
		tx := `{"resourceType":"Bundle","type":"transaction","entry":[{"resource":` + c.body + `,"request":{"method":"POST","url":"SearchParameter"}}]}`
		if r := e.post("/", tx); r.Status != http.StatusBadRequest {
			t.Errorf("%s in a transaction: %d %s", c.name, r.Status, r.Body)
		}
	}
	if b := spSearch(t, e, "/SearchParameter?_summary=count"); b.Total == nil || *b.Total != 0 {
		t.Errorf("refused SearchParameters were stored: %v", b.Total)
	}
	if params := capabilityParams(t, e, "Patient"); params["birthplace-city"] != "" {
		t.Error("a refused parameter is in force")
	}
}

func TestTheCapabilityStatementListsTheParametersInForce(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e, http.MethodPost, "/SearchParameter", spBirthplace)
	mustWrite(t, e, http.MethodPost, "/SearchParameter", usCoreFiles(t, "SearchParameter-us-core-patient-gender.json")["SearchParameter-us-core-patient-gender.json"])
	params := capabilityParams(t, e, "Patient")
	for name, want := range map[string]string{
		"birthplace-city": "http://example.org/fhir/SearchParameter/birthplace-city",
		"gender":          "http://hl7.org/fhir/us/core/SearchParameter/us-core-patient-gender",
		"birthdate":       "http://hl7.org/fhir/SearchParameter/individual-birthdate",
	} {
		if params[name] != want {
			t.Errorf("%s: definition %q, want %q", name, params[name], want)
		}
	}
	other := newEnv(t)
	if params := capabilityParams(t, other, "Patient"); params["birthplace-city"] != "" || params["gender"] != "http://hl7.org/fhir/SearchParameter/individual-gender" {
		t.Errorf("another tenant sees the first one's parameters: %v", params)
	}
	stranger := *e
	stranger.token = ""
	if params := capabilityParams(t, &stranger, "Patient"); params["birthplace-city"] != "" {
		t.Error("a request without a token sees the tenant's parameters")
	}
	if b := spSearch(t, e, "/Patient?gender=female"); b.incomplete() != "" {
		t.Errorf("a restated built-in parameter is re-indexed: %s", b.incomplete())
	}
}

func TestAComposteParameterOfTheTenant(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e, http.MethodPut, "/Patient/f-boston", `{"resourceType":"Patient","id":"f-boston","gender":"female","address":[{"city":"Boston"}]}`)
	mustWrite(t, e, http.MethodPut, "/Patient/m-boston", `{"resourceType":"Patient","id":"m-boston","gender":"male","address":[{"city":"Boston"}]}`)
	mustWrite(t, e, http.MethodPost, "/SearchParameter", `{"resourceType":"SearchParameter","url":"http://example.org/sp/gender-city","name":"gender-city","status":"active",
		"description":"gender and city","code":"gender-city","base":["Patient"],"type":"composite","expression":"Patient",
		"component":[{"definition":"http://hl7.org/fhir/SearchParameter/individual-gender","expression":"gender"},
			{"definition":"http://hl7.org/fhir/SearchParameter/individual-address-city","expression":"address.city"}]}`)
	if got := awaitComplete(t, e, "/Patient?gender-city=female$boston").ids(); !slices.Equal(got, []string{"f-boston"}) {
		t.Errorf("gender-city=female$boston: %v", got)
	}
}

func TestUSCoreRaceAndEthnicitySearchThePatientExample(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e, http.MethodPut, "/Patient/example", usCoreFiles(t, "example/Patient-example.json")["example/Patient-example.json"])
	mustWrite(t, e, http.MethodPut, "/Patient/other", `{"resourceType":"Patient","id":"other","gender":"male"}`)
	for name, body := range usCoreFiles(t, "SearchParameter-us-core-") {
		if strings.Contains(name, "race") || strings.Contains(name, "ethnicity") {
			mustWrite(t, e, http.MethodPost, "/SearchParameter", body)
		}
	}
	for _, q := range []string{"race=2106-3", "ethnicity=2135-2", "race=1002-5,2028-9", "ethnicity:not=2186-5&race:missing=false"} {
		if got := awaitComplete(t, e, "/Patient?"+q).ids(); !slices.Equal(got, []string{"example"}) {
			t.Errorf("Patient?%s: %v, want the example", q, got)
		}
	}
	if got := spSearch(t, e, "/Patient?race=2054-5").ids(); len(got) != 0 {
		t.Errorf("Patient?race=2054-5: %v", got)
	}
	if got := spSearch(t, e, "/Patient?race:missing=true").ids(); !slices.Equal(got, []string{"other"}) {
		t.Errorf("Patient?race:missing=true: %v", got)
	}
}

// usCoreQuery is a search of a US Core parameter and the example it must find.
type usCoreQuery struct {
	query, want string
}

func TestEveryUSCoreSearchParameterSearchesTheExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("stores every US Core example")
	}
	e := newEnv(t)
	examples := usCoreFiles(t, "example/")
	var entries []string
	for _, body := range append(slices.Collect(maps.Values(examples)), usCoreExtras...) {
		var head struct{ ResourceType, ID string }
		if json.Unmarshal([]byte(body), &head) != nil || head.ResourceType == "Bundle" {
			continue
		}
		entries = append(entries, fmt.Sprintf(`{"resource":%s,"request":{"method":"PUT","url":"%s/%s"}}`, body, head.ResourceType, head.ID))
	}
	r := e.post("/", `{"resourceType":"Bundle","type":"batch","entry":[`+strings.Join(entries, ",")+`]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("storing the examples: %d %s", r.Status, r.Body)
	}
	var reply struct {
		Entry []struct {
			Response struct {
				Status  string          `json:"status"`
				Outcome json.RawMessage `json:"outcome"`
			} `json:"response"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(r.Body, &reply); err != nil {
		t.Fatal(err)
	}
	for i, en := range reply.Entry {
		if !strings.HasPrefix(en.Response.Status, "20") {
			t.Logf("example %d not stored (its searches below fail): %s %s", i, en.Response.Status, en.Response.Outcome)
		}
	}
	for _, body := range usCoreFiles(t, "SearchParameter-") {
		mustWrite(t, e, http.MethodPost, "/SearchParameter", body)
	}
	queries := usCoreQueries()
	for _, q := range queries {
		if got := awaitComplete(t, e, "/"+q.query+"&_count=100").ids(); !slices.Contains(got, q.want) {
			t.Errorf("%s: %v, want %s among them", q.query, got, q.want)
		}
	}
	covered := map[string]bool{}
	for _, q := range queries {
		typ, rest, _ := strings.Cut(q.query, "?")
		for _, part := range strings.Split(rest, "&") {
			name, _, _ := strings.Cut(part, "=")
			name, _, _ = strings.Cut(name, ":")
			name, _, _ = strings.Cut(name, ".")
			covered[typ+"?"+name] = true
		}
	}
	for name, body := range usCoreFiles(t, "SearchParameter-") {
		var sp struct {
			Code string
			Base []string
		}
		_ = json.Unmarshal([]byte(body), &sp)
		if !covered[sp.Base[0]+"?"+sp.Code] {
			t.Errorf("%s: no search of %s?%s", name, sp.Base[0], sp.Code)
		}
	}
}

// usCoreExtras are resources for the US Core parameters whose examples
// hold no value of them.
var usCoreExtras = []string{
	`{"resourceType":"CarePlan","id":"dated","status":"active","intent":"plan","subject":{"reference":"Patient/example"},"period":{"start":"2020-01-01"}}`,
	`{"resourceType":"Encounter","id":"identified","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},
		"identifier":[{"system":"http://example.org/visits","value":"v-1"}],"subject":{"reference":"Patient/example"}}`,
	`{"resourceType":"PractitionerRole","id":"role-1","practitioner":{"reference":"Practitioner/practitioner-1"},
		"specialty":[{"coding":[{"system":"http://nucc.org/provider-taxonomy","code":"208D00000X"}]}]}`,
}

// usCoreQueries are a search of every US Core 6.1.0 SearchParameter over
// the package's examples (and usCoreExtras), each with a resource it must
// find.
func usCoreQueries() []usCoreQuery {
	return []usCoreQuery{
		{"AllergyIntolerance?clinical-status=active&patient=Patient/example", "example"},
		{"CarePlan?category=assess-plan&patient=example&status=active", "colonoscopy"},
		{"CarePlan?date=ge2020", "dated"},
		{"CareTeam?patient=example&role=17561000&status=active", "example"},
		{"Condition?abatement-date=lt2016", "encounter-diagnosis-example1"},
		{"Condition?asserted-date=2016-08-10", "condition-SDOH-example"},
		{"Condition?category=problem-list-item&clinical-status=active", "condition-duodenal-ulcer"},
		{"Condition?code=http://snomed.info/sct|442311008", "encounter-diagnosis-example2"},
		{"Condition?encounter=Encounter/example-1&onset-date=2015-10-31&patient=example", "encounter-diagnosis-example1"},
		{"Condition?recorded-date=ge2016", "condition-SDOH-example"},
		{"Coverage?patient=Patient/example", "coverage-example"},
		{"Device?patient=example&status=active&type=http://snomed.info/sct|468063009", "udi-1"},
		{"DiagnosticReport?category=LP29684-5&code=83311-1&date=ge2021&patient=example&status=final", "bone-density-report"},
		{"DocumentReference?_id=episode-summary&category=clinical-note&date=ge2016&patient=example&period=ge2004&status=current&type=http://loinc.org|34133-9", "episode-summary"},
		{"Encounter?_id=example-1&class=AMB&date=ge2015&patient=example&status=finished&type=99201", "example-1"},
		{"Encounter?discharge-disposition=01&location=Location/hospital", "1036"},
		{"Encounter?identifier=http://example.org/visits|v-1", "identified"},
		{"Goal?description=http://snomed.info/sct|406156006&lifecycle-status=active&patient=example&target-date=2022-02-01", "goal-sdoh-2"},
		{"Immunization?date=ge2020&patient=example&status=completed", "imm-1"},
		{"Location?address=Amherst&address-city=Amherst&address-postalcode=01002&address-state=MA&name=Health", "hl7east"},
		{"MedicationDispense?patient=example&status=completed&type=FFC", "medicationdispense-example"},
		{"MedicationRequest?authoredon=2008-04-05&intent=order&patient=example&status=active", "medicationrequest-coded-oral-axid"},
		{"MedicationRequest?encounter=Encounter/example-1", "self-tylenol"},
		{"Observation?category=laboratory&code=718-7&date=ge2000&patient=example&status=final", "cbc-hemoglobin"},
		{"Organization?address=Amherst&name=Acme", "acme-lab"},
		{"Patient?_id=example&birthdate=1987-02-20&death-date:missing=true&family=Shaw&gender=female&given=Amy&identifier=1032702&name=Amy", "example"},
		{"Patient?ethnicity=2135-2&race=2106-3", "example"},
		{"Patient?gender-identity=UNK", "example"},
		{"Practitioner?_id=practitioner-1&identifier=9941339100&name=Bone", "practitioner-1"},
		{"PractitionerRole?practitioner.name=Bone&specialty=208D00000X", "role-1"},
		{"PractitionerRole?practitioner.identifier=http://hl7.org/fhir/sid/us-npi|9941339100", "role-1"},
		{"Procedure?code=http://snomed.info/sct|24165007&date=2002-05-23&patient=example&status=completed", "rehab"},
		{"QuestionnaireResponse?_id=hunger-vital-sign-example&authored=ge2020&patient=example&questionnaire=http://hl7.org/fhir/us/core/Questionnaire/hunger-vital-sign-example&status=completed", "hunger-vital-sign-example"},
		{"RelatedPerson?_id=shaw-niece&name=Sarah&patient=Patient/example", "shaw-niece"},
		{"ServiceRequest?_id=foodpantry-referral&authored=ge2021&category=sdoh&code=467771000124109&patient=example&status=active", "foodpantry-referral"},
		{"Specimen?_id=specimen-example-serum&patient=example", "specimen-example-serum"},
		{"Observation?patient.race=2106-3&code=718-7", "cbc-hemoglobin"},
		{"Patient?_has:Condition:patient:asserted-date=2016-08-10", "example"},
	}
}

func TestTenantParametersInCompartmentAndSystemSearches(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e, http.MethodPut, "/Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	for _, c := range []string{
		`{"resourceType":"Condition","id":"c1","subject":{"reference":"Patient/p1"},"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/condition-assertedDate","valueDateTime":"2016-08-10"}]}`,
		`{"resourceType":"Condition","id":"c2","subject":{"reference":"Patient/p2"},"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/condition-assertedDate","valueDateTime":"2016-08-10"}]}`,
	} {
		var head struct{ ID string }
		_ = json.Unmarshal([]byte(c), &head)
		mustWrite(t, e, http.MethodPut, "/Condition/"+head.ID, c)
	}
	mustWrite(t, e, http.MethodPost, "/SearchParameter", usCoreFiles(t, "SearchParameter-us-core-condition-asserted-date.json")["SearchParameter-us-core-condition-asserted-date.json"])
	if got := awaitComplete(t, e, "/Condition?asserted-date=2016-08-10").ids(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("type search: %v", got)
	}
	patientScope := *e
	patientScope.token = scopedToken(t, e.tenant, "patient/*.rs", "p1")
	for path, want := range map[string][]string{
		"/Condition?asserted-date=2016-08-10":                     {"c1"},
		"/Patient/p1/Condition?asserted-date=2016-08-10":          {"c1"},
		"/?_type=Condition&asserted-date=2016-08-10":              {"c1"},
		"/Condition?asserted-date=2016-08-10&_summary=count":      nil,
		"/Condition?asserted-date=2016-08-10&_sort=-_lastUpdated": {"c1"},
	} {
		b := spSearch(t, &patientScope, path)
		if got := b.ids(); !slices.Equal(got, want) {
			t.Errorf("patient scope, %s: %v, want %v", path, got, want)
		}
	}
	if got := spSearch(t, e, "/?_type=Condition&asserted-date=2016-08-10").ids(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("system search: %v", got)
	}
}
