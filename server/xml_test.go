package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"fhirstore/fhirschema/fhirxml"
)

// Helpers of this file carry the prefix xml.

const xmlNS = ` xmlns="http://hl7.org/fhir"`

// xmlType is the Content-Type of every XML answer.
const xmlType = "application/fhir+xml; charset=utf-8"

// xmlAsJSON converts an XML answer back to JSON, failing the test unless
// it is FHIR XML with the expected root element.
func xmlAsJSON(t testing.TB, r *response, root string) map[string]any {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != xmlType {
		t.Fatalf("Content-Type %q, want %q (%d): %s", ct, xmlType, r.Status, r.Body)
	}
	if !bytes.Contains(r.Body, []byte("<"+root+xmlNS)) {
		t.Fatalf("no <%s xmlns=\"http://hl7.org/fhir\"> root: %s", root, r.Body)
	}
	j, err := fhirxml.ToJSON(r.Body)
	if err != nil {
		t.Fatalf("answer is not FHIR XML: %v\n%s", err, r.Body)
	}
	return (&response{Status: r.Status, Body: j}).JSON(t)
}

// xmlDo sends a request with an XML body and extra headers.
func xmlDo(e *env, method, path, body string, header ...string) *response {
	e.t.Helper()
	h := map[string]string{}
	if body != "" {
		h["Content-Type"] = "application/fhir+xml"
	}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return e.do(request{Method: method, Path: path, Body: body, Header: h})
}

func TestResponsesAreXMLWhenTheClientAsksForXML(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Xml","given":["Xa"]}],"birthDate":"1970-01-01","_birthDate":{"id":"b1"}}`)
	asJSON := e.get("/Patient/" + id).JSON(t)
	cases := []struct {
		name, path, accept, root string
		status                   int
	}{
		{"read by _format=xml", "/Patient/" + id + "?_format=xml", "", "Patient", 200},
		{"read by _format=text/xml", "/Patient/" + id + "?_format=text/xml", "", "Patient", 200},
		{"read by _format=application/xml", "/Patient/" + id + "?_format=application/xml", "", "Patient", 200},
		{"read by _format=application/fhir+xml", "/Patient/" + id + "?_format=application/fhir%2Bxml", "", "Patient", 200},
		{"read by _format=application/fhir+xml, + unescaped", "/Patient/" + id + "?_format=application/fhir+xml", "", "Patient", 200},
		{"read by Accept application/fhir+xml", "/Patient/" + id, "application/fhir+xml", "Patient", 200},
		{"read by Accept application/xml", "/Patient/" + id, "application/xml", "Patient", 200},
		{"read by a browser's Accept (xml above */*)", "/Patient/" + id, "text/html,application/xml;q=0.9,*/*;q=0.8", "Patient", 200},
		{"_format wins over Accept", "/Patient/" + id + "?_format=xml", "application/fhir+json", "Patient", 200},
		{"vread", "/Patient/" + id + "/_history/1?_format=xml", "", "Patient", 200},
		{"search", "/Patient?_id=" + id, "application/fhir+xml", "Bundle", 200},
		{"history", "/Patient/" + id + "/_history?_format=xml", "", "Bundle", 200},
		{"metadata", "/metadata?_format=xml", "", "CapabilityStatement", 200},
		{"an error is an XML OperationOutcome", "/Patient/nope?_format=xml", "", "OperationOutcome", 404},
		{"pretty XML", "/Patient/" + id + "?_format=xml&_pretty=true", "", "Patient", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := xmlDo(e, http.MethodGet, c.path, "", "Accept", c.accept)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			got := xmlAsJSON(t, r, c.root)
			if c.root == "Patient" && !reflect.DeepEqual(got, asJSON) {
				t.Fatalf("XML says %v\nJSON says %v", got, asJSON)
			}
			if c.root == "Bundle" && got["total"] != json.Number("1") {
				t.Fatalf("Bundle.total = %v, want 1: %s", got["total"], r.Body)
			}
		})
	}
	if r := e.get("/Patient/" + id + "?_format=xml&_pretty=true"); !bytes.Contains(r.Body, []byte("\n  <id value=\""+id+"\"/>")) {
		t.Fatalf("_pretty=true does not indent XML: %s", r.Body)
	}
	if r := xmlDo(e, http.MethodGet, "/Patient/"+id+"?_format=xml", "", "If-None-Match", `W/"1"`); r.Status != http.StatusNotModified || len(r.Body) != 0 {
		t.Fatalf("a conditional read in XML: %d %q, want 304 without a body", r.Status, r.Body)
	}
	if r := e.get("/Patient/" + id + "?_format=xml"); !bytes.Contains(r.Body, []byte(`<birthDate id="b1" value="1970-01-01"/>`)) {
		t.Fatalf("primitive id is not an attribute beside value: %s", r.Body)
	}
}

func TestJSONStaysTheDefault(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true}`)
	cases := []struct{ name, path, accept, contentType string }{
		{"no Accept", "/Patient/" + id, "", "application/fhir+json; charset=utf-8"},
		{"Accept */*", "/Patient/" + id, "*/*", "application/fhir+json; charset=utf-8"},
		{"JSON preferred by quality", "/Patient/" + id, "application/fhir+xml;q=0.5, application/fhir+json", "application/fhir+json; charset=utf-8"},
		{"XML refused by q=0", "/Patient/" + id, "application/fhir+xml;q=0, */*", "application/fhir+json; charset=utf-8"},
		{"REST errors stay JSON", "/api/v1/nothing", "application/fhir+xml", "application/json; charset=utf-8"},
		{"SMART discovery is no resource and stays JSON", "/.well-known/smart-configuration", "application/fhir+xml", "application/fhir+json; charset=utf-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := xmlDo(e, http.MethodGet, c.path, "", "Accept", c.accept)
			if ct := r.Header.Get("Content-Type"); ct != c.contentType {
				t.Fatalf("Content-Type %q, want %q: %s", ct, c.contentType, r.Body)
			}
			var v map[string]any
			if err := json.Unmarshal(r.Body, &v); err != nil {
				t.Fatalf("not JSON: %s", r.Body)
			}
		})
	}
	r := xmlDo(e, http.MethodGet, "/Patient/"+id+"?_format=turtle", "", "Accept", "application/fhir+xml")
	wantOutcome(t, r, http.StatusNotAcceptable, "_format")
}

func TestResourcesCanBeWrittenInXML(t *testing.T) {
	e := newEnv(t)
	r := xmlDo(e, http.MethodPost, "/Patient", `<?xml version="1.0" encoding="UTF-8"?>
<Patient xmlns="http://hl7.org/fhir">
  <identifier><system value="urn:sys"/><value value="42"/></identifier>
  <active value="true"/>
  <name><family value="FromXml"/><given value="A"/><given value="B"/></name>
  <birthDate value="1980-02-03"><extension url="http://hl7.org/fhir/StructureDefinition/patient-birthTime"><valueDateTime value="1980-02-03T04:05:06Z"/></extension></birthDate>
</Patient>`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	created := r.JSON(t)
	id := created["id"].(string)
	if created["active"] != true || created["birthDate"] != "1980-02-03" {
		t.Fatalf("stored JSON lost types or values: %s", r.Body)
	}
	if _, ok := created["_birthDate"].(map[string]any)["extension"]; !ok {
		t.Fatalf("primitive extension lost: %s", r.Body)
	}

	r = xmlDo(e, http.MethodPut, "/Patient/"+id, `<Patient`+xmlNS+`><id value="`+id+`"/><active value="false"/><name><family value="Updated"/></name></Patient>`, "Accept", "application/fhir+xml")
	if r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	if got := xmlAsJSON(t, r, "Patient"); got["active"] != false {
		t.Fatalf("update answered %v", got)
	}

	r = xmlDo(e, http.MethodPut, "/Patient?identifier=urn:sys|43", `<Patient`+xmlNS+`><identifier><system value="urn:sys"/><value value="43"/></identifier></Patient>`)
	if r.Status != http.StatusCreated {
		t.Fatalf("conditional update: %d %s", r.Status, r.Body)
	}

	r = xmlDo(e, http.MethodPost, "/Patient/$validate", `<Patient`+xmlNS+`><gender value="male"/></Patient>`, "Accept", "application/fhir+xml")
	if r.Status != http.StatusOK {
		t.Fatalf("$validate: %d %s", r.Status, r.Body)
	}
	xmlAsJSON(t, r, "OperationOutcome")

	r = xmlDo(e, http.MethodPost, "/Patient/$validate", `<Patient`+xmlNS+`><gender value="boy"/></Patient>`)
	wantOutcome(t, r, http.StatusUnprocessableEntity, "gender")

	if n := e2eHistoryTotal(t, e, "/Patient/_history"); n != 3 {
		t.Fatalf("history holds %d versions, want 3 (create, update, conditional create)", n)
	}
}

func TestBundlesCanBePostedAndAnsweredInXML(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true}`)
	tx := `<Bundle` + xmlNS + `><type value="transaction"/>
<entry><fullUrl value="urn:uuid:6f4fd8d0-0c39-4b2e-9d5f-0f3d2f3c4a11"/><resource><Patient><name><family value="InTx"/></name></Patient></resource>
  <request><method value="POST"/><url value="Patient"/></request></entry>
<entry><resource><Observation><status value="final"/><code><text value="weight"/></code>
  <subject><reference value="urn:uuid:6f4fd8d0-0c39-4b2e-9d5f-0f3d2f3c4a11"/></subject>
  <valueQuantity><value value="72.50"/><unit value="kg"/></valueQuantity></Observation></resource>
  <request><method value="POST"/><url value="Observation"/></request></entry>
</Bundle>`
	r := xmlDo(e, http.MethodPost, "", tx, "Accept", "application/fhir+xml", "Prefer", "return=representation")
	if r.Status != http.StatusOK {
		t.Fatalf("transaction: %d %s", r.Status, r.Body)
	}
	out := xmlAsJSON(t, r, "Bundle")
	if out["type"] != "transaction-response" || len(out["entry"].([]any)) != 2 {
		t.Fatalf("transaction-response: %s", r.Body)
	}
	if !bytes.Contains(r.Body, []byte(`<value value="72.50"/>`)) {
		t.Fatalf("the decimal lost its text on the way through: %s", r.Body)
	}

	batch := `<Bundle` + xmlNS + `><type value="batch"/>
<entry><request><method value="GET"/><url value="Patient/` + id + `?_format=xml"/></request></entry>
<entry><request><method value="GET"/><url value="Patient/nope"/></request></entry>
</Bundle>`
	r = xmlDo(e, http.MethodPost, "", batch, "Accept", "application/fhir+xml")
	out = xmlAsJSON(t, r, "Bundle")
	entries := out["entry"].([]any)
	res, _ := entries[0].(map[string]any)["resource"].(map[string]any)
	if res["id"] != id {
		t.Fatalf("a GET entry asking for XML must still be read as JSON inside: %s", r.Body)
	}
	outcome, _ := entries[1].(map[string]any)["response"].(map[string]any)["outcome"].(map[string]any)
	if outcome["resourceType"] != "OperationOutcome" {
		t.Fatalf("a failed GET entry carries its OperationOutcome: %s", r.Body)
	}
}

func TestBadXMLIsRejectedAndNothingIsStored(t *testing.T) {
	e := newEnv(t)
	deep := `<Patient` + xmlNS + `>` + strings.Repeat(`<extension url="u">`, 120) + strings.Repeat(`</extension>`, 120) + `</Patient>`
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">]><Patient` + xmlNS + `><name><family value="&lol2;"/></name></Patient>`
	cases := []struct {
		name, method, path, body string
		status                   int
		expr                     string
	}{
		{"malformed", "POST", "/Patient", `<Patient` + xmlNS + `><name><family value="x"></name></Patient>`, 400, "Patient.name[0]"},
		{"wrong namespace", "POST", "/Patient", `<Patient xmlns="http://hl7.org/fhir/r5"><active value="true"/></Patient>`, 400, "Patient"},
		{"no namespace", "POST", "/Patient", `<Patient><active value="true"/></Patient>`, 400, "Patient"},
		{"unknown element", "POST", "/Patient", `<Patient` + xmlNS + `><nickname value="x"/></Patient>`, 400, "Patient.nickname"},
		{"unknown attribute", "POST", "/Patient", `<Patient` + xmlNS + `><active value="true" bogus="1"/></Patient>`, 400, "Patient.active"},
		{"DOCTYPE", "POST", "/Patient", `<!DOCTYPE Patient><Patient` + xmlNS + `/>`, 400, ""},
		{"external entity", "POST", "/Patient", `<!DOCTYPE p [<!ENTITY x SYSTEM "file:///etc/passwd">]><Patient` + xmlNS + `><name><family value="&x;"/></name></Patient>`, 400, ""},
		{"undeclared entity", "POST", "/Patient", `<Patient` + xmlNS + `><name><family value="&nbsp;"/></name></Patient>`, 400, "Patient.name[0]"},
		{"billion laughs", "POST", "/Patient", laughs, 400, ""},
		{"deep nesting", "POST", "/Patient", deep, 400, "Patient.extension[0].extension[0]"},
		{"text instead of value attribute", "POST", "/Patient", `<Patient` + xmlNS + `><gender>male</gender></Patient>`, 400, "Patient.gender"},
		{"boolean that is not one", "POST", "/Patient", `<Patient` + xmlNS + `><active value="yes"/></Patient>`, 400, "Patient.active"},
		{"type mismatching the URL", "POST", "/Patient", `<Observation` + xmlNS + `><status value="final"/><code><text value="x"/></code></Observation>`, 400, "resourceType"},
		{"invalid code (valid XML)", "POST", "/Patient", `<Patient` + xmlNS + `><gender value="boy"/></Patient>`, 422, "gender"},
		{"bad XML on update", "PUT", "/Patient/p1", `<Patient` + xmlNS + `><id value="p1"/><foo/></Patient>`, 400, "Patient.foo"},
		{"bad XML in a transaction", "POST", "", `<Bundle` + xmlNS + `><type value="transaction"/><entry><resource><Patient><foo/></Patient></resource><request><method value="POST"/><url value="Patient"/></request></entry></Bundle>`, 400, "Bundle.entry[0].resource.foo"},
		{"bad XML on $validate", "POST", "/Patient/$validate", `<Patient` + xmlNS + `><foo/></Patient>`, 400, "Patient.foo"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantOutcome(t, xmlDo(e, c.method, c.path, c.body), c.status, c.expr)
		})
	}
	if n := e2eHistoryTotal(t, e, "/_history"); n != 0 {
		t.Fatalf("bad XML stored %d versions", n)
	}
}

// TestLenientElementsAreLeftOutOfXML: an element kept by lenient handling
// has no XML form; the XML answer leaves it out and says so in a Warning.
func TestLenientElementsAreLeftOutOfXML(t *testing.T) {
	e := newEnv(t)
	r := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","nickname":"Bob","name":[{"family":"Lenient"}]}`, Header: map[string]string{"Prefer": "handling=lenient"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("lenient create: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	x := e.get("/Patient/" + id + "?_format=xml")
	if x.Status != http.StatusOK {
		t.Fatalf("XML read: %d %s", x.Status, x.Body)
	}
	got := xmlAsJSON(t, x, "Patient")
	if _, ok := got["nickname"]; ok || got["name"] == nil {
		t.Fatalf("XML read: %v", got)
	}
	if w := x.Header.Get("Warning"); !strings.Contains(w, "Patient.nickname") {
		t.Fatalf("Warning %q does not name the element left out", w)
	}
}
