package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"fhirstore/server"
	"fhirstore/store"
)

// The tests of this file post batch and transaction Bundles to the base.
// Its helpers, prefixed bt, serve conditional_test.go (conditional
// interactions and JSON Patch over plain HTTP) and bundle_synthea_test.go.

// btSys is the identifier system of the tests' Patients.
const btSys = "http://example.org/mrn"

// btCrit is the search criteria of the Patient with identifier value v.
func btCrit(v string) string { return "identifier=" + btSys + "|" + v }

// btPatient is a Patient with a family name and, unless v is empty, an
// identifier of btSys.
func btPatient(family, v string) string {
	ident := ""
	if v != "" {
		ident = fmt.Sprintf(`"identifier":[{"system":%q,"value":%q}],`, btSys, v)
	}
	return fmt.Sprintf(`{"resourceType":"Patient",%s"name":[{"family":%q}]}`, ident, family)
}

// btObservation is a final Observation coded by text whose subject is ref.
func btObservation(code, ref string) string {
	return fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"text":%q},"subject":{"reference":%q}}`, code, ref)
}

// btPatch is a Binary carrying a JSON Patch, as a PATCH entry sends it.
func btPatch(patch string) string {
	return fmt.Sprintf(`{"resourceType":"Binary","contentType":"application/json-patch+json","data":%q}`,
		base64.StdEncoding.EncodeToString([]byte(patch)))
}

// btEntry is one entry of a Bundle a test posts.
type btEntry struct {
	FullURL  string          `json:"fullUrl,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
	Request  *btRequest      `json:"request,omitempty"`
}

type btRequest struct {
	Method      string `json:"method,omitempty"`
	URL         string `json:"url,omitempty"`
	IfNoneMatch string `json:"ifNoneMatch,omitempty"`
	IfMatch     string `json:"ifMatch,omitempty"`
	IfNoneExist string `json:"ifNoneExist,omitempty"`
}

// btOp is an entry with a request; resource may be empty.
func btOp(method, url, resource string) btEntry {
	en := btEntry{Request: &btRequest{Method: method, URL: url}}
	if resource != "" {
		en.Resource = json.RawMessage(resource)
	}
	return en
}

func (en btEntry) full(u string) btEntry { en.FullURL = u; return en }

func (en btEntry) ifNoneExist(q string) btEntry {
	r := *en.Request
	r.IfNoneExist = q
	en.Request = &r
	return en
}

func (en btEntry) ifMatch(v string) btEntry {
	r := *en.Request
	r.IfMatch = v
	en.Request = &r
	return en
}

func (en btEntry) ifNoneMatch(v string) btEntry {
	r := *en.Request
	r.IfNoneMatch = v
	en.Request = &r
	return en
}

// btBundle is a Bundle of type typ.
func btBundle(typ string, entries ...btEntry) string {
	b, err := json.Marshal(map[string]any{"resourceType": "Bundle", "type": typ, "entry": entries})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// btReply is a batch-response or transaction-response.
type btReply struct {
	ResourceType string         `json:"resourceType"`
	Type         string         `json:"type"`
	Entry        []btReplyEntry `json:"entry"`
}

type btReplyEntry struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource"`
	Response struct {
		Status       string          `json:"status"`
		Location     string          `json:"location"`
		Etag         string          `json:"etag"`
		LastModified string          `json:"lastModified"`
		Outcome      json.RawMessage `json:"outcome"`
	} `json:"response"`
}

// status is the code of response.status ("201 Created" → 201).
func (en btReplyEntry) status(t testing.TB) int {
	t.Helper()
	code, _, _ := strings.Cut(en.Response.Status, " ")
	n, err := strconv.Atoi(code)
	if err != nil {
		t.Fatalf("response.status %q does not start with a code", en.Response.Status)
	}
	return n
}

// btLocation matches response.location: [base]/Type/id/_history/vid.
var btLocation = regexp.MustCompile(`^http://[^/]+/fhir/r4/([A-Za-z]+)/([A-Za-z0-9.-]{1,64})/_history/([0-9]+)$`)

// ref is "Type/id" of response.location.
func (en btReplyEntry) ref(t testing.TB) string {
	t.Helper()
	m := btLocation.FindStringSubmatch(en.Response.Location)
	if m == nil {
		t.Fatalf("response.location %q is not [base]/Type/id/_history/vid", en.Response.Location)
	}
	return m[1] + "/" + m[2]
}

// btSend posts a Bundle to the base with extra headers.
func (e *env) btSend(body string, header map[string]string) *response {
	e.t.Helper()
	return e.do(request{Method: http.MethodPost, Path: "/", Body: body, Header: header})
}

// btDecode checks a 200 Bundle of type want with n entries and decodes it.
func btDecode(t testing.TB, r *response, want string, n int) *btReply {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.Status, r.Body)
	}
	var b btReply
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("response is not a Bundle: %v: %s", err, r.Body)
	}
	if b.ResourceType != "Bundle" || b.Type != want {
		t.Fatalf("resourceType %q type %q, want a %s Bundle: %s", b.ResourceType, b.Type, want, r.Body)
	}
	if len(b.Entry) != n {
		t.Fatalf("%d response entries, want %d: %s", len(b.Entry), n, r.Body)
	}
	return &b
}

// btTransaction posts a transaction that must succeed and returns its response.
func (e *env) btTransaction(t testing.TB, entries ...btEntry) *btReply {
	t.Helper()
	return btDecode(t, e.btSend(btBundle("transaction", entries...), nil), "transaction-response", len(entries))
}

// btWantStatuses checks the status codes of the response entries.
func btWantStatuses(t testing.TB, b *btReply, want ...int) {
	t.Helper()
	for i, en := range b.Entry {
		if got := en.status(t); got != want[i] {
			t.Fatalf("entry %d: status %q, want %d: %s", i, en.Response.Status, want[i], en.Response.Outcome)
		}
	}
}

// btTotal is Bundle.total of a search or history GET.
func btTotal(t testing.TB, e *env, path string) int {
	t.Helper()
	return e2eHistoryTotal(t, e, path)
}

// btRead GETs Type/id, which must answer 200, and decodes it.
func btRead(t testing.TB, e *env, ref string) map[string]any {
	t.Helper()
	r := e.get("/" + ref)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", ref, r.Status, r.Body)
	}
	return r.JSON(t)
}

// btAt follows a path of object keys and array indexes through JSON.
func btAt(t testing.TB, v any, path ...any) any {
	t.Helper()
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no %q in %v", s, v)
			}
			v = m[s]
		case int:
			a, ok := v.([]any)
			if !ok || s >= len(a) {
				t.Fatalf("no [%d] in %v", s, v)
			}
			v = a[s]
		}
	}
	return v
}

// btFamily is name[0].family of a Patient.
func btFamily(t testing.TB, p map[string]any) string {
	t.Helper()
	f, _ := btAt(t, p, "name", 0, "family").(string)
	return f
}

// btWantOutcomeJSON checks that raw is an OperationOutcome with an issue
// whose expression contains expr (any issue when expr is empty).
func btWantOutcomeJSON(t testing.TB, raw json.RawMessage, expr string) {
	t.Helper()
	wantOutcome(t, &response{Status: 0, Body: raw}, 0, expr)
}

// btUnchanged stores Patient/seed and returns a check that the tenant's data
// is as it was: history totals, search totals and the seed's bytes.
func btUnchanged(t *testing.T, e *env) func(t *testing.T) {
	t.Helper()
	seed := e2eSeed(t, e)
	paths := []string{"/Patient", "/Observation", "/Patient/_history", "/Observation/_history"}
	before := map[string]int{}
	for _, p := range paths {
		before[p] = btTotal(t, e, p)
	}
	return func(t *testing.T) {
		t.Helper()
		seed(t)
		for _, p := range paths {
			if n := btTotal(t, e, p); n != before[p] {
				t.Fatalf("GET %s: total %d, was %d: the request changed stored data", p, n, before[p])
			}
		}
	}
}

// TestTransactionIsAllOrNothing: a transaction that fails anywhere answers
// an OperationOutcome naming the entry and stores nothing of any entry.
func TestTransactionIsAllOrNothing(t *testing.T) {
	e := newEnv(t)
	for range 2 {
		e.create("Patient", btPatient("Twin", "twin"))
	}
	solo := e.create("Patient", btPatient("Solo", "solo"))
	unchanged := btUnchanged(t, e)

	newPatient := btOp("POST", "Patient", btPatient("New", "new")).full("urn:uuid:0c6d2b62-5b4e-4d39-9f0e-3c1d1e2a0001")
	obs := btOp("POST", "Observation", btObservation("weight", "urn:uuid:0c6d2b62-5b4e-4d39-9f0e-3c1d1e2a0001"))
	seedV2 := btOp("PUT", "Patient/seed", `{"resourceType":"Patient","id":"seed","active":false,"name":[{"family":"Changed"}]}`)
	invalidPatient := btOp("POST", "Patient", `{"resourceType":"Patient","gender":"yes"}`)
	tx := func(entries ...btEntry) string { return btBundle("transaction", entries...) }
	cases := []struct {
		name   string
		body   string
		status int
		expr   string
	}{
		{"an invalid second entry fails the valid first and third", tx(newPatient, invalidPatient, obs), 422, "Bundle.entry[1].resource.gender"},
		{"an invalid entry after an update keeps the old version current", tx(seedV2, btOp("POST", "Observation", `{"resourceType":"Observation","status":"nonsense","code":{"text":"x"}}`)), 422, "Bundle.entry[1].resource.status"},
		{"an invalid entry after a delete keeps the resource", tx(btOp("DELETE", "Patient/seed", ""), invalidPatient), 422, "Bundle.entry[1].resource.gender"},
		{"an entry without request is 400", tx(newPatient, btEntry{Resource: json.RawMessage(btPatient("X", ""))}), 400, "Bundle.entry[1].request"},
		{"a request without url is 400", tx(newPatient, btOp("POST", "", btPatient("X", ""))), 400, "Bundle.entry[1].request.url"},
		{"an unknown request method is 400", tx(newPatient, btOp("FETCH", "Patient/seed", "")), 400, "Bundle.entry[1].request.method"},
		{"a request url on another server is 400", tx(btOp("POST", "http://other.example/fhir/Patient", btPatient("X", ""))), 400, "Bundle.entry[0].request.url"},
		{"a request url under another tenant's base is 400", tx(newPatient, btOp("PUT", "http://other.localhost/fhir/r4/Patient/seed", `{"resourceType":"Patient","id":"seed"}`)), 400, "Bundle.entry[1].request.url"},
		{"a read under another tenant's base is 400", tx(newPatient, btOp("GET", "http://other.localhost/fhir/r4/Patient/seed", "")), 400, "Bundle.entry[1].request.url"},
		{"a request url of an unknown type is 400", tx(btOp("DELETE", "Foo/1", "")), 400, "Bundle.entry[0].request.url"},
		{"a request url with an invalid id is 400", tx(seedV2, btOp("PUT", "Patient/bad_id!", `{"resourceType":"Patient","id":"bad_id!"}`)), 400, "Bundle.entry[1]"},
		{"a POST to an instance is 400", tx(btOp("POST", "Patient/seed", btPatient("X", ""))), 400, "Bundle.entry[0].request.url"},
		{"a POST without resource is 400", tx(newPatient, btOp("POST", "Patient", "")), 400, "Bundle.entry[1].resource"},
		{"a POST whose url has a query is 400", tx(btOp("POST", "Patient?"+btCrit("solo"), btPatient("Q", ""))), 400, "Bundle.entry[0].request.url"},
		{"a resource of another type than the url is 400", tx(btOp("POST", "Patient", btObservation("x", "Patient/seed"))), 400, "Bundle.entry[0].resource.resourceType"},
		{"a body id other than the url id is 400", tx(btOp("PUT", "Patient/seed", `{"resourceType":"Patient","id":"other"}`)), 400, "Bundle.entry[0].resource.id"},
		{"a reference to an unknown urn:uuid is 400", tx(newPatient, btOp("POST", "Observation", btObservation("x", "urn:uuid:5e1f0a4c-8d0c-4b39-a0a4-000000000000"))), 400, "Bundle.entry[1].resource.subject.reference"},
		{"a reference to an unknown urn:oid is 400", tx(newPatient, btOp("POST", "Observation", btObservation("x", "urn:oid:1.2.3.99"))), 400, "Bundle.entry[1].resource.subject.reference"},
		{"two entries with one fullUrl are 400", tx(newPatient, newPatient), 400, "Bundle.entry[1].fullUrl"},
		{"two updates of one resource are 400", tx(seedV2, seedV2), 400, "request.url"},
		{"an update and a delete of one resource are 400", tx(seedV2, btOp("DELETE", "Patient/seed", "")), 400, "request.url"},
		{"a conditional delete resolving to another entry's resource is 400", tx(btOp("PUT", "Patient/"+solo, `{"resourceType":"Patient","id":"`+solo+`"}`), btOp("DELETE", "Patient?"+btCrit("solo"), "")), 400, "request.url"},
		{"ifNoneExist matching two resources is 412", tx(newPatient, btOp("POST", "Patient", btPatient("Twin", "twin")).ifNoneExist(btCrit("twin"))), 412, "Bundle.entry[1]"},
		{"ifNoneExist with an unknown parameter is 400", tx(btOp("POST", "Patient", btPatient("X", "")).ifNoneExist("nonsense=1")), 400, "Bundle.entry[0]"},
		{"ifNoneExist with a result parameter is 400", tx(btOp("POST", "Patient", btPatient("X", "")).ifNoneExist(btCrit("solo") + "&_count=1")), 400, "Bundle.entry[0]"},
		{"a conditional update matching two resources is 412", tx(newPatient, btOp("PUT", "Patient?"+btCrit("twin"), btPatient("Twin", "twin"))), 412, "Bundle.entry[1]"},
		{"a conditional delete matching two resources is 412", tx(newPatient, btOp("DELETE", "Patient?"+btCrit("twin"), "")), 412, "Bundle.entry[1]"},
		{"a conditional patch matching two resources is 412", tx(newPatient, btOp("PATCH", "Patient?"+btCrit("twin"), btPatch(`[{"op":"add","path":"/active","value":true}]`))), 412, "Bundle.entry[1]"},
		{"a conditional patch matching nothing is 404", tx(newPatient, btOp("PATCH", "Patient?"+btCrit("nobody"), btPatch(`[{"op":"add","path":"/active","value":true}]`))), 404, "Bundle.entry[1]"},
		{"a conditional reference matching nothing is 412", tx(newPatient, btOp("POST", "Observation", btObservation("x", "Patient?"+btCrit("nobody")))), 412, "Bundle.entry[1]"},
		{"a conditional reference matching two resources is 412", tx(newPatient, btOp("POST", "Observation", btObservation("x", "Patient?"+btCrit("twin")))), 412, "Bundle.entry[1]"},
		{"an ifMatch of another version than the current is 412", tx(obs, newPatient, seedV2.ifMatch(`W/"2"`)), 412, "Bundle.entry[2]"},
		{"an ifMatch on a missing resource is 412", tx(newPatient, btOp("PUT", "Patient/ghost", `{"resourceType":"Patient","id":"ghost"}`).ifMatch(`W/"1"`)), 412, "Bundle.entry[1]"},
		{"a malformed ifMatch is 400", tx(newPatient, seedV2.ifMatch("banana")), 400, "Bundle.entry[1].request.ifMatch"},
		{"a patch of a missing resource is 404", tx(newPatient, btOp("PATCH", "Patient/ghost", btPatch(`[{"op":"add","path":"/active","value":true}]`))), 404, "Bundle.entry[1]"},
		{"a patch whose test fails is 422", tx(newPatient, btOp("PATCH", "Patient/seed", btPatch(`[{"op":"test","path":"/active","value":false},{"op":"replace","path":"/active","value":false}]`))), 422, "Bundle.entry[1]"},
		{"a patch making the resource invalid is 422", tx(newPatient, btOp("PATCH", "Patient/seed", btPatch(`[{"op":"add","path":"/gender","value":"yes"}]`))), 422, "Bundle.entry[1].resource.gender"},
		{"a patch that is not a JSON Patch is 400", tx(btOp("PATCH", "Patient/seed", btPatch(`{"op":"add"}`))), 400, "Bundle.entry[0]"},
		{"a patch not carried in a Binary is 400", tx(btOp("PATCH", "Patient/seed", `[{"op":"add","path":"/active","value":true}]`)), 400, "Bundle.entry[0].resource"},
		{"a patch in a Binary of another content type is 400", tx(btOp("PATCH", "Patient/seed", `{"resourceType":"Binary","contentType":"application/fhir+json","data":"e30="}`)), 400, "Bundle.entry[0].resource"},
		{"a patch whose data is not base64 is 400", tx(btOp("PATCH", "Patient/seed", `{"resourceType":"Binary","contentType":"application/json-patch+json","data":"%%%"}`)), 400, "Bundle.entry[0].resource.data"},
		{"one resource by a relative and an absolute url is 400", tx(seedV2, btOp("DELETE", "http://"+e.tenant+".localhost/fhir/r4/Patient/seed", "")), 400, "request.url"},
		{"an unknown element is 422 unless handling is lenient", tx(newPatient, btOp("POST", "Patient", `{"resourceType":"Patient","foo":1}`)), 422, "Bundle.entry[1].resource.foo"},
		{"a document Bundle is 400", btBundle("document", newPatient), 400, "Bundle.type"},
		{"a collection Bundle is 400", btBundle("collection", newPatient), 400, "Bundle.type"},
		{"a Bundle without type is 400", `{"resourceType":"Bundle","entry":[]}`, 400, "Bundle.type"},
		{"a Patient posted to the base is 400", btPatient("X", ""), 400, "resourceType"},
		{"a body that is not JSON is 400", `{"resourceType":"Bundle",`, 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, e.btSend(tc.body, nil), tc.status, tc.expr)
			unchanged(t)
			if n := btTotal(t, e, "/Patient?"+btCrit("new")); n != 0 {
				t.Fatalf("%d Patients of the failed transaction are found", n)
			}
		})
	}
}

// TestTransactionRewritesReferencesToEntries: urn:uuid and urn:oid fullUrls
// become the Type/id their entries are stored as, in references, in
// Attachment.url and in narrative links; nothing else is touched.
func TestTransactionRewritesReferencesToEntries(t *testing.T) {
	e := newEnv(t)
	const (
		binURN = "urn:uuid:6f1c8a52-1d3e-4f5a-9b7c-000000000b01"
		docURN = "urn:uuid:6f1c8a52-1d3e-4f5a-9b7c-000000000d01"
		patURN = "urn:uuid:6f1c8a52-1d3e-4f5a-9b7c-000000000a01"
		orgOID = "urn:oid:1.2.36.146.595.217.0.1"
		praURN = "urn:uuid:6f1c8a52-1d3e-4f5a-9b7c-000000000c01"
	)
	div := `<div xmlns=\"http://www.w3.org/1999/xhtml\">See <a href=\"` + docURN + `\">the report</a> of <a href='` + orgOID + `'>the clinic</a>, not <a href=\"urn:uuid:6f1c8a52-1d3e-4f5a-9b7c-999999999999\">this</a>.</div>`
	entries := []btEntry{
		btOp("POST", "Binary", `{"resourceType":"Binary","contentType":"text/plain","data":"aGVsbG8="}`).full(binURN),
		btOp("POST", "DocumentReference", `{"resourceType":"DocumentReference","status":"current","subject":{"reference":"`+patURN+`"},`+
			`"content":[{"attachment":{"contentType":"text/plain","url":"`+binURN+`"}}]}`).full(docURN),
		btOp("POST", "Organization", `{"resourceType":"Organization","name":"Clinic"}`).full(orgOID),
		btOp("POST", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"`+div+`"},`+
			`"identifier":[{"system":"urn:ietf:rfc:3986","value":"`+patURN+`"}],"managingOrganization":{"reference":"`+orgOID+`"},`+
			`"generalPractitioner":[{"reference":"`+praURN+`"},{"reference":"`+orgOID+`"}]}`).full(patURN),
		btOp("PUT", "Practitioner/pr-1", `{"resourceType":"Practitioner","id":"pr-1","name":[{"family":"Osler"}]}`).full(praURN),
		btOp("POST", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"note"},`+
			`"subject":{"reference":"`+patURN+`","display":"`+patURN+`"},"performer":[{"reference":"`+praURN+`"}],`+
			`"derivedFrom":[{"reference":"`+docURN+`"}],"focus":[{"reference":"http://other.example/fhir/Patient/p9"}],"hasMember":[{"reference":"Observation/elsewhere"}]}`),
	}
	types := []string{"Binary", "DocumentReference", "Organization", "Patient", "Practitioner", "Observation"}
	start := time.Now().Add(-time.Minute)
	b := e.btTransaction(t, entries...)
	btWantStatuses(t, b, 201, 201, 201, 201, 201, 201)
	ref := map[string]string{}
	base := "http://" + e.tenant + ".localhost/fhir/r4/"

	t.Run("each response entry has fullUrl, location, etag and lastModified of version 1", func(t *testing.T) {
		for i, en := range b.Entry {
			r := en.ref(t)
			if typ, _, _ := strings.Cut(r, "/"); typ != types[i] {
				t.Fatalf("entry %d: location %s, want a %s (entries must come back in request order)", i, en.Response.Location, types[i])
			}
			if !strings.HasSuffix(en.Response.Location, "/_history/1") || en.Response.Etag != `W/"1"` {
				t.Fatalf("entry %d: location %q etag %q, want version 1", i, en.Response.Location, en.Response.Etag)
			}
			if en.FullURL != base+r {
				t.Fatalf("entry %d: fullUrl %q, want %q", i, en.FullURL, base+r)
			}
			lm, err := time.Parse(time.RFC3339Nano, en.Response.LastModified)
			if err != nil || lm.Before(start) || lm.After(time.Now().Add(time.Minute)) {
				t.Fatalf("entry %d: lastModified %q is not the time of the transaction", i, en.Response.LastModified)
			}
			if en.Response.LastModified != b.Entry[0].Response.LastModified {
				t.Fatalf("entry %d: lastModified %s, entry 0 %s: one transaction is one instant", i, en.Response.LastModified, b.Entry[0].Response.LastModified)
			}
			if len(en.Resource) != 0 {
				t.Fatalf("entry %d: a resource without Prefer return=representation: %s", i, en.Resource)
			}
			ref[types[i]] = r
		}
		if ref["Practitioner"] != "Practitioner/pr-1" {
			t.Fatalf("PUT Practitioner/pr-1 is stored as %s", ref["Practitioner"])
		}
	})
	if len(ref) != len(types) {
		t.FailNow()
	}

	t.Run("Reference.reference names the stored entry", func(t *testing.T) {
		doc, pat, obs := btRead(t, e, ref["DocumentReference"]), btRead(t, e, ref["Patient"]), btRead(t, e, ref["Observation"])
		for _, c := range []struct {
			res  map[string]any
			path []any
			want string
		}{
			{doc, []any{"subject", "reference"}, ref["Patient"]},
			{pat, []any{"managingOrganization", "reference"}, ref["Organization"]},
			{pat, []any{"generalPractitioner", 0, "reference"}, "Practitioner/pr-1"},
			{pat, []any{"generalPractitioner", 1, "reference"}, ref["Organization"]},
			{obs, []any{"subject", "reference"}, ref["Patient"]},
			{obs, []any{"performer", 0, "reference"}, "Practitioner/pr-1"},
			{obs, []any{"derivedFrom", 0, "reference"}, ref["DocumentReference"]},
			{obs, []any{"focus", 0, "reference"}, "http://other.example/fhir/Patient/p9"},
			{obs, []any{"hasMember", 0, "reference"}, "Observation/elsewhere"},
			{obs, []any{"subject", "display"}, patURN},
			{pat, []any{"identifier", 0, "value"}, patURN},
		} {
			if got := btAt(t, c.res, c.path...); got != c.want {
				t.Errorf("%s at %v is %v, want %s", c.res["resourceType"], c.path, got, c.want)
			}
		}
	})

	t.Run("Attachment.url names the stored Binary", func(t *testing.T) {
		doc := btRead(t, e, ref["DocumentReference"])
		if got := btAt(t, doc, "content", 0, "attachment", "url"); got != ref["Binary"] {
			t.Fatalf("attachment.url %v, want %s", got, ref["Binary"])
		}
		btRead(t, e, ref["Binary"])
	})

	t.Run("narrative links name the stored entries and others stay", func(t *testing.T) {
		got, _ := btAt(t, btRead(t, e, ref["Patient"]), "text", "div").(string)
		for _, want := range []string{`href="` + ref["DocumentReference"] + `"`, `href='` + ref["Organization"] + `'`, `href="urn:uuid:6f1c8a52-1d3e-4f5a-9b7c-999999999999"`} {
			if !strings.Contains(got, want) {
				t.Errorf("div %s does not contain %s", got, want)
			}
		}
	})

	t.Run("search finds the entries by their rewritten references", func(t *testing.T) {
		for _, q := range []string{
			"/Observation?subject=" + ref["Patient"],
			"/Observation?performer=Practitioner/pr-1",
			"/DocumentReference?subject=" + ref["Patient"],
			"/Patient?organization=" + ref["Organization"],
		} {
			if n := btTotal(t, e, q); n != 1 {
				t.Errorf("GET %s: total %d, want 1", q, n)
			}
		}
	})
}

// TestTransactionEntriesMayReferToEachOther: ids are fixed before any
// reference is rewritten, so entries can name each other in a cycle and
// name themselves.
func TestTransactionEntriesMayReferToEachOther(t *testing.T) {
	e := newEnv(t)
	const a, b = "urn:uuid:9d5e1c3b-0a7f-4e2d-b6c8-0000000000a1", "urn:uuid:9d5e1c3b-0a7f-4e2d-b6c8-0000000000b1"
	link := func(to string) string {
		return `{"resourceType":"Patient","link":[{"other":{"reference":"` + to + `"},"type":"seealso"}]}`
	}
	r := e.btTransaction(t, btOp("POST", "Patient", link(b)).full(a), btOp("POST", "Patient", link(a)).full(b), btOp("POST", "Patient", link("urn:uuid:9d5e1c3b-0a7f-4e2d-b6c8-0000000000c1")).full("urn:uuid:9d5e1c3b-0a7f-4e2d-b6c8-0000000000c1"))
	btWantStatuses(t, r, 201, 201, 201)
	for i, want := range []string{r.Entry[1].ref(t), r.Entry[0].ref(t), r.Entry[2].ref(t)} {
		if got := btAt(t, btRead(t, e, r.Entry[i].ref(t)), "link", 0, "other", "reference"); got != want {
			t.Errorf("entry %d links to %v, want %s", i, got, want)
		}
	}
}

// TestBundleIsPostedToTheBase with or without a trailing slash.
func TestBundleIsPostedToTheBase(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"", "/"} {
		r := e.do(request{Method: http.MethodPost, Path: path, Body: btBundle("batch", btOp("POST", "Patient", btPatient("Base", "")))})
		btWantStatuses(t, btDecode(t, r, "batch-response", 1), 201)
	}
}

// TestBundlesWithoutEntries answer a response without entries.
func TestBundlesWithoutEntries(t *testing.T) {
	e := newEnv(t)
	for _, typ := range []string{"transaction", "batch"} {
		for _, body := range []string{btBundle(typ), `{"resourceType":"Bundle","type":"` + typ + `"}`} {
			r := e.btSend(body, nil)
			btDecode(t, r, typ+"-response", 0)
			if bytes.Contains(r.Body, []byte(`"entry"`)) {
				t.Fatalf("response has an entry element (FHIR JSON has no empty arrays): %s", r.Body)
			}
		}
	}
}

// TestBundleLenientHandling: Prefer: handling=lenient stores entries with
// unknown elements, reporting them with return=OperationOutcome.
func TestBundleLenientHandling(t *testing.T) {
	e := newEnv(t)
	for _, typ := range []string{"transaction", "batch"} {
		t.Run(typ, func(t *testing.T) {
			r := e.btSend(btBundle(typ, btOp("POST", "Patient", `{"resourceType":"Patient","foo":1}`)), map[string]string{"Prefer": "handling=lenient, return=OperationOutcome"})
			b := btDecode(t, r, typ+"-response", 1)
			btWantStatuses(t, b, 201)
			btWantOutcomeJSON(t, b.Entry[0].Response.Outcome, "Patient.foo")
			btRead(t, e, b.Entry[0].ref(t))
		})
	}
}

// TestTransactionProcessingOrder: deletes, then creates, then updates, then
// reads, whatever the order of the entries; the response lists the entries
// in request order.
func TestTransactionProcessingOrder(t *testing.T) {
	e := newEnv(t)
	old := e.create("Patient", btPatient("Old", "order"))
	kept := e.create("Patient", btPatient("Kept", "kept"))
	b := e.btTransaction(t,
		btOp("GET", "Patient?"+btCrit("order"), ""),
		btOp("PUT", "Patient/"+kept, `{"resourceType":"Patient","id":"`+kept+`","name":[{"family":"Kept"}],"link":[{"other":{"reference":"urn:uuid:1f0c2a71-7a5e-4a38-9a7b-0000000000e1"},"type":"seealso"}]}`),
		btOp("POST", "Patient", btPatient("New", "order")).full("urn:uuid:1f0c2a71-7a5e-4a38-9a7b-0000000000e1"),
		btOp("DELETE", "Patient/"+old, ""),
		btOp("GET", "Patient/"+old, ""),
	)
	btWantStatuses(t, b, 200, 200, 201, 204, 410)
	created := b.Entry[2].ref(t)

	t.Run("a search entry sees the transaction's writes", func(t *testing.T) {
		var set struct {
			ResourceType, Type string
			Entry              []struct{ FullURL string }
		}
		if err := json.Unmarshal(b.Entry[0].Resource, &set); err != nil || set.Type != "searchset" {
			t.Fatalf("entry 0 resource is not a searchset: %v %s", err, b.Entry[0].Resource)
		}
		if len(set.Entry) != 1 || !strings.HasSuffix(set.Entry[0].FullURL, "/"+created) {
			t.Fatalf("search for the identifier finds %+v, want only %s (the deleted %s gone, the created one there)", set.Entry, created, old)
		}
	})
	t.Run("a read entry of the deleted resource is 410", func(t *testing.T) {
		btWantOutcomeJSON(t, b.Entry[4].Response.Outcome, "")
	})
	t.Run("the delete answers the deletion's etag and no location", func(t *testing.T) {
		if b.Entry[3].Response.Etag != `W/"2"` || b.Entry[3].Response.Location != "" {
			t.Fatalf("delete response %+v, want etag W/\"2\" and no location", b.Entry[3].Response)
		}
		wantOutcome(t, e.get("/Patient/"+old), http.StatusGone, "")
	})
	t.Run("an update refers to an entry created in the same transaction", func(t *testing.T) {
		if got := btAt(t, btRead(t, e, "Patient/"+kept), "link", 0, "other", "reference"); got != created {
			t.Fatalf("link.other %v, want %s", got, created)
		}
	})
}

// TestTransactionConditionalCreate: ifNoneExist creates once, then answers
// the match (200) and stores nothing; references to the entry name the match.
func TestTransactionConditionalCreate(t *testing.T) {
	e := newEnv(t)
	const urn = "urn:uuid:7a3d9e10-2f4b-4c5d-8e6f-0000000000c1"
	bundle := func(ifNoneExist, code string) []btEntry {
		return []btEntry{
			btOp("POST", "Patient", btPatient("Once", "cc")).full(urn).ifNoneExist(ifNoneExist),
			btOp("POST", "Observation", btObservation(code, urn)),
		}
	}
	first := e.btTransaction(t, bundle(btCrit("cc"), "first")...)
	btWantStatuses(t, first, 201, 201)
	id := first.Entry[0].ref(t)
	for _, tc := range []struct{ name, ifNoneExist string }{
		{"criteria as a query", btCrit("cc")},
		{"criteria with the type", "Patient?" + btCrit("cc")},
	} {
		t.Run("a second transaction finds the match: "+tc.name, func(t *testing.T) {
			b := e.btTransaction(t, bundle(tc.ifNoneExist, tc.name)...)
			btWantStatuses(t, b, 200, 201)
			if got := b.Entry[0].ref(t); got != id || !strings.HasSuffix(b.Entry[0].Response.Location, "/_history/1") {
				t.Fatalf("location %s, want %s version 1", b.Entry[0].Response.Location, id)
			}
			obs := btRead(t, e, b.Entry[1].ref(t))
			if got := btAt(t, obs, "subject", "reference"); got != id {
				t.Fatalf("the Observation's subject is %v, want the match %s", got, id)
			}
		})
	}
	if n := btTotal(t, e, "/Patient?"+btCrit("cc")); n != 1 {
		t.Fatalf("%d Patients with the identifier, want 1", n)
	}
	if n := btTotal(t, e, "/"+id+"/_history"); n != 1 {
		t.Fatalf("the Patient has %d versions, want 1", n)
	}
	if n := btTotal(t, e, "/Observation?subject="+id); n != 3 {
		t.Fatalf("%d Observations of the Patient, want 3", n)
	}
}

// TestTransactionConditionalUpdate: PUT Type?criteria creates without a
// match, updates the one match, and 412 with several (see
// TestTransactionIsAllOrNothing).
func TestTransactionConditionalUpdate(t *testing.T) {
	e := newEnv(t)
	url := "Patient?" + btCrit("cu")
	b := e.btTransaction(t, btOp("PUT", url, btPatient("First", "cu")))
	btWantStatuses(t, b, 201)
	id := b.Entry[0].ref(t)

	t.Run("one match is updated in place", func(t *testing.T) {
		b := e.btTransaction(t, btOp("PUT", url, btPatient("Second", "cu")))
		btWantStatuses(t, b, 200)
		if b.Entry[0].ref(t) != id || b.Entry[0].Response.Etag != `W/"2"` {
			t.Fatalf("response %+v, want version 2 of %s", b.Entry[0].Response, id)
		}
		if f := btFamily(t, btRead(t, e, id)); f != "Second" {
			t.Fatalf("family %q, want Second", f)
		}
	})
	t.Run("the body may carry the matched id", func(t *testing.T) {
		_, pid, _ := strings.Cut(id, "/")
		b := e.btTransaction(t, btOp("PUT", url, `{"resourceType":"Patient","id":"`+pid+`","name":[{"family":"Third"}],"identifier":[{"system":"`+btSys+`","value":"cu"}]}`))
		btWantStatuses(t, b, 200)
		if b.Entry[0].Response.Etag != `W/"3"` {
			t.Fatalf("etag %s, want W/\"3\"", b.Entry[0].Response.Etag)
		}
	})
	t.Run("a body id other than the match is 400", func(t *testing.T) {
		r := e.btSend(btBundle("transaction", btOp("PUT", url, `{"resourceType":"Patient","id":"someone-else"}`)), nil)
		wantOutcome(t, r, http.StatusBadRequest, "Bundle.entry[0].resource.id")
		if n := btTotal(t, e, "/"+id+"/_history"); n != 3 {
			t.Fatalf("%d versions, want 3", n)
		}
	})
	t.Run("without a match the body id is the new resource's id", func(t *testing.T) {
		b := e.btTransaction(t, btOp("PUT", "Patient?"+btCrit("cu-new"), `{"resourceType":"Patient","id":"chosen-id","identifier":[{"system":"`+btSys+`","value":"cu-new"}]}`))
		btWantStatuses(t, b, 201)
		if got := b.Entry[0].ref(t); got != "Patient/chosen-id" {
			t.Fatalf("created %s, want Patient/chosen-id", got)
		}
	})
	if n := btTotal(t, e, "/Patient?"+btCrit("cu")); n != 1 {
		t.Fatalf("%d Patients with the identifier, want 1", n)
	}
}

// TestTransactionConditionalDelete: DELETE Type?criteria deletes the one
// match; without one it answers 204 and changes nothing.
func TestTransactionConditionalDelete(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", btPatient("Gone", "cd"))
	b := e.btTransaction(t, btOp("DELETE", "Patient?"+btCrit("cd"), ""))
	btWantStatuses(t, b, 204)
	if b.Entry[0].Response.Etag != `W/"2"` {
		t.Fatalf("etag %q, want the deletion's W/\"2\"", b.Entry[0].Response.Etag)
	}
	wantOutcome(t, e.get("/Patient/"+id), http.StatusGone, "")
	hist := btTotal(t, e, "/_history")
	for _, crit := range []string{btCrit("cd"), btCrit("never-there")} {
		b := e.btTransaction(t, btOp("DELETE", "Patient?"+crit, ""))
		btWantStatuses(t, b, 204)
		if n := btTotal(t, e, "/_history"); n != hist {
			t.Fatalf("DELETE Patient?%s without a match wrote: history %d, was %d", crit, n, hist)
		}
	}
}

// TestTransactionIfMatch: ifMatch of the current version updates; a stale
// one fails the whole transaction with 412.
func TestTransactionIfMatch(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", btPatient("V1", ""))
	body := func(family string) string {
		return `{"resourceType":"Patient","id":"` + id + `","name":[{"family":"` + family + `"}]}`
	}
	b := e.btTransaction(t,
		btOp("PUT", "Patient/"+id, body("V2")).ifMatch(`W/"1"`),
		btOp("POST", "Observation", btObservation("with-v2", "Patient/"+id)))
	btWantStatuses(t, b, 200, 201)
	if b.Entry[0].Response.Etag != `W/"2"` {
		t.Fatalf("etag %q, want W/\"2\"", b.Entry[0].Response.Etag)
	}
	r := e.btSend(btBundle("transaction",
		btOp("PUT", "Patient/"+id, body("V3")).ifMatch(`W/"1"`),
		btOp("POST", "Observation", btObservation("with-v3", "Patient/"+id))), nil)
	wantOutcome(t, r, http.StatusPreconditionFailed, "Bundle.entry[0]")
	if f := btFamily(t, btRead(t, e, "Patient/"+id)); f != "V2" {
		t.Fatalf("family %q after the failed transaction, want V2", f)
	}
	if n := btTotal(t, e, "/Observation"); n != 1 {
		t.Fatalf("%d Observations, want 1: the failed transaction's create was stored", n)
	}
	if n := btTotal(t, e, "/Patient/"+id+"/_history"); n != 2 {
		t.Fatalf("%d versions, want 2", n)
	}
}

// TestTransactionConditionalReferences: a reference Type?criteria becomes
// the one resource matching it (failures: TestTransactionIsAllOrNothing).
func TestTransactionConditionalReferences(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", btPatient("Ref", "cr"))
	prid := e.create("Practitioner", `{"resourceType":"Practitioner","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"9999912345"}]}`)
	const npi = "Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999912345"
	b := e.btTransaction(t,
		btOp("POST", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},`+
			`"subject":{"reference":"Patient?`+btCrit("cr")+`"},"performer":[{"reference":"`+npi+`"},{"reference":"Patient?`+btCrit("cr")+`"}]}`),
		btOp("POST", "Encounter", `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"subject":{"reference":"Patient?`+btCrit("cr")+`"},"participant":[{"individual":{"reference":"`+npi+`"}}]}`),
	)
	btWantStatuses(t, b, 201, 201)
	obs, enc := btRead(t, e, b.Entry[0].ref(t)), btRead(t, e, b.Entry[1].ref(t))
	for _, c := range []struct {
		res  map[string]any
		path []any
		want string
	}{
		{obs, []any{"subject", "reference"}, "Patient/" + pid},
		{obs, []any{"performer", 0, "reference"}, "Practitioner/" + prid},
		{obs, []any{"performer", 1, "reference"}, "Patient/" + pid},
		{enc, []any{"subject", "reference"}, "Patient/" + pid},
		{enc, []any{"participant", 0, "individual", "reference"}, "Practitioner/" + prid},
	} {
		if got := btAt(t, c.res, c.path...); got != c.want {
			t.Errorf("%s at %v is %v, want %s", c.res["resourceType"], c.path, got, c.want)
		}
	}
}

// TestConditionalReferencesFollowChanges: a conditional reference resolved
// once (and remembered) resolves anew after its target changes: another
// resource takes the identifier, the old one loses it or is deleted.
func TestConditionalReferencesFollowChanges(t *testing.T) {
	e := newEnv(t)
	const crit = "identifier=http://hl7.org/fhir/sid/us-npi|9999900001"
	practitioner := func(id, npi string) string {
		return `{"resourceType":"Practitioner","id":"` + id + `","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"` + npi + `"}]}`
	}
	refer := func(want int) *btReply {
		t.Helper()
		r := e.btSend(btBundle("transaction", btOp("POST", "Encounter",
			`{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"participant":[{"individual":{"reference":"Practitioner?`+crit+`"}}]}`)), nil)
		if r.Status != want {
			t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
		}
		if want != http.StatusOK {
			return nil
		}
		return btDecode(t, r, "transaction-response", 1)
	}
	resolved := func(b *btReply) any {
		return btAt(t, btRead(t, e, b.Entry[0].ref(t)), "participant", 0, "individual", "reference")
	}
	e.put("/Practitioner/p1", practitioner("p1", "9999900001"))
	for range 2 { // the second time from what the first remembered
		if got := resolved(refer(http.StatusOK)); got != "Practitioner/p1" {
			t.Fatalf("resolved to %v, want Practitioner/p1", got)
		}
	}
	e.put("/Practitioner/p1", practitioner("p1", "9999900002")) // p1 loses the identifier
	refer(http.StatusPreconditionFailed)
	e.put("/Practitioner/p2", practitioner("p2", "9999900001")) // p2 takes it
	if got := resolved(refer(http.StatusOK)); got != "Practitioner/p2" {
		t.Fatalf("resolved to %v, want Practitioner/p2", got)
	}
	e.put("/Practitioner/p3", practitioner("p3", "9999900001")) // now two match
	refer(http.StatusPreconditionFailed)
	e.do(request{Method: http.MethodDelete, Path: "/Practitioner/p3"})
	if got := resolved(refer(http.StatusOK)); got != "Practitioner/p2" {
		t.Fatalf("resolved to %v, want Practitioner/p2", got)
	}
	e.do(request{Method: http.MethodDelete, Path: "/Practitioner/p2"})
	refer(http.StatusPreconditionFailed)
}

// TestBundleReadEntries: GET entries of a transaction and of a batch answer
// the resource, a searchset or an OperationOutcome in the response entry.
func TestBundleReadEntries(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", btPatient("Read", "re"))
	for _, typ := range []string{"transaction", "batch"} {
		t.Run(typ, func(t *testing.T) {
			entries := []btEntry{
				btOp("GET", "Patient/"+id, ""),
				btOp("GET", "Patient?"+btCrit("re"), ""),
				btOp("GET", "Patient/"+id+"/_history/1", ""),
				btOp("GET", "Patient/"+id, "").ifNoneMatch(`W/"1"`),
				btOp("GET", "http://"+e.tenant+".localhost/fhir/r4/Patient/"+id, ""),
			}
			want := []int{200, 200, 200, 304, 200}
			if typ == "batch" {
				entries = append(entries, btOp("GET", "Patient/no-such-patient", ""))
				want = append(want, 404)
			}
			b := btDecode(t, e.btSend(btBundle(typ, entries...), nil), typ+"-response", len(entries))
			btWantStatuses(t, b, want...)
			for _, i := range []int{0, 2, 4} {
				var p struct{ ResourceType, ID string }
				if err := json.Unmarshal(b.Entry[i].Resource, &p); err != nil || p.ResourceType != "Patient" || p.ID != id {
					t.Fatalf("entry %d resource %s, want Patient/%s", i, b.Entry[i].Resource, id)
				}
				if b.Entry[i].Response.Etag != `W/"1"` {
					t.Fatalf("entry %d etag %q, want W/\"1\"", i, b.Entry[i].Response.Etag)
				}
			}
			var set struct {
				ResourceType, Type string
				Total              int
			}
			if err := json.Unmarshal(b.Entry[1].Resource, &set); err != nil || set.ResourceType != "Bundle" || set.Type != "searchset" || set.Total != 1 {
				t.Fatalf("search entry resource %s, want a searchset with 1 match", b.Entry[1].Resource)
			}
			if len(b.Entry[3].Resource) != 0 {
				t.Fatalf("304 entry has a resource: %s", b.Entry[3].Resource)
			}
			if typ == "batch" {
				btWantOutcomeJSON(t, b.Entry[5].Response.Outcome, "")
			}
		})
	}
}

// TestBundleEntriesUseTheClientsBase: behind a proxy that terminates TLS,
// the URLs of write entries and of read entries name the https base alike.
func TestBundleEntriesUseTheClientsBase(t *testing.T) {
	e := newEnv(t)
	r := e.btSend(btBundle("batch", btOp("PUT", "Patient/base-1", `{"resourceType":"Patient","id":"base-1"}`), btOp("GET", "Patient?_id=base-1", "")),
		map[string]string{"X-Forwarded-Proto": "https"})
	b := btDecode(t, r, "batch-response", 2)
	btWantStatuses(t, b, 201, 200)
	base := "https://" + e.tenant + ".localhost/fhir/r4/"
	if b.Entry[0].FullURL != base+"Patient/base-1" || !strings.HasPrefix(b.Entry[0].Response.Location, base) {
		t.Fatalf("write entry %s %s, want under %s", b.Entry[0].FullURL, b.Entry[0].Response.Location, base)
	}
	var set struct {
		Link  []struct{ URL string }
		Entry []struct{ FullURL string }
	}
	if err := json.Unmarshal(b.Entry[1].Resource, &set); err != nil || len(set.Entry) != 1 || len(set.Link) == 0 {
		t.Fatalf("searchset %s", b.Entry[1].Resource)
	}
	if set.Entry[0].FullURL != base+"Patient/base-1" || !strings.HasPrefix(set.Link[0].URL, base) {
		t.Fatalf("searchset fullUrl %s link %s, want under %s", set.Entry[0].FullURL, set.Link[0].URL, base)
	}
}

// TestBundlePreferReturn: response entries carry the resource only for
// Prefer: return=representation, an OperationOutcome for
// return=OperationOutcome and neither by default.
func TestBundlePreferReturn(t *testing.T) {
	e := newEnv(t)
	for _, typ := range []string{"transaction", "batch"} {
		for _, prefer := range []string{"", "return=minimal", "return=representation", "return=OperationOutcome"} {
			t.Run(typ+" "+prefer, func(t *testing.T) {
				var header map[string]string
				if prefer != "" {
					header = map[string]string{"Prefer": prefer}
				}
				r := e.btSend(btBundle(typ, btOp("POST", "Patient", btPatient("Prefer", "")), btOp("PUT", "Patient/prefer-"+typ, `{"resourceType":"Patient","id":"prefer-`+typ+`"}`)), header)
				b := btDecode(t, r, typ+"-response", 2)
				for i, en := range b.Entry {
					var res struct {
						ResourceType, ID string
						Meta             struct{ VersionID string }
					}
					switch prefer {
					case "return=representation":
						if err := json.Unmarshal(en.Resource, &res); err != nil || "Patient/"+res.ID != en.ref(t) || res.Meta.VersionID == "" {
							t.Fatalf("entry %d resource %s, want the stored %s", i, en.Resource, en.ref(t))
						}
					case "return=OperationOutcome":
						btWantOutcomeJSON(t, en.Response.Outcome, "")
						fallthrough
					default:
						if len(en.Resource) != 0 {
							t.Fatalf("entry %d has a resource: %s", i, en.Resource)
						}
					}
				}
			})
		}
	}
}

// TestTransactionPatchEntries: PATCH entries carry a JSON Patch in a
// Binary; the patched resource is validated and stored as a new version.
func TestTransactionPatchEntries(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true,"identifier":[{"system":"`+btSys+`","value":"pa"}],"name":[{"family":"Before"}]}`)
	oid := e.create("Observation", `{"resourceType":"Observation","status":"preliminary","code":{"text":"weight"},"valueQuantity":{"value":1.50,"unit":"kg"}}`)
	b := e.btTransaction(t,
		btOp("PATCH", "Patient/"+id, btPatch(`[{"op":"replace","path":"/active","value":false},{"op":"replace","path":"/name/0/family","value":"After"}]`)),
		btOp("PATCH", "Observation/"+oid, btPatch(`[{"op":"test","path":"/status","value":"preliminary"},{"op":"replace","path":"/status","value":"final"}]`)),
		btOp("POST", "Observation", btObservation("new", "Patient/"+id)),
	)
	btWantStatuses(t, b, 200, 200, 201)
	for i := range 2 {
		if b.Entry[i].Response.Etag != `W/"2"` || !strings.HasSuffix(b.Entry[i].Response.Location, "/_history/2") {
			t.Fatalf("entry %d: %+v, want version 2", i, b.Entry[i].Response)
		}
	}
	p := btRead(t, e, "Patient/"+id)
	if p["active"] != false || btFamily(t, p) != "After" {
		t.Fatalf("patched Patient %v", p)
	}
	t.Run("decimals keep their text", func(t *testing.T) {
		r := e.get("/Observation/" + oid)
		if !bytes.Contains(r.Body, []byte(`"value":1.50`)) || !bytes.Contains(r.Body, []byte(`"status":"final"`)) {
			t.Fatalf("patched Observation %s, want status final and value 1.50", r.Body)
		}
	})
	t.Run("a conditional patch patches the match", func(t *testing.T) {
		b := e.btTransaction(t, btOp("PATCH", "Patient?"+btCrit("pa"), btPatch(`[{"op":"add","path":"/gender","value":"female"}]`)))
		btWantStatuses(t, b, 200)
		if b.Entry[0].ref(t) != "Patient/"+id || b.Entry[0].Response.Etag != `W/"3"` {
			t.Fatalf("response %+v, want version 3 of Patient/%s", b.Entry[0].Response, id)
		}
		if g := btRead(t, e, "Patient/"+id)["gender"]; g != "female" {
			t.Fatalf("gender %v", g)
		}
	})
	t.Run("history records the patches as updates", func(t *testing.T) {
		h := e.histGet("/Patient/" + id + "/_history")
		if got := strings.Join(h.keys(t), " "); got != fmt.Sprintf("Patient/%s/3 Patient/%s/2 Patient/%s/1", id, id, id) {
			t.Fatalf("history %s", got)
		}
		if h.Entry[0].Request.Method != "PUT" {
			t.Fatalf("a patch is in history as %s, want PUT", h.Entry[0].Request.Method)
		}
	})
}

// TestBundleEntryLimit: a Bundle with more entries than MaxBundleEntries is
// 413 and stores nothing.
func TestBundleEntryLimit(t *testing.T) {
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.MaxBundleEntries = 3 })
	entries := func(n int) []btEntry {
		out := make([]btEntry, n)
		for i := range out {
			out[i] = btOp("POST", "Patient", btPatient(fmt.Sprint("Limit", i), ""))
		}
		return out
	}
	for _, typ := range []string{"transaction", "batch"} {
		t.Run(typ+" over the limit is 413", func(t *testing.T) {
			wantOutcome(t, e.btSend(btBundle(typ, entries(4)...), nil), http.StatusRequestEntityTooLarge, "Bundle.entry")
			if n := btTotal(t, e, "/_history"); n != 0 {
				t.Fatalf("%d versions stored", n)
			}
		})
	}
	for _, typ := range []string{"transaction", "batch"} {
		t.Run(typ+" at the limit is processed", func(t *testing.T) {
			b := btDecode(t, e.btSend(btBundle(typ, entries(3)...), nil), typ+"-response", 3)
			btWantStatuses(t, b, 201, 201, 201)
		})
	}
}

// TestBatchEntriesSucceedOrFailAlone: each batch entry is processed on its
// own; a failed entry answers its status and an OperationOutcome and the
// others are processed as if it were not there.
func TestBatchEntriesSucceedOrFailAlone(t *testing.T) {
	e := newEnv(t)
	doomed := e.create("Patient", btPatient("Doomed", ""))
	existing := e.create("Patient", btPatient("Existing", "batch-existing"))
	const urn = "urn:uuid:2b8e4c1d-9f3a-4e6b-8c7d-0000000000f1"
	entries := []btEntry{
		btOp("POST", "Patient", btPatient("Valid", "batch-valid")).full(urn),
		btOp("POST", "Patient", `{"resourceType":"Patient","gender":"yes"}`),
		btOp("GET", "Patient/no-such-patient", ""),
		{Resource: json.RawMessage(btPatient("NoRequest", ""))},
		btOp("PUT", "Patient/batch-put", `{"resourceType":"Patient","id":"batch-put"}`),
		btOp("POST", "Observation", btObservation("depends", urn)),
		btOp("DELETE", "Patient/"+doomed, ""),
		btOp("POST", "Patient", btPatient("Existing", "batch-existing")).ifNoneExist(btCrit("batch-existing")),
		btOp("PUT", "Patient/"+existing, `{"resourceType":"Patient","id":"`+existing+`"}`).ifMatch(`W/"7"`),
		btOp("POST", "Foo", `{"resourceType":"Foo"}`),
		btOp("GET", "Patient?"+btCrit("batch-valid"), ""),
	}
	b := btDecode(t, e.btSend(btBundle("batch", entries...), nil), "batch-response", len(entries))
	btWantStatuses(t, b, 201, 422, 404, 400, 201, 400, 204, 200, 412, 400, 200)

	t.Run("failed entries carry an OperationOutcome", func(t *testing.T) {
		for i, expr := range map[int]string{1: "Bundle.entry[1].resource.gender", 2: "", 3: "Bundle.entry[3].request", 5: "Bundle.entry[5].resource.subject.reference", 8: "", 9: "Bundle.entry[9].request.url"} {
			btWantOutcomeJSON(t, b.Entry[i].Response.Outcome, expr)
			if b.Entry[i].Response.Location != "" || len(b.Entry[i].Resource) != 0 {
				t.Fatalf("failed entry %d has a location or resource: %+v", i, b.Entry[i])
			}
		}
	})
	t.Run("the successful entries are stored", func(t *testing.T) {
		btRead(t, e, b.Entry[0].ref(t))
		btRead(t, e, "Patient/batch-put")
		wantOutcome(t, e.get("/Patient/"+doomed), http.StatusGone, "")
		if b.Entry[7].ref(t) != "Patient/"+existing {
			t.Fatalf("conditional create answered %s, want the match Patient/%s", b.Entry[7].ref(t), existing)
		}
		if n := btTotal(t, e, "/Patient/"+existing+"/_history"); n != 1 {
			t.Fatalf("the existing Patient has %d versions, want 1", n)
		}
	})
	t.Run("a read sees the batch's writes", func(t *testing.T) {
		var set struct{ Total int }
		if err := json.Unmarshal(b.Entry[10].Resource, &set); err != nil || set.Total != 1 {
			t.Fatalf("search entry %s, want 1 match", b.Entry[10].Resource)
		}
	})
	t.Run("nothing of the failed entries is stored", func(t *testing.T) {
		if n := btTotal(t, e, "/Observation"); n != 0 {
			t.Fatalf("%d Observations", n)
		}
		// doomed, existing, entry 0, batch-put and the deletion of doomed.
		if n := btTotal(t, e, "/_history"); n != 5 {
			t.Fatalf("%d versions, want 5", n)
		}
	})
}
