package server_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/restadapter"
	"fhirstore/server"
	"fhirstore/store"
)

// injMount is the REST handler of an env, made once the env's store is open.
type injMount struct{ h http.Handler }

func (m *injMount) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.h.ServeHTTP(w, r) }

// injREST is the REST interface on st, for the caller's tenant.
func injREST(st *store.Store) http.Handler {
	return restadapter.New(restadapter.Config{TenantOf: func(ctx context.Context) (string, bool) {
		c, ok := server.CallerFrom(ctx)
		return c.Tenant, ok
	}, Store: st, Registry: db.Registry(), Allows: server.Allows})
}

// injEnv is an env with the REST interface mounted, and a second tenant B
// whose name starts with A's, so A's database name is a prefix of B's.
// Both hold Patient/alpha; everything B holds is marked BSecret, a word no
// request names (ids and criteria are echoed in diagnostics and links).
type injEnv struct {
	*env
	b, tokB string
}

func newInjEnv(t *testing.T) *injEnv {
	t.Helper()
	mount := &injMount{}
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.REST = mount })
	mount.h = injREST(e.store)
	ie := &injEnv{env: e, b: e.tenant + "-b"}
	if err := e.store.CreateTenant(context.Background(), ie.b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.DeleteTenant(context.Background(), ie.b) })
	ie.tokB = signToken(t, ie.b, time.Hour)

	const mrn = `"identifier":[{"system":"http://example.org/mrn","value":"A-1"}]`
	type put struct{ path, body string }
	for _, p := range []put{
		{"/Patient/alpha", `{"resourceType":"Patient","id":"alpha",` + mrn + `,"name":[{"family":"Alpha"}]}`},
		{"/Patient/dollar", `{"resourceType":"Patient","id":"dollar","name":[{"family":"$ne"}]}`},
		{"/Patient/meta", `{"resourceType":"Patient","id":"meta","name":[{"family":"(a+)+$"}]}`},
		{"/Patient/bait", `{"resourceType":"Patient","id":"bait","name":[{"family":"` + strings.Repeat("a", 40) + `!"}]}`},
		{"/Organization/org", `{"resourceType":"Organization","id":"org","name":"Agency A"}`},
	} {
		e2eWantStatus(t, e.put(p.path, p.body), http.StatusCreated)
	}
	for _, p := range []put{
		{"/Patient/alpha", `{"resourceType":"Patient","id":"alpha",` + mrn + `,"name":[{"family":"Alpha","given":["BSecret"]}]}`},
		{"/Patient/only-b", `{"resourceType":"Patient","id":"only-b","name":[{"family":"Zebra","given":["BSecret"]}]}`},
		{"/Organization/org-b", `{"resourceType":"Organization","id":"org-b","name":"BSecret Agency"}`},
	} {
		e2eWantStatus(t, ie.asB(http.MethodPut, p.path, p.body), http.StatusCreated)
	}
	return ie
}

// asB sends a request to tenant B with B's token.
func (ie *injEnv) asB(method, path, body string) *response {
	return ie.do(request{Method: method, Path: path, Body: body, Host: ie.b + ".localhost", Token: &ie.tokB})
}

// injNoLeak fails when an answer in tenant A shows anything of tenant B.
func injNoLeak(t *testing.T, r *response) {
	t.Helper()
	if strings.Contains(string(r.Body), "BSecret") {
		t.Fatalf("the answer shows tenant B's data: %s", r.Body)
	}
}

// injIDs are the sorted ids of the matches of a searchset Bundle.
func injIDs(t *testing.T, r *response) []string {
	t.Helper()
	ids := []string{}
	entries, _ := r.JSON(t)["entry"].([]any)
	for _, en := range entries {
		en := en.(map[string]any)
		if s, _ := en["search"].(map[string]any); s["mode"] != "match" {
			continue
		}
		ids = append(ids, en["resource"].(map[string]any)["id"].(string))
	}
	slices.Sort(ids)
	return ids
}

// injBound is how long one request may take: a regular expression that
// backtracks would take far longer on the bait.
const injBound = 5 * time.Second

// TestInjectionSearchValuesAreData: search parameter names and values are
// matched as text, never read as query operators or regular expressions,
// and a search in tenant A never shows tenant B's resources.
func TestInjectionSearchValuesAreData(t *testing.T) {
	e := newInjEnv(t)
	all := []string{"alpha", "bait", "dollar", "meta"}
	none := []string{}
	strict := map[string]string{"Prefer": "handling=strict"}
	cases := []struct {
		name   string
		query  string
		header map[string]string
		status int
		ids    []string
		expr   string
	}{
		// Values that look like operators.
		{"a value starting with $ is a prefix of names", "name=$ne", nil, 200, []string{"dollar"}, ""},
		{"$regex as a value matches no name", "name=$regex", nil, 200, none, ""},
		{"$where as a value matches no name", "name=%24where", nil, 200, none, ""},
		{"an escaped \\$ is a literal dollar", "name=%5C$ne", nil, 200, []string{"dollar"}, ""},
		{"a JSON operator object is text", "name=" + url.QueryEscape(`{"$ne":null}`), nil, 200, none, ""},
		{"a JSON operator object is text for :exact too", "name:exact=" + url.QueryEscape(`{"$ne":null}`), nil, 200, none, ""},
		{"a JSON operator object is text for _id", "_id=" + url.QueryEscape(`{"$ne":"x"}`), nil, 200, none, ""},
		{"$ne as an id matches no resource", "_id=$ne", nil, 200, none, ""},
		{"a NUL in a value matches no name", "name=a%00", nil, 200, none, ""},
		// Bytes that are not UTF-8 cannot match stored text: refused.
		{"invalid UTF-8 in a string value is refused", "name=%FF%FE", nil, 400, nil, "name"},
		{"invalid UTF-8 in a token value is refused", "identifier=" + url.QueryEscape("http://example.org/mrn|\xc3\x28"), nil, 400, nil, "identifier"},
		{"invalid UTF-8 in a reference value is refused", "general-practitioner=Practitioner/%C3%28", nil, 400, nil, "general-practitioner"},
		{"invalid UTF-8 in a uri value is refused", "_profile=http://x/%E2%82", nil, 400, nil, "_profile"},
		{"invalid UTF-8 in a parameter name is refused", "na%FFme=x", nil, 400, nil, ""},
		// Operators in parameter names: unknown parameters, ignored by
		// default (so every Patient of A, none of B), refused when strict.
		{"name[$ne] is an unknown parameter, ignored", "name[$ne]=Alpha", nil, 200, all, ""},
		{"identifier[$gt] is an unknown parameter, ignored", "identifier[$gt]=", nil, 200, all, ""},
		{"_id[$ne] is an unknown parameter, ignored", "_id[$ne]=alpha", nil, 200, all, ""},
		{"name[$regex] is an unknown parameter, ignored", "name[$regex]=.*", nil, 200, all, ""},
		{"$where as a parameter is unknown, ignored", "$where=1", nil, 200, all, ""},
		{"name[$ne] is refused under handling=strict", "name[$ne]=Alpha", strict, 400, nil, "name[$ne]"},
		{"identifier[$gt] is refused under handling=strict", "identifier[$gt]=", strict, 400, nil, "identifier[$gt]"},
		{"_id[$ne] is refused under handling=strict", "_id[$ne]=alpha", strict, 400, nil, "_id[$ne]"},
		{"$where is refused under handling=strict", "$where=1", strict, 400, nil, "$where"},
		{"name:$regex is not a modifier", "name:$regex=.*", nil, 400, nil, "name:$regex"},
		// Regular expression metacharacters are literal text.
		{".* is a literal prefix", "name=.*", nil, 200, none, ""},
		{"a catastrophic pattern is a literal prefix", "name=" + url.QueryEscape("(a+)+$"), nil, 200, []string{"meta"}, ""},
		{"a catastrophic pattern does not run on the bait", "name=" + url.QueryEscape("(a+)+b"), nil, 200, none, ""},
		{"a nested quantifier does not run on the bait", "name=" + url.QueryEscape("(a|aa)*!"), nil, 200, none, ""},
		{"^ is literal", "name=%5Ealpha", nil, 200, none, ""},
		{":contains with .* is literal", "name:contains=.*", nil, 200, none, ""},
		{":contains with a quantifier matches it literally", "name:contains=" + url.QueryEscape("+)+"), nil, 200, []string{"meta"}, ""},
		{":contains with $ matches the names holding a dollar", "name:contains=$", nil, 200, []string{"dollar", "meta"}, ""},
		{":contains with a backtracking pattern does not run on the bait", "name:contains=" + url.QueryEscape("(a*)*!"), nil, 200, none, ""},
		{":contains with a character class is literal", "name:contains=" + url.QueryEscape("[a-z]"), nil, 200, none, ""},
		{"comma-separated literal values are ORed", "name=" + url.QueryEscape("$ne,(a+"), nil, 200, []string{"dollar", "meta"}, ""},
		// Tokens and references.
		{"a token with system|$where is text", "identifier=" + url.QueryEscape("system|$where"), nil, 200, none, ""},
		{"a token code $ne is text", "identifier=" + url.QueryEscape("http://example.org/mrn|$ne"), nil, 200, none, ""},
		{"a token matches A's resource only", "identifier=" + url.QueryEscape("http://example.org/mrn|A-1"), nil, 200, []string{"alpha"}, ""},
		{"a reference to Practitioner/$x is text", "general-practitioner=" + url.QueryEscape("Practitioner/$x"), nil, 200, none, ""},
		{"a reference to Patient/$ne is text", "link=" + url.QueryEscape("Patient/$ne"), nil, 200, none, ""},
		{"a type modifier that is not a type is refused", "general-practitioner:$where=x", nil, 400, nil, "general-practitioner:$where"},
		{"a chain through an operator type is refused", "general-practitioner:$where.name=x", nil, 400, nil, ""},
		{"_has with an operator value is text", "_has:Observation:subject:code=$ne", nil, 200, none, ""},
		// Result parameters.
		{"_sort by an operator is refused", "_sort=$natural", nil, 400, nil, "_sort"},
		{"_count as an operator is refused", "_count=" + url.QueryEscape(`{"$gt":0}`), nil, 400, nil, "_count"},
		{":missing with an operator is refused", "name:missing=$ne", nil, 400, nil, "name:missing"},
		// Tenant isolation by id.
		{"_id of B's resource matches nothing in A", "_id=only-b", nil, 200, none, ""},
		{"_id shared by A and B matches A's only", "_id=alpha", nil, 200, []string{"alpha"}, ""},
		{"a name only B holds matches nothing in A", "name=Zebra", nil, 200, none, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []request{
				{Method: http.MethodGet, Path: "/Patient?" + tc.query, Header: tc.header},
				{Method: http.MethodPost, Path: "/Patient/_search", Body: tc.query, Header: injForm(tc.header)},
			} {
				start := time.Now()
				r := e.do(req)
				if took := time.Since(start); took > injBound {
					t.Fatalf("%s %s took %v", req.Method, req.Path, took)
				}
				injNoLeak(t, r)
				if tc.status != http.StatusOK {
					wantOutcome(t, r, tc.status, tc.expr)
					continue
				}
				e2eWantStatus(t, r, http.StatusOK)
				if got := injIDs(t, r); !slices.Equal(got, tc.ids) {
					t.Fatalf("%s %s %s: matches %v, want %v", req.Method, req.Path, req.Body, got, tc.ids)
				}
			}
		})
	}

	t.Run("a forged paging cursor carrying an operator is refused", func(t *testing.T) {
		// The cursor is opaque, but it comes from the client: an operator
		// in it would be one in the query.
		for _, v := range []any{bson.D{{Key: "$exists", Value: true}}, bson.Regex{Pattern: ".*"}} {
			raw, err := bson.Marshal(bson.D{{Key: "v", Value: bson.A{v}}, {Key: "i", Value: "0"}})
			if err != nil {
				t.Fatal(err)
			}
			r := e.get("/Patient?_count=2&_cursor=" + base64.RawURLEncoding.EncodeToString(raw))
			injNoLeak(t, r)
			e2eKnownBug(t, r.Status != http.StatusBadRequest,
				"store/search.go decodeSearchCursor accepts any BSON value in a cursor; %v is used as an operator (%d %s)", v, r.Status, r.Body)
			wantOutcome(t, r, http.StatusBadRequest, "_cursor")
		}
	})

	t.Run("conditional writes with operator criteria are refused and change nothing", func(t *testing.T) {
		before := e2eHistoryTotal(t, e.env, "/_history")
		for _, req := range []request{
			{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Cond"}]}`, Header: map[string]string{"If-None-Exist": "name[$ne]=x"}},
			{Method: http.MethodPut, Path: "/Patient?_id[$ne]=x", Body: `{"resourceType":"Patient","name":[{"family":"Cond"}]}`},
			{Method: http.MethodDelete, Path: "/Patient?name[$ne]=x"},
			{Method: http.MethodDelete, Path: "/Patient?$where=1"},
		} {
			r := e.do(req)
			wantOutcome(t, r, http.StatusBadRequest, "")
			injNoLeak(t, r)
		}
		if after := e2eHistoryTotal(t, e.env, "/_history"); after != before {
			t.Fatalf("the history grew from %d to %d versions", before, after)
		}
	})
}

// injForm is header plus the form Content-Type of POST _search.
func injForm(header map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, v := range header {
		h[k] = v
	}
	return h
}

// TestInjectionIDsAreData: ids in FHIR paths are matched exactly; dots,
// slashes, NULs and operators reach no other resource, and nothing of
// tenant B, whatever its ids.
func TestInjectionIDsAreData(t *testing.T) {
	e := newInjEnv(t)
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"an id that is an operator is not found", "GET", "/Patient/$ne", "", 404},
		{"an id with a dot is not found", "GET", "/Patient/alpha.x", "", 404},
		{"an id of two dots is not found", "GET", "/Patient/..", "", 404},
		{"an id of encoded dots is not found", "GET", "/Patient/%2e%2e", "", 404},
		{"an encoded slash does not climb", "GET", "/Patient/..%2f..", "", 404},
		{"encoded dot segments do not climb", "GET", "/Patient/%2e%2e/%2e%2e/Patient/alpha", "", 404},
		{"an encoded slash does not reach another type", "GET", "/Patient/x%2f..%2fOrganization%2forg", "", 404},
		{"an id with a NUL is not found", "GET", "/Patient/alpha%00", "", 404},
		{"an id that is a NUL is not found", "GET", "/Patient/%00", "", 404},
		{"an id of 65 characters is not found", "GET", "/Patient/" + strings.Repeat("a", 65), "", 404},
		{"an id of 8000 characters is not found", "GET", "/Patient/" + strings.Repeat("a", 8000), "", 404},
		{"an operator version is not found", "GET", "/Patient/alpha/_history/$ne", "", 404},
		{"a version with a NUL is not found", "GET", "/Patient/alpha/_history/1%00", "", 404},
		{"history of an operator id is not found", "GET", "/Patient/$ne/_history", "", 404},
		{"B's resource is not found through A", "GET", "/Patient/only-b", "", 404},
		{"B's resource is not found through A's history", "GET", "/Patient/only-b/_history/1", "", 404},
		{"an update of an operator id is refused", "PUT", "/Patient/$ne", `{"resourceType":"Patient","id":"$ne"}`, 400},
		{"an update of an id with a NUL is refused", "PUT", "/Patient/a%00b", `{"resourceType":"Patient","id":"a\u0000b"}`, 400},
		{"an update of an encoded slash id is a compartment path (405)", "PUT", "/Patient/a%2fb", `{"resourceType":"Patient","id":"a/b"}`, 405},
		{"a delete of an operator id is refused", "DELETE", "/Patient/$ne", "", 400},
		{"a patch of an operator id is refused", "PATCH", "/Patient/$ne", `[{"op":"replace","path":"/active","value":true}]`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e2eHistoryTotal(t, e.env, "/_history")
			req := request{Method: tc.method, Path: tc.path, Body: tc.body}
			if tc.method == http.MethodPatch {
				req.Header = map[string]string{"Content-Type": "application/json-patch+json"}
			}
			start := time.Now()
			r := e.do(req)
			if took := time.Since(start); took > injBound {
				t.Fatalf("took %v", took)
			}
			injNoLeak(t, r)
			wantOutcome(t, r, tc.status, "")
			if after := e2eHistoryTotal(t, e.env, "/_history"); after != before {
				t.Fatalf("the history grew from %d to %d versions", before, after)
			}
		})
	}

	t.Run("a delete through A of B's id leaves B's resource", func(t *testing.T) {
		r := e.do(request{Method: http.MethodDelete, Path: "/Patient/only-b"})
		injNoLeak(t, r)
		if r.Status >= 300 && r.Status != http.StatusNotFound {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if got := e2eFamily(t, e.asB(http.MethodGet, "/Patient/only-b", "")); got != "Zebra" {
			t.Fatalf("B's Patient/only-b after A's delete: family %q", got)
		}
	})
}

// TestInjectionTenantHostsAreLabels: a tenant is the exact first host label
// under the base domain; tenant B's name starts with A's, and neither one's
// token, host tricks or name reach the other's data.
func TestInjectionTenantHostsAreLabels(t *testing.T) {
	e := newInjEnv(t)
	a, b := e.tenant, e.b
	dbName := db.Options().DatabasePrefix + b // what B is called in the database
	cases := []struct {
		name, host, tokenFor string
		status               int
		fromB                bool
	}{
		{"A's host serves A", a + ".localhost", a, 200, false},
		{"B's host serves B", b + ".localhost", b, 200, true},
		{"A's host in upper case serves A", strings.ToUpper(a) + ".LOCALHOST", a, 200, false},
		{"B's host in upper case serves B", strings.ToUpper(b) + ".localhost", b, 200, true},
		{"A's token on B's host is 403", b + ".localhost", a, 403, false},
		{"B's token on A's host is 403", a + ".localhost", b, 403, false},
		{"B's token on A's host in upper case is 403", strings.ToUpper(a) + ".localhost", b, 403, false},
		{"a dot inside the label is two labels (404)", a + ".b.localhost", b, 404, false},
		{"two dots after the label are 404", a + "..localhost", a, 404, false},
		{"two dots as the label are 404", "..localhost", a, 404, false},
		{"a percent-encoded NUL in the label is 404", a + "%00-b.localhost", b, 404, false},
		{"an underscore for B's hyphen is 404", a + "_b.localhost", b, 404, false},
		{"B's database name as a label is 404", dbName + ".localhost", b, 404, false},
		{"A's database name as a label is 404", db.Options().DatabasePrefix + a + ".localhost", a, 404, false},
		{"A's label with a $ suffix is 404", a + "$.localhost", a, 404, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := signToken(t, tc.tokenFor, time.Hour)
			for _, path := range []string{"/Patient/alpha", "/Patient?name=Alpha", "/_history"} {
				r := e.do(request{Method: http.MethodGet, Path: path, Host: tc.host, Token: &tok})
				if tc.status != http.StatusOK {
					wantOutcome(t, r, tc.status, "")
				}
				e2eWantStatus(t, r, tc.status)
				if got := strings.Contains(string(r.Body), "BSecret"); got != tc.fromB {
					t.Fatalf("GET %s on %q: shows B's data %v, want %v: %s", path, tc.host, got, tc.fromB, r.Body)
				}
			}
		})
	}
}

// TestInjectionRESTFieldsAreData: ids, query parameters and JSON fields of
// the REST interface are values, never operators, and reach only the
// caller's tenant.
func TestInjectionRESTFieldsAreData(t *testing.T) {
	e := newInjEnv(t)
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"a patient id that is an operator is not found", "GET", "/api/v1/patients/$ne", "", 404},
		{"an encoded slash in a patient id does not climb", "GET", "/api/v1/patients/..%2f..", "", 404},
		{"a patient id of encoded dots is not found", "GET", "/api/v1/patients/%2e%2e", "", 404},
		{"a patient id with a NUL is not found", "GET", "/api/v1/patients/alpha%00", "", 404},
		{"a patient id of 8000 characters is not found", "GET", "/api/v1/patients/" + strings.Repeat("a", 8000), "", 404},
		{"B's patient is not found through A", "GET", "/api/v1/patients/only-b", "", 404},
		{"an operator object as a field value is 400", "PUT", "/api/v1/patients/alpha", `{"firstName":{"$ne":1}}`, 400},
		{"an operator as a field name is 400", "PUT", "/api/v1/patients/alpha", `{"$set":{"firstName":"x"}}`, 400},
		{"an operator beside a real field is 400", "PUT", "/api/v1/patients/alpha", `{"firstName":"x","$where":"1"}`, 400},
		{"an operator object in a nested field is 400", "PUT", "/api/v1/patients/alpha", `{"address":{"city":{"$gt":""}}}`, 400},
		{"an operator array as a field value is 400", "PUT", "/api/v1/patients/alpha", `{"lastName":["$ne"]}`, 400},
		{"an update of an operator id is not found", "PUT", "/api/v1/patients/$ne", `{"firstName":"x"}`, 404},
		{"an update of B's patient through A is not found", "PUT", "/api/v1/patients/only-b", `{"firstName":"Intruder"}`, 404},
		{"limit=$gt is 400", "GET", "/api/v1/agencies/org/clinicians?limit=$gt", "", 400},
		{"limit as an operator object is 400", "GET", "/api/v1/agencies/org/clinicians?limit=" + url.QueryEscape(`{"$gt":0}`), "", 400},
		{"page=$ne is 400", "GET", "/api/v1/agencies/org/clinicians?page=$ne", "", 400},
		{"limit[$gt] is an unknown parameter, ignored", "GET", "/api/v1/agencies/org/clinicians?limit[$gt]=1", "", 200},
		{"an agency id that is an operator is not found", "GET", "/api/v1/agencies/$ne/clinicians", "", 404},
		{"a comma in an agency id is not an OR", "GET", "/api/v1/agencies/org,org-b/clinicians", "", 404},
		{"B's agency is not found through A", "GET", "/api/v1/agencies/org-b/clinicians", "", 404},
		{"a clinician id that is an operator is not found", "GET", "/api/v1/clinicians/$ne/visits", "", 404},
		{"a document id that is an operator is not found", "GET", "/api/v1/documents/$where", "", 404},
		{"a visit id that is an operator is not found", "POST", "/api/v1/visits/$ne/complete", `{}`, 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e2eHistoryTotal(t, e.env, "/_history")
			req := request{Method: tc.method, Path: tc.path, Body: tc.body}
			if tc.body != "" {
				req.Header = map[string]string{"Content-Type": "application/json"}
			}
			r := e.do(req)
			injNoLeak(t, r)
			e2eWantStatus(t, r, tc.status)
			if tc.status != http.StatusOK {
				if msg, _ := r.JSON(t)["error"].(map[string]any)["message"].(string); msg == "" {
					t.Fatalf("no REST error message: %s", r.Body)
				}
			}
			if after := e2eHistoryTotal(t, e.env, "/_history"); after != before {
				t.Fatalf("the history grew from %d to %d versions", before, after)
			}
		})
	}
	if got := e2eFamily(t, e.asB(http.MethodGet, "/Patient/only-b", "")); got != "Zebra" {
		t.Fatalf("B's Patient/only-b: family %q", got)
	}

	t.Run("operator text in a field is stored as text", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPut, Path: "/api/v1/patients/alpha", Body: `{"firstName":"$where"}`,
			Header: map[string]string{"Content-Type": "application/json"}})
		e2eWantStatus(t, r, http.StatusOK)
		if got := r.JSON(t)["firstName"]; got != "$where" {
			t.Fatalf("firstName %v, want $where", got)
		}
		if ids := injIDs(t, e.get("/Patient?given:exact=$where")); !slices.Equal(ids, []string{"alpha"}) {
			t.Fatalf("given:exact=$where matches %v", ids)
		}
	})
}
