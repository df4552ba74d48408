package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// scopedToken signs a dev token for tenant with scope and, when patient is
// set, the SMART patient claim.
func scopedToken(t testing.TB, tenant, scope, patient string) string {
	t.Helper()
	now := time.Now()
	c := auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: auth.DevIssuer, Subject: "tester", IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		Tenant: tenant, Scope: scope, Patient: patient,
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(testKey)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// as sends r with token.
func (e *env) as(token string, r request) *response {
	e.t.Helper()
	r.Token = &token
	return e.do(r)
}

// authzInteraction is one FHIR interaction on Patient and the SMART
// permission letter it needs.
type authzInteraction struct {
	name string
	perm byte
	req  func(id string) request
}

func authzInteractions() []authzInteraction {
	patient := `{"resourceType":"Patient","name":[{"family":"Matrix"}]}`
	return []authzInteraction{
		{"read", 'r', func(id string) request { return request{Method: http.MethodGet, Path: "/Patient/" + id} }},
		{"vread", 'r', func(id string) request {
			return request{Method: http.MethodGet, Path: "/Patient/" + id + "/_history/1"}
		}},
		{"history-instance", 'r', func(id string) request { return request{Method: http.MethodGet, Path: "/Patient/" + id + "/_history"} }},
		{"search", 's', func(string) request { return request{Method: http.MethodGet, Path: "/Patient?family=Matrix"} }},
		{"search-post", 's', func(string) request {
			return request{Method: http.MethodPost, Path: "/Patient/_search", Body: "family=Matrix", Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
		}},
		{"history-type", 's', func(string) request { return request{Method: http.MethodGet, Path: "/Patient/_history"} }},
		{"create", 'c', func(string) request { return request{Method: http.MethodPost, Path: "/Patient", Body: patient} }},
		{"update", 'u', func(id string) request {
			return request{Method: http.MethodPut, Path: "/Patient/" + id, Body: `{"resourceType":"Patient","id":"` + id + `","name":[{"family":"Matrix"}],"active":true}`}
		}},
		{"patch", 'u', func(id string) request {
			return request{Method: http.MethodPatch, Path: "/Patient/" + id, Body: `[{"op":"add","path":"/active","value":false}]`, Header: map[string]string{"Content-Type": "application/json-patch+json"}}
		}},
		{"delete", 'd', func(id string) request { return request{Method: http.MethodDelete, Path: "/Patient/" + id} }},
		{"transaction-create", 'c', func(string) request {
			return request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"transaction","entry":[{"resource":` + patient + `,"request":{"method":"POST","url":"Patient"}}]}`}
		}},
		{"batch-delete", 'd', func(id string) request {
			return request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"DELETE","url":"Patient/` + id + `"}}]}`}
		}},
	}
}

// TestScopeMatrix runs every interaction under v1 and v2 scopes: each is
// allowed exactly when the scope grants its permission on Patient.
func TestScopeMatrix(t *testing.T) {
	e := newEnv(t)
	scopes := []struct {
		scope string
		perms string // what the scope grants on Patient
	}{
		{"user/Patient.read", "rs"},
		{"user/Patient.write", "cud"},
		{"user/Patient.*", "cruds"},
		{"system/*.read", "rs"},
		{"user/*.*", "cruds"},
		{"user/Patient.rs", "rs"},
		{"user/Patient.r", "r"},
		{"user/Patient.s", "s"},
		{"system/Patient.c", "c"},
		{"system/Patient.cu", "cu"},
		{"user/Patient.d", "d"},
		{"user/*.cruds", "cruds"},
		{"user/Observation.cruds", ""},
		{"openid fhirUser launch/patient", ""},
		{"user/Patient.sr", ""},             // v2 letters out of order: not a scope
		{"user/Patient.rs?active=true", ""}, // query-restricted scopes are not honoured
		{"", ""},
	}
	for i, sc := range scopes {
		// With -short (the race detector's run) every third scope: the
		// same handlers and checks, a third of the requests.
		if testing.Short() && i%3 != 0 {
			continue
		}
		tok := scopedToken(t, e.tenant, sc.scope, "")
		for _, in := range authzInteractions() {
			t.Run(fmt.Sprintf("%s/%s", sc.scope, in.name), func(t *testing.T) {
				id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Matrix"}]}`)
				before := e2eHistoryTotal(t, e, "/Patient/"+id+"/_history")
				r := e.as(tok, in.req(id))
				allowed := strings.IndexByte(sc.perms, in.perm) >= 0
				status := r.Status
				if strings.HasPrefix(in.name, "batch") && status == http.StatusOK {
					status = entryStatus(t, r)
				}
				switch {
				case allowed && status >= 300:
					t.Fatalf("scope %q should allow %s: %d %s", sc.scope, in.name, status, r.Body)
				case !allowed:
					if status != http.StatusForbidden {
						t.Fatalf("scope %q should deny %s with 403: %d %s", sc.scope, in.name, status, r.Body)
					}
					if strings.Contains(string(r.Body), "Matrix") {
						t.Fatalf("a denied %s returned data: %s", in.name, r.Body)
					}
					if after := e2eHistoryTotal(t, e, "/Patient/"+id+"/_history"); after != before {
						t.Fatalf("a denied %s changed the resource: %d versions, was %d", in.name, after, before)
					}
				}
			})
		}
	}
}

// entryStatus is the HTTP status of the first entry of a batch-response.
func entryStatus(t testing.TB, r *response) int {
	t.Helper()
	entries, _ := r.JSON(t)["entry"].([]any)
	if len(entries) == 0 {
		t.Fatalf("batch-response without entries: %s", r.Body)
	}
	line := entries[0].(map[string]any)["response"].(map[string]any)["status"].(string)
	var code int
	fmt.Sscanf(line, "%d", &code)
	return code
}

// TestTransactionScopeEscalation: a token that may create Patients cannot
// slip an Observation into a transaction; nothing of it is stored.
func TestTransactionScopeEscalation(t *testing.T) {
	e := newEnv(t)
	tok := scopedToken(t, e.tenant, "user/Patient.cruds", "")
	body := `{"resourceType":"Bundle","type":"transaction","entry":[
		{"fullUrl":"urn:uuid:9d1b4a6e-1f7a-4c53-9a57-0c3f1c2f7a11","resource":{"resourceType":"Patient","name":[{"family":"Escalate"}]},"request":{"method":"POST","url":"Patient"}},
		{"resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:9d1b4a6e-1f7a-4c53-9a57-0c3f1c2f7a11"}},"request":{"method":"POST","url":"Observation"}}]}`
	r := e.as(tok, request{Method: http.MethodPost, Path: "", Body: body})
	wantOutcome(t, r, http.StatusForbidden, "Bundle.entry[1]")
	if n := searchTotal(t, e, "/Patient?family=Escalate"); n != 0 {
		t.Fatalf("the denied transaction stored %d Patients", n)
	}
	// A transaction that updates into a type only readable is refused the same way.
	obs := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"y"}}`)
	tok = scopedToken(t, e.tenant, "user/Patient.cruds user/Observation.rs", "")
	body = `{"resourceType":"Bundle","type":"transaction","entry":[
		{"resource":{"resourceType":"Observation","id":"` + obs + `","status":"cancelled","code":{"text":"y"}},"request":{"method":"PUT","url":"Observation/` + obs + `"}}]}`
	wantOutcome(t, e.as(tok, request{Method: http.MethodPost, Path: "", Body: body}), http.StatusForbidden, "Bundle.entry[0]")
	if got := e.get("/Observation/" + obs).JSON(t)["status"]; got != "final" {
		t.Fatalf("the denied update changed the Observation: status %v", got)
	}
	// PUT to a new id is a create: update alone does not allow it.
	tok = scopedToken(t, e.tenant, "user/Patient.ru", "")
	r = e.as(tok, request{Method: http.MethodPut, Path: "/Patient/made-by-update", Body: `{"resourceType":"Patient","id":"made-by-update"}`})
	wantOutcome(t, r, http.StatusForbidden, "")
	if r := e.get("/Patient/made-by-update"); r.Status != http.StatusNotFound {
		t.Fatalf("update-as-create without create permission stored the Patient: %d", r.Status)
	}
}

// searchTotal is the total of a search made with the env's full token.
func searchTotal(t testing.TB, e *env, path string) int {
	t.Helper()
	r := e.get(path)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	n, _ := r.JSON(t)["total"].(interface{ Int64() (int64, error) })
	if n == nil {
		t.Fatalf("GET %s: no total: %s", path, r.Body)
	}
	v, _ := n.Int64()
	return int(v)
}

// compartmentFixture is two patients, each with data, and data linking both.
type compartmentFixture struct {
	a, b, practitioner string
	obsA, obsB         string // subject A / B, performer the practitioner
	encA               string
}

func newCompartmentFixture(e *env) compartmentFixture {
	f := compartmentFixture{
		a:            e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Alpha"}]}`),
		b:            e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Beta"}]}`),
		practitioner: e.create("Practitioner", `{"resourceType":"Practitioner","name":[{"family":"Doc"}]}`),
	}
	obs := func(p string) string {
		return e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"pulse"},"subject":{"reference":"Patient/`+p+`"},"performer":[{"reference":"Practitioner/`+f.practitioner+`"}]}`)
	}
	f.obsA, f.obsB = obs(f.a), obs(f.b)
	f.encA = e.create("Encounter", `{"resourceType":"Encounter","status":"finished","class":{"code":"HH"},"subject":{"reference":"Patient/`+f.a+`"}}`)
	return f
}

// ids are the resource ids of a Bundle's entries, by search mode
// ("" for every entry).
func ids(t testing.TB, r *response, mode string) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var out []string
	entries, _ := r.JSON(t)["entry"].([]any)
	for _, e := range entries {
		m := e.(map[string]any)
		if s, _ := m["search"].(map[string]any); mode != "" && (s == nil || s["mode"] != mode) {
			continue
		}
		if res, ok := m["resource"].(map[string]any); ok {
			out = append(out, res["resourceType"].(string)+"/"+res["id"].(string))
		}
	}
	return out
}

// wantIDs compares resource references in any order.
func wantIDs(t testing.TB, got []string, want ...string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestPatientScopeReads: a patient/ scope sees its patient's compartment
// and nothing of the other patient, whichever way it asks.
func TestPatientScopeReads(t *testing.T) {
	e := newEnv(t)
	f := newCompartmentFixture(e)
	for _, scope := range []string{"patient/*.read", "patient/*.rs", "patient/*.cruds"} {
		tok := scopedToken(t, e.tenant, scope, f.a)
		get := func(path string) *response { return e.as(tok, request{Method: http.MethodGet, Path: path}) }
		t.Run(scope, func(t *testing.T) {
			for _, ok := range []string{"/Patient/" + f.a, "/Observation/" + f.obsA, "/Encounter/" + f.encA, "/Practitioner/" + f.practitioner, "/Observation/" + f.obsA + "/_history/1", "/Observation/" + f.obsA + "/_history"} {
				if r := get(ok); r.Status != http.StatusOK {
					t.Fatalf("GET %s: %d %s", ok, r.Status, r.Body)
				}
			}
			for _, no := range []string{"/Patient/" + f.b, "/Observation/" + f.obsB, "/Observation/" + f.obsB + "/_history/1", "/Observation/" + f.obsB + "/_history", "/Patient/" + f.b + "/Observation", "/Patient/" + f.b + "/$everything"} {
				r := get(no)
				wantOutcome(t, r, http.StatusForbidden, "")
				if strings.Contains(string(r.Body), "Beta") || strings.Contains(string(r.Body), f.obsB) && !strings.Contains(string(r.Body), "not in the compartment") {
					t.Fatalf("GET %s leaked the other patient's data: %s", no, r.Body)
				}
			}
			wantIDs(t, ids(t, get("/Patient"), ""), "Patient/"+f.a)
			wantIDs(t, ids(t, get("/Patient?name=Beta"), ""))
			wantIDs(t, ids(t, get("/Observation?_sort=_id&_id="+f.obsA+","+f.obsB), ""), "Observation/"+f.obsA)
			wantIDs(t, ids(t, get("/Observation?subject=Patient/"+f.b), ""))
			wantIDs(t, ids(t, get("/Patient/"+f.a+"/Observation"), ""), "Observation/"+f.obsA)
			// _include / _revinclude never reach outside the compartment.
			wantIDs(t, ids(t, get("/Practitioner?_id="+f.practitioner+"&_revinclude=Observation:performer"), "include"), "Observation/"+f.obsA)
			wantIDs(t, ids(t, get("/Observation?_include=Observation:subject&_include=Observation:performer"), "include"), "Patient/"+f.a, "Practitioner/"+f.practitioner)
			wantOutcome(t, get("/Practitioner?_has:Observation:performer:subject=Patient/"+f.b), http.StatusForbidden, "_has")
			for _, h := range []string{"/Observation/_history", "/_history"} {
				for _, id := range ids(t, get(h), "") {
					if strings.HasSuffix(id, f.b) || strings.HasSuffix(id, f.obsB) {
						t.Fatalf("%s shows %s of the other patient", h, id)
					}
				}
			}
			all := ids(t, get("/Patient/"+f.a+"/$everything?_count=100"), "")
			for _, want := range []string{"Patient/" + f.a, "Observation/" + f.obsA, "Encounter/" + f.encA} {
				if !strings.Contains(strings.Join(all, ","), want) {
					t.Fatalf("$everything of the token's patient lacks %s: %v", want, all)
				}
			}
		})
	}
	// Without a patient claim a patient scope grants nothing.
	wantOutcome(t, e.as(scopedToken(t, e.tenant, "patient/*.read", ""), request{Method: http.MethodGet, Path: "/Patient/" + f.a}), http.StatusForbidden, "")
}

// TestPatientScopeWrites: a patient/ scope writes only inside its
// patient's compartment; every other write is 403 and changes nothing.
func TestPatientScopeWrites(t *testing.T) {
	e := newEnv(t)
	f := newCompartmentFixture(e)
	tok := scopedToken(t, e.tenant, "patient/*.cruds", f.a)
	obs := func(subject, status string) string {
		return `{"resourceType":"Observation","status":"` + status + `","code":{"text":"pulse"},"subject":{"reference":"Patient/` + subject + `"}}`
	}
	r := e.as(tok, request{Method: http.MethodPost, Path: "/Observation", Body: obs(f.a, "final")})
	if r.Status != http.StatusCreated {
		t.Fatalf("a write into the token's compartment: %d %s", r.Status, r.Body)
	}
	withID := func(id, subject, status string) string {
		return strings.Replace(obs(subject, status), `{"resourceType":"Observation",`, `{"resourceType":"Observation","id":"`+id+`",`, 1)
	}
	denied := []struct {
		name string
		req  request
	}{
		{"create for the other patient", request{Method: http.MethodPost, Path: "/Observation", Body: obs(f.b, "final")}},
		{"create without a subject", request{Method: http.MethodPost, Path: "/Observation", Body: `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`}},
		{"update of the other patient's resource", request{Method: http.MethodPut, Path: "/Observation/" + f.obsB, Body: withID(f.obsB, f.a, "amended")}},
		{"update moving a resource to the other patient", request{Method: http.MethodPut, Path: "/Observation/" + f.obsA, Body: withID(f.obsA, f.b, "amended")}},
		{"patch moving a resource to the other patient", request{Method: http.MethodPatch, Path: "/Observation/" + f.obsA, Body: `[{"op":"replace","path":"/subject/reference","value":"Patient/` + f.b + `"}]`, Header: map[string]string{"Content-Type": "application/json-patch+json"}}},
		{"delete of the other patient's resource", request{Method: http.MethodDelete, Path: "/Observation/" + f.obsB}},
		{"delete of the other patient", request{Method: http.MethodDelete, Path: "/Patient/" + f.b}},
		{"create of a new patient", request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Gamma"}]}`}},
		{"create outside the compartment types", request{Method: http.MethodPost, Path: "/Practitioner", Body: `{"resourceType":"Practitioner"}`}},
		{"conditional create", request{Method: http.MethodPost, Path: "/Observation", Body: obs(f.a, "final"), Header: map[string]string{"If-None-Exist": "code=pulse"}}},
		{"conditional delete", request{Method: http.MethodDelete, Path: "/Observation?code=pulse"}},
		{"transaction touching both patients", request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"transaction","entry":[
			{"resource":` + obs(f.a, "preliminary") + `,"request":{"method":"POST","url":"Observation"}},
			{"resource":` + obs(f.b, "preliminary") + `,"request":{"method":"POST","url":"Observation"}}]}`}},
	}
	before := searchTotal(t, e, "/Observation?_summary=count")
	for _, d := range denied {
		t.Run(d.name, func(t *testing.T) {
			wantOutcome(t, e.as(tok, d.req), http.StatusForbidden, "")
		})
	}
	if after := searchTotal(t, e, "/Observation?_summary=count"); after != before {
		t.Fatalf("denied writes changed the Observations: %d, was %d", after, before)
	}
	for _, id := range []string{f.obsA, f.obsB} {
		if n := e2eHistoryTotal(t, e, "/Observation/"+id+"/_history"); n != 1 {
			t.Fatalf("Observation/%s has %d versions after denied writes", id, n)
		}
	}
	if n := searchTotal(t, e, "/Observation?status=preliminary"); n != 0 {
		t.Fatalf("the denied transaction stored %d Observations", n)
	}
	// The token's patient may update itself.
	r = e.as(tok, request{Method: http.MethodPut, Path: "/Patient/" + f.a, Body: `{"resourceType":"Patient","id":"` + f.a + `","name":[{"family":"Alpha"}],"active":true}`})
	if r.Status != http.StatusOK {
		t.Fatalf("the token's patient updating itself: %d %s", r.Status, r.Body)
	}
}

// newRESTEnv is an env with the REST interface mounted.
func newRESTEnv(t *testing.T) *env {
	t.Helper()
	mount := &injMount{}
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.REST = mount })
	mount.h = injREST(e.store)
	return e
}

// TestRESTScopes: REST endpoints need user or system access to every FHIR
// type they project; patient-restricted tokens are refused.
func TestRESTScopes(t *testing.T) {
	e := newRESTEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Rest"}]}`)
	cases := []struct {
		scope, patient string
		req            request
		want           int
	}{
		{"user/*.rs", "", request{Method: http.MethodGet, Path: "/api/v1/patients/" + id}, http.StatusOK},
		{"user/Patient.rs", "", request{Method: http.MethodGet, Path: "/api/v1/patients/" + id}, http.StatusForbidden},
		{"user/Patient.rs user/Coverage.s user/Organization.s", "", request{Method: http.MethodGet, Path: "/api/v1/patients/" + id}, http.StatusOK},
		{"user/*.rs", "", request{Method: http.MethodPut, Path: "/api/v1/patients/" + id, Body: `{"lastName":"Changed"}`}, http.StatusForbidden},
		{"patient/*.cruds", id, request{Method: http.MethodGet, Path: "/api/v1/patients/" + id}, http.StatusForbidden},
		{"user/*.cruds", "", request{Method: http.MethodPut, Path: "/api/v1/patients/" + id, Body: `{"lastName":"Changed"}`}, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.scope+" "+c.req.Method, func(t *testing.T) {
			c.req.Header = map[string]string{"Content-Type": "application/json"}
			r := e.as(scopedToken(t, e.tenant, c.scope, c.patient), c.req)
			if r.Status != c.want {
				t.Fatalf("status %d, want %d: %s", r.Status, c.want, r.Body)
			}
			if c.want == http.StatusForbidden && !strings.Contains(string(r.Body), `"forbidden"`) {
				t.Fatalf("403 without the REST error body: %s", r.Body)
			}
		})
	}
}
