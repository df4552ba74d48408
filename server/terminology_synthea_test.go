package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

const snomed = "http://snomed.info/sct"

// TestValueSetSearchesOverSynthea stores a value set of three SNOMED codes
// of the Synthea Conditions (and a code system fragment putting two of them
// under a made-up parent) and checks :in, :not-in, :below and _filter
// against what the data says.
func TestValueSetSearchesOverSynthea(t *testing.T) {
	d := synLoad(t)
	var codes []string
	for _, r := range d.res["Condition"] {
		for _, c := range synCodes(r, "code") {
			if c.system == snomed && !slices.Contains(codes, c.code) {
				codes = append(codes, c.code)
			}
		}
	}
	if len(codes) < 4 {
		t.Fatalf("the Synthea Conditions have %d SNOMED codes, want at least 4", len(codes))
	}
	picked := codes[:3]
	var concepts, children []string
	for _, c := range picked {
		concepts = append(concepts, fmt.Sprintf(`{"code":%q}`, c))
	}
	for _, c := range picked[:2] {
		children = append(children, fmt.Sprintf(`{"code":%q}`, c))
	}
	for path, body := range map[string]string{
		"/ValueSet/syn-three": `{"resourceType":"ValueSet","id":"syn-three","url":"http://example.org/fhir/ValueSet/syn-three","status":"active",
			"compose":{"include":[{"system":"` + snomed + `","concept":[` + strings.Join(concepts, ",") + `]}]}}`,
		"/CodeSystem/syn-snomed-fragment": `{"resourceType":"CodeSystem","id":"syn-snomed-fragment","url":"` + snomed + `","status":"active","content":"fragment",
			"concept":[{"code":"syn-parent","concept":[` + strings.Join(children, ",") + `]}]}`,
	} {
		if r := d.e.put(path, body); r.Status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", path, r.Status, r.Body)
		}
	}
	var tokens []string
	for _, c := range picked {
		tokens = append(tokens, snomed+"|"+c)
	}
	in := d.token("Condition", strings.Join(tokens, ","), "code")
	below := d.token("Condition", strings.Join(tokens[:2], ","), "code")
	q := url.QueryEscape
	tests := []struct {
		name, query string
		want        []string
	}{
		{":in", "code:in=http://example.org/fhir/ValueSet/syn-three", in},
		{":not-in", "code:not-in=ValueSet/syn-three", d.not("Condition", in)},
		{":below a parent in a stored fragment", "code:below=" + q(snomed+"|syn-parent"), below},
		{"_filter in", "_filter=" + q("code in http://example.org/fhir/ValueSet/syn-three"), in},
		{"_filter ni or a code", "_filter=" + q("code ni ValueSet/syn-three or code eq "+tokens[0]), d.not("Condition", synAnd(in, d.not("Condition", d.token("Condition", tokens[0], "code"))))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, d.e.get("/Condition?_count=100&"+tt.query))
			want := slices.Clone(tt.want)
			slices.Sort(got)
			slices.Sort(want)
			if len(want) == 0 || len(want) > 100 {
				t.Fatalf("the data gives %d matches; pick other codes", len(want))
			}
			if !slices.Equal(got, want) {
				t.Errorf("Condition?%s = %v, want %v", tt.query, got, want)
			}
		})
	}
}
