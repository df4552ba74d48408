package fhirpatch_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"fhirstore/fhirschema/fhirpatch"
	"fhirstore/fhirschema/fhirxml"
)

// patchCase is one case of the official FHIRPath Patch suite.
type patchCase struct {
	Name                string
	Input, Diff, Output string // XML as written
	Error               bool
}

var (
	caseRE = regexp.MustCompile(`(?s)<case name="([^"]*)"[^>]*>(.*?)</case>`)
	partRE = map[string]*regexp.Regexp{}
)

func part(body, tag string) string {
	re := partRE[tag]
	if re == nil {
		re = regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`)
		partRE[tag] = re
	}
	m := re.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// suiteCases reads the official cases.
func suiteCases(t testing.TB) []patchCase {
	data, err := os.ReadFile("../../testdata/fhirpatch/fhir-patch-tests.xml")
	if err != nil {
		t.Fatal(err)
	}
	var out []patchCase
	for _, m := range caseRE.FindAllStringSubmatch(string(data), -1) {
		out = append(out, patchCase{Name: m[1], Input: part(m[2], "input"), Diff: part(m[2], "diff"), Output: part(m[2], "output"), Error: strings.Contains(m[2], "<error")})
	}
	return out
}

func toJSON(t *testing.T, xml string) []byte {
	t.Helper()
	out, err := fhirxml.ToJSON([]byte(xml))
	if err != nil {
		t.Fatalf("convert %.80s: %v", xml, err)
	}
	return out
}

// decode decodes a resource; its narrative is kept as XHTML reads: the
// line breaks of an XML document are LF once parsed, &quot; in text is a
// quote (the converter keeps the narrative's markup as written).
func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if text, ok := m["text"].(map[string]any); ok {
		if div, ok := text["div"].(string); ok {
			text["div"] = strings.NewReplacer("\r\n", "\n", "&quot;", `"`).Replace(div)
		}
	}
	return m
}

func TestOfficialFHIRPathPatchCases(t *testing.T) {
	cases := suiteCases(t)
	if len(cases) != 33 {
		t.Fatalf("read %d cases, want 33", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := fhirpatch.Apply(context.Background(), toJSON(t, c.Input), toJSON(t, c.Diff))
			if c.Error {
				if err == nil {
					t.Fatalf("applied, want an error; got %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := decode(t, toJSON(t, c.Output)); !reflect.DeepEqual(decode(t, got), want) {
				t.Errorf("got  %s\nwant %s", got, toJSON(t, c.Output))
			}
		})
	}
}
