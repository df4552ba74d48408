package search

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// obj decodes a JSON object the way resources are decoded (UseNumber).
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFold(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Chalmers", "chalmers"},
		{"  du   Marché\t", "du marche"},
		{"Bénédicte", "benedicte"},
		{"ÅNGSTRÖM Çağlar", "angstrom caglar"},
		{"Ñandú", "nandu"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNameAndAddressStrings(t *testing.T) {
	name := obj(t, `{"use":"official","family":"Chalmers","given":["Peter","James"],"prefix":["Mr"],"suffix":["III"],"text":"Peter Chalmers","period":{"end":"2002"}}`)
	if got, want := nameStrings(name), []string{"Chalmers", "Peter", "James", "Mr", "III", "Peter Chalmers"}; !reflect.DeepEqual(got, want) {
		t.Errorf("nameStrings = %q, want %q", got, want)
	}
	addr := obj(t, `{"use":"home","line":["534 Erewhon St","Unit 2"],"city":"PleasantVille","district":"Rainbow","state":"Vic","postalCode":"3999","country":"AU","text":"534 Erewhon St"}`)
	if got, want := addressStrings(addr), []string{"534 Erewhon St", "Unit 2", "PleasantVille", "Rainbow", "Vic", "3999", "AU", "534 Erewhon St"}; !reflect.DeepEqual(got, want) {
		t.Errorf("addressStrings = %q, want %q", got, want)
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		name, json, typ string
		want            tokens
	}{
		{"coding", `{"system":"http://loinc.org","code":"29463-7","display":"Body Weight"}`, "Coding",
			tokens{forms: []string{"http://loinc.org|29463-7", "29463-7"}, text: []string{"body weight"}, codes: []string{"29463-7"}}},
		{"coding without system", `{"code":"x"}`, "", tokens{forms: []string{"x", "|x"}, codes: []string{"x"}}},
		{"coding without code", `{"system":"http://s"}`, "Coding", tokens{forms: []string{"http://s|"}}},
		{"concept", `{"coding":[{"system":"s","code":"a"},{"code":"b","display":"Bé"}],"text":"Some  Text"}`, "",
			tokens{forms: []string{"s|a", "a", "b", "|b"}, text: []string{"some text", "be"}, codes: []string{"a", "b"}}},
		{"concept with text only", `{"text":"Free"}`, "", tokens{text: []string{"free"}}},
		{"identifier", `{"use":"usual","type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"MR"}],"text":"MRN"},"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345"}`, "",
			tokens{forms: []string{"urn:oid:1.2.36.146.595.217.0.1|12345", "12345"}, text: []string{"mrn"},
				ofType: []string{"http://terminology.hl7.org/CodeSystem/v2-0203|MR|12345"}, codes: []string{"12345"}}},
		{"identifier without system", `{"value":"A1"}`, "Identifier", tokens{forms: []string{"A1", "|A1"}, codes: []string{"A1"}}},
		{"contact point", `{"system":"phone","value":"(03) 5555 6473","use":"work"}`, "",
			tokens{forms: []string{"(03) 5555 6473", "|(03) 5555 6473"}, codes: []string{"(03) 5555 6473"}}},
		{"contact point by rank", `{"value":"x@y","rank":1}`, "", tokens{forms: []string{"x@y", "|x@y"}, codes: []string{"x@y"}}},
		{"contact point typed", `{"system":"email","value":"x@y"}`, "ContactPoint", tokens{forms: []string{"x@y", "|x@y"}, codes: []string{"x@y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := elementTokens(obj(t, tt.json), tt.typ); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestPrimitiveToken(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{{"male", "male"}, {true, "true"}, {false, "false"}, {json.Number("3"), "3"}, {nil, ""}}
	for _, tt := range tests {
		if got := primitiveToken(tt.in); got != tt.want {
			t.Errorf("primitiveToken(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReferenceForms(t *testing.T) {
	isType := func(s string) bool { return s == "Patient" || s == "Organization" }
	tests := []struct {
		in   string
		want []string
	}{
		{"Patient/example", []string{"Patient/example", "example"}},
		{"Patient/example/_history/2", []string{"Patient/example", "example"}},
		{"http://fhir.example.org/r4/Patient/23", []string{"http://fhir.example.org/r4/Patient/23"}},
		{"http://x.org/fhir/Organization/1/_history/3", []string{"http://x.org/fhir/Organization/1/_history/3"}},
		{"urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a", []string{"urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a"}},
		{"#p1", nil},
		{"", nil},
		{"Unknown/1", []string{"Unknown/1"}},
	}
	for _, tt := range tests {
		if got := referenceForms(tt.in, isType); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("referenceForms(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalForms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"http://hl7.org/fhir/StructureDefinition/vitalsigns", []string{"http://hl7.org/fhir/StructureDefinition/vitalsigns"}},
		{"http://x.org/Questionnaire/q|2.0", []string{"http://x.org/Questionnaire/q|2.0", "http://x.org/Questionnaire/q"}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := canonicalForms(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("canonicalForms(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDateNormalizers(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	tests := []struct {
		name string
		got  []DateRange
		want []DateRange
	}{
		{"period", periodList(obj(t, `{"start":"2012-01-01","end":"2012-03-31T10:00:00Z"}`)),
			[]DateRange{{at("2012-01-01T00:00:00Z"), at("2012-03-31T10:00:00.999999999Z")}}},
		{"period open end", periodList(obj(t, `{"start":"2001-05-06"}`)), []DateRange{{at("2001-05-06T00:00:00Z"), MaxTime}}},
		{"period open start", periodList(obj(t, `{"end":"2002"}`)), []DateRange{{MinTime, at("2002-12-31T23:59:59.999999999Z")}}},
		{"empty period", periodList(obj(t, `{}`)), nil},
		{"timing", timingRanges(obj(t, `{"event":["2024-01-02","bad"],"repeat":{"boundsPeriod":{"start":"2024-02"}}}`)),
			[]DateRange{{at("2024-01-02T00:00:00Z"), at("2024-01-02T23:59:59.999999999Z")}, {at("2024-02-01T00:00:00Z"), MaxTime}}},
		{"timing: its outer limits", timingList(obj(t, `{"event":["2024-03-02","2024-01-02T10:00:00Z","bad"],"repeat":{"boundsPeriod":{"end":"2024-02"}}}`)),
			[]DateRange{{MinTime, at("2024-03-02T23:59:59.999999999Z")}}},
		{"timing of events", timingList(obj(t, `{"event":["2024-03-02","2024-01-02"]}`)),
			[]DateRange{{at("2024-01-02T00:00:00Z"), at("2024-03-02T23:59:59.999999999Z")}}},
		{"timing without dates", timingList(obj(t, `{"repeat":{"frequency":2}}`)), nil},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func timingList(m map[string]any) []DateRange {
	if r, ok := timingRange(m); ok {
		return []DateRange{r}
	}
	return nil
}

func periodList(m map[string]any) []DateRange {
	if r, ok := periodRange(m); ok {
		return []DateRange{r}
	}
	return nil
}

func TestParseNumberRange(t *testing.T) {
	tests := []struct {
		in     string
		lo, hi float64
	}{
		{"1.5", 1.45, 1.55},
		{"100", 99.5, 100.5},
		{"0", -0.5, 0.5},
		{"-2.25", -2.255, -2.245},
		{"0.001", 0.0005, 0.0015},
		{"1.5e3", 1450, 1550},
		{"1e-2", 0.005, 0.015},
	}
	for _, tt := range tests {
		lo, hi, err := ParseNumberRange(tt.in)
		if err != nil || lo != tt.lo || hi != tt.hi {
			t.Errorf("ParseNumberRange(%q) = [%v, %v) %v, want [%v, %v)", tt.in, lo, hi, err, tt.lo, tt.hi)
		}
	}
	for _, in := range []string{"", "abc", "1.", ".5", "1,5", "1e999"} {
		if _, _, err := ParseNumberRange(in); err == nil {
			t.Errorf("ParseNumberRange(%q) accepted", in)
		}
	}
}

func TestQuantityRange(t *testing.T) {
	tests := []struct {
		name, json, typ string
		want            numRange
		ok              bool
	}{
		{"quantity", `{"value":185,"unit":"lbs","system":"http://unitsofmeasure.org","code":"[lb_av]"}`, "Quantity",
			numRange{184.5, 185.5, "http://unitsofmeasure.org|[lb_av]", "lbs"}, true},
		{"unit only", `{"value":6.3,"unit":"mmol/l"}`, "", numRange{6.25, 6.35, "", "mmol/l"}, true},
		{"code without system", `{"value":2,"code":"mg"}`, "Age", numRange{1.5, 2.5, "|mg", ""}, true},
		{"comparator <", `{"value":5,"comparator":"<","system":"s","code":"c"}`, "", numRange{MinNumber, 5, "s|c", ""}, true},
		{"comparator >=", `{"value":5,"comparator":">="}`, "", numRange{5, MaxNumber, "", ""}, true},
		{"money", `{"value":12.50,"currency":"USD"}`, "Money", numRange{12.495, 12.505, "urn:iso:std:iso:4217|USD", "USD"}, true},
		{"range", `{"low":{"value":1,"unit":"kg"},"high":{"value":2.5,"unit":"kg"}}`, "Range", numRange{0.5, 2.55, "", "kg"}, true},
		{"range open high", `{"low":{"value":10,"system":"http://unitsofmeasure.org","code":"a"}}`, "", numRange{9.5, MaxNumber, "http://unitsofmeasure.org|a", ""}, true},
		{"no value", `{"unit":"kg"}`, "Quantity", numRange{}, false},
		{"sampled data", `{"origin":{"value":0},"period":10,"dimensions":1}`, "SampledData", numRange{}, false},
	}
	for _, tt := range tests {
		got, ok := quantityRange(obj(t, tt.json), tt.typ)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("%s: got %+v %v, want %+v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
