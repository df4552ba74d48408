package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"fhirstore/server"
	"fhirstore/store"
)

// e2eSeed stores Patient/seed in e's tenant and returns a function that
// fails the test when the tenant's data changed since: the system history
// total and the patient's bytes.
func e2eSeed(t *testing.T, e *env) (unchanged func(t *testing.T)) {
	t.Helper()
	r := e.put("/Patient/seed", `{"resourceType":"Patient","id":"seed","active":true,"name":[{"family":"Seed"}]}`)
	e2eWantStatus(t, r, http.StatusCreated)
	seed := r.Body
	total := e2eHistoryTotal(t, e, "/_history")
	return func(t *testing.T) {
		t.Helper()
		if n := e2eHistoryTotal(t, e, "/_history"); n != total {
			t.Fatalf("system history has %d versions, want %d: the request changed stored data", n, total)
		}
		if r := e.get("/Patient/seed"); r.Status != http.StatusOK || !bytes.Equal(r.Body, seed) {
			t.Fatalf("Patient/seed changed: %d %s", r.Status, r.Body)
		}
	}
}

// e2eNested builds a Patient whose extensions nest levels deep, ending in
// innermost; each level adds two JSON levels (array and object).
func e2eNested(levels int, innermost string) string {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Patient","id":"seed"`)
	for range levels {
		b.WriteString(`,"extension":[{"url":"http://example.org/x"`)
	}
	b.WriteString("," + innermost)
	for range levels {
		b.WriteString("}]")
	}
	b.WriteString("}")
	return b.String()
}

// TestInvalidRequestsAreOperationOutcomesAndChangeNothing: every rejected
// request answers an OperationOutcome with the right status and leaves the
// stored data as it was.
func TestInvalidRequestsAreOperationOutcomesAndChangeNothing(t *testing.T) {
	e := newEnv(t)
	unchanged := e2eSeed(t, e)
	long := strings.Repeat("a", 65)
	cases := []struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		status       int
		expr         string
	}{
		// Not JSON, or not a JSON object.
		{"malformed JSON on create is 400", "POST", "/Patient", `{"resourceType":"Patient",`, nil, 400, ""},
		{"malformed JSON on update is 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":"seed"`, nil, 400, ""},
		{"a trailing comma is 400", "POST", "/Patient", `{"resourceType":"Patient","active":true,}`, nil, 400, ""},
		{"data after the object is 400", "POST", "/Patient", `{"resourceType":"Patient"} {"resourceType":"Patient"}`, nil, 400, ""},
		{"a JSON array body is 400", "POST", "/Patient", `[{"resourceType":"Patient"}]`, nil, 400, ""},
		{"a JSON string body is 400", "POST", "/Patient", `"Patient"`, nil, 400, ""},
		{"a JSON number body is 400", "POST", "/Patient", `42`, nil, 400, ""},
		{"a JSON null body is 400", "PUT", "/Patient/seed", `null`, nil, 400, ""},
		{"an empty body on create is 400", "POST", "/Patient", ``, nil, 400, ""},
		{"an empty body on update is 400", "PUT", "/Patient/seed", ``, nil, 400, ""},
		{"a blank body is 400", "POST", "/Patient", " \n\t ", nil, 400, ""},
		// Not the resource the endpoint takes.
		{"a resourceType other than the endpoint's on create is 400", "POST", "/Patient", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`, nil, 400, "resourceType"},
		{"a resourceType other than the endpoint's on update is 400", "PUT", "/Patient/seed", `{"resourceType":"Observation","id":"seed","status":"final","code":{"text":"x"}}`, nil, 400, "resourceType"},
		{"a missing resourceType is 400", "POST", "/Patient", `{"active":true}`, nil, 400, ""},
		{"a resourceType that is not a string is 400", "POST", "/Patient", `{"resourceType":["Patient"]}`, nil, 400, ""},
		{"a resourceType in another case is 400", "POST", "/Patient", `{"resourceType":"patient"}`, nil, 400, "resourceType"},
		{"a body id other than the URL id on update is 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":"other","active":false}`, nil, 400, "Patient.id"},
		{"an update without id in the body is 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","active":false}`, nil, 400, "Patient.id"},
		{"an update whose body id is not a string is 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":7}`, nil, 400, "Patient.id"},
		{"an update with an invalid URL id is 400", "PUT", "/Patient/bad_id!", `{"resourceType":"Patient","id":"bad_id!"}`, nil, 400, ""},
		{"an update with a 65-character URL id is 400", "PUT", "/Patient/" + long, `{"resourceType":"Patient","id":"` + long + `"}`, nil, 400, ""},
		{"meta that is not an object is 422", "POST", "/Patient", `{"resourceType":"Patient","meta":"v1"}`, nil, 422, "Patient.meta"},
		// JSON the store cannot keep faithfully.
		{"duplicate keys are 400", "POST", "/Patient", `{"resourceType":"Patient","active":true,"active":false}`, nil, 400, ""},
		{"a duplicate resourceType is 400", "POST", "/Patient", `{"resourceType":"Patient","resourceType":"Observation"}`, nil, 400, ""},
		{"nested duplicate keys are 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":"seed","name":[{"family":"A","family":"B"}]}`, nil, 400, "Patient.name[0].family"},
		{"a key starting with $ is 400", "POST", "/Patient", `{"resourceType":"Patient","$where":"1"}`, nil, 400, ""},
		{"a nested key starting with $ is 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":"seed","name":[{"$gt":""}]}`, nil, 400, "Patient.name[0]"},
		{"a key containing a dot is 400", "POST", "/Patient", `{"resourceType":"Patient","a.b":1}`, nil, 400, ""},
		{"a key containing brackets is 400", "POST", "/Patient", `{"resourceType":"Patient","a":[1.50],"a[0]":7}`, nil, 400, ""},
		{"an empty key is 400", "POST", "/Patient", `{"resourceType":"Patient","":1}`, nil, 400, ""},
		{"JSON nested deeper than 100 levels is 400", "PUT", "/Patient/seed", e2eNested(49, `"valueCodeableConcept":{"coding":[{"code":"x"}]}`), nil, 400, "Patient.extension"},
		{"invalid UTF-8 is 400", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":"seed","name":[{"family":"` + "\xff\xfe" + `"}]}`, nil, 400, ""},
		{"an invalid UTF-8 key is 400", "POST", "/Patient", `{"resourceType":"Patient","` + "\xc3" + `":1}`, nil, 400, ""},
		// Unknown endpoints and methods.
		{"create of an unknown type is 404", "POST", "/Patients", `{"resourceType":"Patients"}`, nil, 404, ""},
		{"update of an unknown type is 404", "PUT", "/Foo/seed", `{"resourceType":"Foo","id":"seed"}`, nil, 404, ""},
		{"read of an unknown type is 404", "GET", "/Foo/seed", "", nil, 404, ""},
		{"a type name in lower case is unknown (404)", "GET", "/patient/seed", "", nil, 404, ""},
		{"a data type is not a resource type (404)", "POST", "/HumanName", `{"resourceType":"HumanName"}`, nil, 404, ""},
		{"PATCH with a FHIR body is 415", "PATCH", "/Patient/seed", `{"resourceType":"Patient","id":"seed","active":false}`, nil, 415, ""},
		{"PATCH with a broken JSON Patch is 400", "PATCH", "/Patient/seed", `[{"op":"frobnicate","path":"/active"}]`, map[string]string{"Content-Type": "application/json-patch+json"}, 400, ""},
		{"PATCH changing the id is 400", "PATCH", "/Patient/seed", `[{"op":"replace","path":"/id","value":"other"}]`, map[string]string{"Content-Type": "application/json-patch+json"}, 400, "Patient.id"},
		{"PATCH to an invalid resource is 422", "PATCH", "/Patient/seed", `[{"op":"add","path":"/gender","value":"yes"}]`, map[string]string{"Content-Type": "application/json-patch+json"}, 422, "Patient.gender"},
		{"PATCH whose test fails is 422", "PATCH", "/Patient/seed", `[{"op":"test","path":"/id","value":"x"}]`, map[string]string{"Content-Type": "application/json-patch+json"}, 422, ""},
		{"POST to an instance is 405", "POST", "/Patient/seed", `{"resourceType":"Patient","id":"seed","active":false}`, nil, 405, ""},
		{"DELETE of a type without criteria is 400", "DELETE", "/Patient", "", nil, 400, ""},
		{"PUT of a type without criteria is 400", "PUT", "/Patient", `{"resourceType":"Patient"}`, nil, 400, ""},
		{"a conditional delete with an unknown parameter is 400", "DELETE", "/Patient?nonsense=1", "", nil, 400, ""},
		{"a path with too many segments is 404", "GET", "/Patient/seed/y/z/w/v", "", nil, 404, ""},
		{"DELETE with too many segments is 404", "DELETE", "/Patient/seed/_history/1/x", "", nil, 404, ""},
		// Media types.
		{"Content-Type text/plain is 415", "POST", "/Patient", `{"resourceType":"Patient"}`, map[string]string{"Content-Type": "text/plain"}, 415, ""},
		{"a JSON body sent as application/xml is 400", "POST", "/Patient", `{"resourceType":"Patient"}`, map[string]string{"Content-Type": "application/xml"}, 400, ""},
		{"Content-Type text/turtle is 415", "PUT", "/Patient/seed", `@prefix fhir: <http://hl7.org/fhir/> .`, map[string]string{"Content-Type": "text/turtle"}, 415, ""},
		{"a form Content-Type is 415", "POST", "/Patient", `resourceType=Patient`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, ""},
		{"a malformed Content-Type is 415", "POST", "/Patient", `{"resourceType":"Patient"}`, map[string]string{"Content-Type": ";;"}, 415, ""},
		{"_format=ttl is 406", "GET", "/Patient/seed?_format=ttl", "", nil, 406, "_format"},
		{"_format=text/turtle is 406", "GET", "/Patient/seed?_format=text/turtle", "", nil, 406, "_format"},
		{"_format=ttl on a create is 406", "POST", "/Patient?_format=ttl", `{"resourceType":"Patient"}`, nil, 406, "_format"},
		{"Accept application/fhir+turtle is 406", "GET", "/Patient/seed", "", map[string]string{"Accept": "application/fhir+turtle"}, 406, ""},
		{"Accept text/html is 406", "GET", "/Patient/seed", "", map[string]string{"Accept": "text/html"}, 406, ""},
		{"Accept of JSON and XML with q=0 is 406", "GET", "/Patient/seed", "", map[string]string{"Accept": "application/fhir+json;q=0, application/fhir+xml;q=0, text/html"}, 406, ""},
		{"Accept text/csv on an update is 406", "PUT", "/Patient/seed", `{"resourceType":"Patient","id":"seed"}`, map[string]string{"Accept": "text/csv"}, 406, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(request{Method: tc.method, Path: tc.path, Body: tc.body, Header: tc.header})
			wantOutcome(t, r, tc.status, tc.expr)
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/fhir+json") {
				t.Fatalf("Content-Type %q, want application/fhir+json", ct)
			}
			unchanged(t)
		})
	}
}

// TestJSONNestingLimit: the limit is 100 levels; a resource at the limit is
// stored and read back as sent.
func TestJSONNestingLimit(t *testing.T) {
	e := newEnv(t)
	// 49 extension levels: the innermost extension object is at depth 99 and
	// valueCoding at 100.
	body := e2eNested(49, `"valueCoding":{"code":"x"}`)
	r := e.put("/Patient/seed", body)
	e2eWantStatus(t, r, http.StatusCreated)
	lu := e2eWantVersion(t, r, 1)
	want := e2eDoc("Patient", "seed", "1", lu, strings.TrimPrefix(body, `{"resourceType":"Patient","id":"seed",`))
	want = strings.TrimSuffix(want, "}") // e2eDoc adds the closing brace the content already has
	if rr := e.get("/Patient/seed"); rr.Status != http.StatusOK || string(rr.Body) != want {
		t.Fatalf("read: %d\n%s\nwant\n%s", rr.Status, rr.Body, want)
	}
	wantOutcome(t, e.put("/Patient/seed", e2eNested(50, `"valueString":"x"`)), http.StatusBadRequest, "")
}

// TestRequestBodyLimit: bodies over Config.MaxBodyBytes are 413, with or
// without a Content-Length.
func TestRequestBodyLimit(t *testing.T) {
	const limit = 1024
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.MaxBodyBytes = limit })
	sized := func(n int, id string) string {
		head := `{"resourceType":"Patient","id":"` + id + `","name":[{"text":"`
		tail := `"}]}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	unchanged := func(t *testing.T, want int) {
		t.Helper()
		if n := e2eHistoryTotal(t, e, "/_history"); n != want {
			t.Fatalf("system history has %d versions, want %d", n, want)
		}
	}
	t.Run("a body of exactly the limit is accepted", func(t *testing.T) {
		body := sized(limit, "at-limit")
		if len(body) != limit {
			t.Fatalf("body is %d bytes", len(body))
		}
		e2eWantStatus(t, e.put("/Patient/at-limit", body), http.StatusCreated)
		unchanged(t, 1)
	})
	cases := []struct {
		name, method, path, body string
	}{
		{"a create one byte over the limit is 413", http.MethodPost, "/Patient", sized(limit+1, "x")},
		{"a create far over the limit is 413", http.MethodPost, "/Patient", sized(64*limit, "x")},
		{"an update over the limit is 413", http.MethodPut, "/Patient/at-limit", sized(2*limit, "at-limit")},
		{"a create-on-update over the limit is 413", http.MethodPut, "/Patient/too-big", sized(2*limit, "too-big")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, e.do(request{Method: tc.method, Path: tc.path, Body: tc.body}), http.StatusRequestEntityTooLarge, "")
			unchanged(t, 1)
		})
	}
	t.Run("a chunked body over the limit is 413", func(t *testing.T) {
		body := sized(4*limit, "x")
		// io.MultiReader hides the length: the client sends the body chunked.
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/fhir/r4/Patient", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = e.tenant + ".localhost"
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Content-Type", "application/fhir+json")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		wantOutcome(t, &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, http.StatusRequestEntityTooLarge, "")
		unchanged(t, 1)
	})
}

// TestAcceptedMediaTypes: the ways of asking for or sending FHIR JSON.
func TestAcceptedMediaTypes(t *testing.T) {
	e := newEnv(t)
	e.put("/Patient/seed", `{"resourceType":"Patient","id":"seed"}`)
	reads := []struct {
		name, query string
		header      map[string]string
	}{
		{"_format=json is served", "?_format=json", nil},
		{"_format=application/fhir+json is served", "?_format=application/fhir%2Bjson", nil},
		{"_format=application/json is served", "?_format=application/json", nil},
		{"Accept */* is served", "", map[string]string{"Accept": "*/*"}},
		{"Accept application/json is served", "", map[string]string{"Accept": "application/json"}},
		{"Accept application/fhir+json with fhirVersion is served", "", map[string]string{"Accept": "application/fhir+json; fhirVersion=4.0"}},
		{"Accept preferring JSON over XML is served JSON", "", map[string]string{"Accept": "application/fhir+xml;q=0.5, application/fhir+json"}},
		{"_format=json wins over Accept XML", "?_format=json", map[string]string{"Accept": "application/fhir+xml"}},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(request{Method: http.MethodGet, Path: "/Patient/seed" + tc.query, Header: tc.header})
			e2eWantStatus(t, r, http.StatusOK)
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/fhir+json") {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
	for _, ct := range []string{"application/fhir+json", "application/fhir+json; charset=utf-8", "application/json", "application/json+fhir", "application/fhir+json; fhirVersion=4.0"} {
		t.Run("Content-Type "+ct+" is accepted", func(t *testing.T) {
			r := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient"}`, Header: map[string]string{"Content-Type": ct}})
			e2eWantStatus(t, r, http.StatusCreated)
		})
	}
}

// TestNumbersKeepTheirText: decimals read back with the exact text the
// client sent, in create, read, vread, update and history.
func TestNumbersKeepTheirText(t *testing.T) {
	e := newEnv(t)
	numbers := []string{
		"1.50", "0.1000", "1e2", "1E2", "1E+2", "-0.0", "-0", "0", "3.0", "12345678901234567890",
		"-12345678901234567890.000", "100000000000000000000000", "9007199254740993", "2147483648",
		"1e-7", "0.00000010", "1e-400", "72",
	}
	obs := func(id, n string) string {
		return `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"weight"},` +
			`"valueQuantity":{"value":` + n + `,"unit":"kg"},` +
			`"component":[{"code":{"text":"a"},"valueQuantity":{"value":` + n + `}},{"code":{"text":"b"},"valueInteger":1}]}`
	}
	for i, n := range numbers {
		t.Run(n, func(t *testing.T) {
			id := fmt.Sprintf("num-%d", i)
			want := []string{`"valueQuantity":{"value":` + n + `,"unit":"kg"}`, `"valueQuantity":{"value":` + n + `}}`}
			check := func(what string, body []byte) {
				t.Helper()
				for _, w := range want {
					if !bytes.Contains(body, []byte(w)) {
						t.Fatalf("%s does not contain %s:\n%s", what, w, body)
					}
				}
			}
			r := e.put("/Observation/"+id, obs(id, n))
			e2eWantStatus(t, r, http.StatusCreated)
			check("create response", r.Body)
			post := e.post("/Observation", obs(id, n))
			e2eWantStatus(t, post, http.StatusCreated)
			check("POST response", post.Body)
			read := e.get("/Observation/" + id)
			e2eWantStatus(t, read, http.StatusOK)
			check("read", read.Body)
			if !bytes.Equal(read.Body, r.Body) {
				t.Fatalf("read\n%s\ndiffers from the create response\n%s", read.Body, r.Body)
			}
			e2eWantStatus(t, e.put("/Observation/"+id, obs(id, "2.000")), http.StatusOK)
			v1 := e.get("/Observation/" + id + "/_history/1")
			e2eWantStatus(t, v1, http.StatusOK)
			if !bytes.Equal(v1.Body, r.Body) {
				t.Fatalf("vread 1\n%s\ndiffers from the create response\n%s", v1.Body, r.Body)
			}
			hist := e.get("/Observation/" + id + "/_history")
			e2eWantStatus(t, hist, http.StatusOK)
			check("history", hist.Body)
			if !bytes.Contains(hist.Body, []byte(`"value":2.000,`)) {
				t.Fatalf("history lost 2.000: %s", hist.Body)
			}
		})
	}
}

// TestClientInputNeverCausesServerErrors: JSON that is valid but odd is
// either stored faithfully or rejected with a 4xx, never a 5xx, and a
// rejection stores nothing.
func TestClientInputNeverCausesServerErrors(t *testing.T) {
	e := newEnv(t)
	cases := []struct{ name, key, value string }{
		{"an array directly inside an array", "valueX", `[[1]]`},
		{"an empty array inside an array", "valueX", `[[]]`},
		{"a decimal beyond the double range", "valueDecimal", `1e400`},
		{"a negative decimal beyond the double range", "valueDecimal", `-1e400`},
		{"a decimal below the double range", "valueDecimal", `1e-400`},
		{"a string with a NUL character", "valueString", `"a\u0000b"`},
		{"a long string", "valueString", `"` + strings.Repeat("x", 100000) + `"`},
		{"an empty object", "valueX", `{}`},
		{"null", "valueX", `null`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("odd-%d", i)
			body := `{"resourceType":"Basic","id":"` + id + `","code":{"text":"odd"},"extension":[{"url":"http://example.org/odd","` + tc.key + `":` + tc.value + `}]}`
			before := e2eHistoryTotal(t, e, "/_history")
			r := e.put("/Basic/"+id, body)
			e2eKnownBug(t, r.Status == http.StatusInternalServerError,
				"PUT /Basic/%s with %s answers 500 instead of 400 (the embedded database refuses the value): %s", id, tc.value, r.Body)
			switch {
			case r.Status == http.StatusCreated:
				if !bytes.Contains(r.Body, []byte(`"`+tc.key+`":`+tc.value+`}`)) {
					t.Fatalf("stored value differs: %.300s", r.Body)
				}
				if rr := e.get("/Basic/" + id); rr.Status != http.StatusOK || !bytes.Equal(rr.Body, r.Body) {
					t.Fatalf("read: %d %.300s", rr.Status, rr.Body)
				}
			case r.Status >= 400 && r.Status < 500:
				wantOutcome(t, r, r.Status, "")
				if n := e2eHistoryTotal(t, e, "/_history"); n != before {
					t.Fatalf("a rejected write changed history: %d versions, want %d", n, before)
				}
			default:
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		})
	}
}

// TestUnsupportedMethodAnswers: what RFC 9110 asks of 404 and 405 answers.
func TestUnsupportedMethodAnswers(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient"}`)
	t.Run("405 lists the allowed methods in Allow", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPost, Path: "/Patient/" + id, Body: `{"resourceType":"Patient","id":"` + id + `"}`})
		wantOutcome(t, r, http.StatusMethodNotAllowed, "")
		for _, m := range []string{"GET", "PUT", "DELETE", "PATCH"} {
			if !strings.Contains(r.Header.Get("Allow"), m) {
				t.Fatalf("Allow %q lacks %s", r.Header.Get("Allow"), m)
			}
		}
	})
	t.Run("an unknown sub-path of an instance is 404", func(t *testing.T) {
		r := e.get("/Patient/" + id + "/photo")
		e2eKnownBug(t, r.Status == http.StatusMethodNotAllowed,
			"GET /fhir/r4/Patient/{id}/photo answers 405 (\"GET is not allowed\") for a path no method serves; want 404")
		wantOutcome(t, r, http.StatusNotFound, "")
	})
}

// TestRequestID: every answer carries X-Request-Id; a safe client id is
// echoed, anything else replaced.
func TestRequestID(t *testing.T) {
	e := newEnv(t)
	generated := regexp.MustCompile(`^[0-9a-f]{16}$`)
	safe64 := strings.Repeat("a1.-_", 12) + "abcd"
	cases := []struct {
		name, sent string
		echoed     bool
	}{
		{"no X-Request-Id gets a generated one", "", false},
		{"a safe X-Request-Id is echoed", "req-42.A_b", true},
		{"a safe X-Request-Id of 64 characters is echoed", safe64, true},
		{"an X-Request-Id of 65 characters is replaced", safe64 + "x", false},
		{"an X-Request-Id with a space is replaced", "req 42", false},
		{"an X-Request-Id with markup is replaced", "<script>alert(1)</script>", false},
		{"an X-Request-Id with a quote is replaced", `req"42`, false},
		{"an X-Request-Id with non-ASCII letters is replaced", "requête", false},
	}
	empty := ""
	targets := []struct {
		name string
		req  request
	}{
		{"read", request{Method: http.MethodGet, Path: "/Patient/unknown"}},
		{"create", request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient"}`}},
		{"401", request{Method: http.MethodGet, Path: "/Patient/unknown", Token: &empty}},
		{"metadata", request{Method: http.MethodGet, Path: "/metadata", Token: &empty}},
		{"healthz", request{Method: http.MethodGet, Path: "/healthz", Token: &empty}},
	}
	for _, tc := range cases {
		for _, tg := range targets {
			t.Run(tc.name+" ("+tg.name+")", func(t *testing.T) {
				req := tg.req
				if tc.sent != "" {
					req.Header = map[string]string{"X-Request-Id": tc.sent}
				}
				r := e.do(req)
				got := r.Header.Values("X-Request-Id")
				if len(got) != 1 {
					t.Fatalf("X-Request-Id %q, want exactly one", got)
				}
				if tc.echoed {
					if got[0] != tc.sent {
						t.Fatalf("X-Request-Id %q, want the client's %q", got[0], tc.sent)
					}
					return
				}
				if !generated.MatchString(got[0]) {
					t.Fatalf("X-Request-Id %q is not a generated id", got[0])
				}
			})
		}
	}
	t.Run("generated ids differ", func(t *testing.T) {
		a, b := e.get("/Patient/unknown"), e.get("/Patient/unknown")
		if a.Header.Get("X-Request-Id") == b.Header.Get("X-Request-Id") {
			t.Fatalf("two requests got the same id %q", a.Header.Get("X-Request-Id"))
		}
	})
}
