package fhirxml_test

import (
	"strings"
	"testing"

	"fhirstore/fhirschema/fhirxml"
)

func TestCheckNarratives(t *testing.T) {
	cases := []struct {
		name, json, at string
	}{
		{"a well-formed div", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>ok</p></div>"}}`, ""},
		{"no narrative", `{"resourceType":"Patient","name":[{"family":"div"}]}`, ""},
		{"an unclosed element", `{"resourceType":"Patient","text":{"status":"generated","div":"<div><p>open</div>"}}`, "Patient.text.div"},
		{"not a div", `{"resourceType":"Patient","text":{"status":"generated","div":"<span>x</span>"}}`, "Patient.text.div"},
		{"text after the div", `{"resourceType":"Patient","text":{"status":"generated","div":"<div>x</div>tail"}}`, "Patient.text.div"},
		{"another namespace", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"urn:x\">x</div>"}}`, "Patient.text.div"},
		{"a bad div in a contained resource", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","text":{"status":"generated","div":"<div><b></div>"}}]}`, "Patient.contained[0].text.div"},
		{"a bad div in a Bundle entry", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","text":{"status":"generated","div":"<div>"}}}]}`, "Bundle.entry[0].resource.text.div"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at, err := fhirxml.CheckNarratives([]byte(tc.json))
			if at != tc.at || (err != nil) != (tc.at != "") {
				t.Fatalf("got %q, %v; want %q", at, err, tc.at)
			}
			if err != nil && !strings.Contains(err.Error(), "XHTML") {
				t.Fatalf("error %q does not say what is wrong", err)
			}
		})
	}
}
