package search_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
)

// usCorePackage is the US Core 6.1.0 FHIR package (testdata/ig).
const usCorePackage = "../testdata/ig/hl7.fhir.us.core-6.1.0.tgz"

// packageFiles reads the JSON files of a FHIR package whose names (under
// package/) start with prefix.
func packageFiles(t testing.TB, prefix string) map[string][]byte {
	t.Helper()
	f, err := os.Open(usCorePackage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "package/")
		if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, ".json") {
			if out[name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// usCoreDefinitions are the SearchParameters of US Core, in name order.
func usCoreDefinitions(t testing.TB) ([]*search.Definition, map[string][]byte) {
	t.Helper()
	files := packageFiles(t, "SearchParameter-")
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var defs []*search.Definition
	for _, n := range names {
		d, err := search.ParseDefinition(files[n])
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
	}
	return defs, files
}

type spFields struct {
	URL, Code, Type, Expression string
	Base                        []string
}

func TestEveryUSCoreSearchParameterIsInForce(t *testing.T) {
	r := newRegistry(t)
	defs, files := usCoreDefinitions(t)
	tenant := r.With(defs)
	for name, body := range files {
		var sp spFields
		if err := json.Unmarshal(body, &sp); err != nil {
			t.Fatal(err)
		}
		d, _ := search.ParseDefinition(body)
		if warnings, err := r.Check(d); err != nil || len(warnings) > 0 {
			t.Errorf("%s: refused by the built-in registry: %v %v", name, err, warnings)
		}
		if warnings, err := tenant.Check(d); err != nil || len(warnings) > 0 {
			t.Errorf("%s: refused by the registry that holds it: %v %v", name, err, warnings)
		}
		for _, base := range sp.Base {
			p, ok := tenant.Lookup(base, sp.Code)
			if !ok {
				t.Errorf("%s: %s?%s is not searchable", name, base, sp.Code)
				continue
			}
			builtin, restated := r.Lookup(base, sp.Code)
			switch {
			case p.URL != sp.URL:
				t.Errorf("%s: %s?%s is defined by %s", name, base, sp.Code, p.URL)
			case restated && (p.Tenant || p.Type != builtin.Type):
				t.Errorf("%s: %s?%s restates a built-in parameter and must keep its index", name, base, sp.Code)
			case !restated && !p.Tenant:
				t.Errorf("%s: %s?%s is not marked as the tenant's", name, base, sp.Code)
			}
		}
	}
	if got, want := tenant.TenantTypes(), []string{"CareTeam", "Condition", "Encounter", "Goal", "Patient"}; !slices.Equal(got, want) {
		t.Errorf("types with parameters of the tenant's own: %v, want %v", got, want)
	}
	if p, _ := r.Lookup("Patient", "gender"); p.URL != "http://hl7.org/fhir/SearchParameter/individual-gender" {
		t.Errorf("the built-in registry changed: gender is defined by %s", p.URL)
	}
	if _, ok := r.Lookup("Patient", "race"); ok {
		t.Error("the built-in registry knows race")
	}
}

// usCoreExample reads one example of the package.
func usCoreExample(t testing.TB, name string) map[string]any {
	t.Helper()
	body := packageFiles(t, "example/"+name)["example/"+name]
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func TestUSCoreExtensionParametersIndexThePatientExample(t *testing.T) {
	defs, _ := usCoreDefinitions(t)
	tenant := newRegistry(t).With(defs)
	idx, _ := tenant.Extract("Patient", usCoreExample(t, "Patient-example.json"))
	values := map[string][]string{}
	for _, e := range idx {
		if list, ok := e.Value.([]string); ok {
			values[e.Key] = list
		}
	}
	for _, c := range []struct{ code, value string }{
		{"race", "2106-3"}, {"race", "1002-5"}, {"ethnicity", "2135-2"}, {"ethnicity", "2184-0"},
	} {
		if !slices.Contains(values[c.code], c.value) {
			t.Errorf("%s: %v, want %s among them", c.code, values[c.code], c.value)
		}
	}
}

func TestQueriesNameTheTenantParametersTheyRead(t *testing.T) {
	defs, _ := usCoreDefinitions(t)
	r := newRegistry(t)
	tenant := r.With(defs)
	for _, c := range []struct {
		name   string
		typ    string
		params url.Values
		want   []search.ParamUse
	}{
		{"a tenant parameter", "Patient", url.Values{"race": {"2106-3"}}, []search.ParamUse{{Type: "Patient", Code: "race"}}},
		{"a restated built-in parameter", "Patient", url.Values{"gender": {"female"}}, nil},
		{"a chain to a tenant parameter", "Observation", url.Values{"subject:Patient.ethnicity": {"2135-2"}}, []search.ParamUse{{Type: "Patient", Code: "ethnicity"}}},
		{"a reverse chain", "Patient", url.Values{"_has:Condition:patient:asserted-date": {"2020"}}, []search.ParamUse{{Type: "Condition", Code: "asserted-date"}}},
		{"a sort", "Condition", url.Values{"_sort": {"asserted-date"}}, []search.ParamUse{{Type: "Condition", Code: "asserted-date"}}},
	} {
		q, err := tenant.Parse(c.typ, c.params, search.ParseOptions{Strict: true})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(q.Uses, c.want) {
			t.Errorf("%s: uses %v, want %v", c.name, q.Uses, c.want)
		}
	}
	if _, err := r.Parse("Patient", url.Values{"race": {"2106-3"}}, search.ParseOptions{Strict: true}); err == nil {
		t.Error("the built-in registry parses race")
	}
}

// sp is a SearchParameter resource with the given fields over a valid one.
func sp(t testing.TB, fields map[string]any) *search.Definition {
	t.Helper()
	m := map[string]any{"resourceType": "SearchParameter", "url": "http://example.org/sp/x", "name": "x", "status": "active",
		"description": "x", "code": "x", "base": []string{"Patient"}, "type": "string", "expression": "Patient.name.family"}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	d, err := search.ParseDefinition(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSearchParametersThatCannotBeSearchedAreRefused(t *testing.T) {
	r := newRegistry(t)
	tenant := r.With([]*search.Definition{sp(t, map[string]any{"url": "http://example.org/sp/city", "code": "city", "expression": "Patient.address.city"})})
	for _, c := range []struct {
		name   string
		fields map[string]any
		path   string
	}{
		{"an expression that does not parse", map[string]any{"expression": "Patient.name.where("}, "SearchParameter.expression"},
		{"an unknown function", map[string]any{"expression": "Patient.name.frobnicate()"}, "SearchParameter.expression"},
		{"an element the type does not have", map[string]any{"expression": "Patient.nmae"}, "SearchParameter.expression"},
		{"an expression of another type", map[string]any{"expression": "Observation.code"}, "SearchParameter.expression"},
		{"no expression", map[string]any{"expression": nil}, "SearchParameter.expression"},
		{"no code", map[string]any{"code": nil}, "SearchParameter.code"},
		{"a code with a dot", map[string]any{"code": "a.b"}, "SearchParameter.code"},
		{"a code with a colon", map[string]any{"code": "a:b"}, "SearchParameter.code"},
		{"a reserved code", map[string]any{"code": "_mine"}, "SearchParameter.code"},
		{"a code another parameter of the tenant has", map[string]any{"code": "city"}, "SearchParameter.code"},
		{"no url", map[string]any{"url": nil}, "SearchParameter.url"},
		{"no base", map[string]any{"base": nil}, "SearchParameter.base"},
		{"a base that is not a type", map[string]any{"base": []string{"Patient", "Patience"}}, "SearchParameter.base[1]"},
		{"a base of every resource", map[string]any{"base": []string{"Resource"}, "expression": "Resource.id"}, "SearchParameter.base[0]"},
		{"an unknown type", map[string]any{"type": "text"}, "SearchParameter.type"},
		{"a special type", map[string]any{"type": "special"}, "SearchParameter.type"},
		{"a target that is not a type", map[string]any{"type": "reference", "expression": "Patient.generalPractitioner", "target": []string{"Doctor"}}, "SearchParameter.target[0]"},
		{"a composite of one component", map[string]any{"type": "composite", "expression": "Patient", "component": []map[string]string{
			{"definition": "http://hl7.org/fhir/SearchParameter/individual-gender", "expression": "gender"}}}, "SearchParameter.component"},
		{"a composite of a composite", map[string]any{"type": "composite", "expression": "Patient", "component": []map[string]string{
			{"definition": "http://hl7.org/fhir/SearchParameter/Observation-code-value-quantity", "expression": "code"},
			{"definition": "http://hl7.org/fhir/SearchParameter/individual-gender", "expression": "gender"}}}, "SearchParameter.component[0].definition"},
		{"a component that does not parse", map[string]any{"type": "composite", "expression": "Patient", "component": []map[string]string{
			{"definition": "http://hl7.org/fhir/SearchParameter/individual-gender", "expression": "gender("},
			{"definition": "http://hl7.org/fhir/SearchParameter/individual-birthdate", "expression": "birthDate"}}}, "SearchParameter.component[0].expression"},
	} {
		_, err := tenant.Check(sp(t, c.fields))
		de, ok := err.(*search.DefinitionError)
		if !ok {
			t.Errorf("%s: %v, want a DefinitionError", c.name, err)
			continue
		}
		if de.Issues[0].Path != c.path {
			t.Errorf("%s: refused at %s (%s), want %s", c.name, de.Issues[0].Path, de.Issues[0].Msg, c.path)
		}
	}
}

func TestSearchParametersThatNeedNoCheck(t *testing.T) {
	r := newRegistry(t)
	for _, c := range []struct {
		name   string
		fields map[string]any
	}{
		{"a retired one", map[string]any{"status": "retired", "expression": "Patient.name.where("}},
		{"R4's own", map[string]any{"url": "http://hl7.org/fhir/SearchParameter/Resource-content", "code": "_content", "base": []string{"Resource"}, "expression": nil}},
		{"a restated _id", map[string]any{"url": "http://example.org/sp/id", "code": "_id", "type": "token", "expression": "Patient.id"}},
		{"an update of itself", map[string]any{"expression": "Patient.name.given"}},
	} {
		tenant := r.With([]*search.Definition{sp(t, nil)})
		if _, err := tenant.Check(sp(t, c.fields)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestACompositeTakesEffectOnceItsComponentsAreDefined(t *testing.T) {
	r := newRegistry(t)
	city := sp(t, map[string]any{"url": "http://example.org/sp/city", "code": "city", "expression": "Patient.address.city"})
	comp := sp(t, map[string]any{"url": "http://example.org/sp/gender-city", "code": "gender-city", "type": "composite", "expression": "Patient",
		"component": []map[string]string{
			{"definition": "http://hl7.org/fhir/SearchParameter/individual-gender", "expression": "gender"},
			{"definition": "http://example.org/sp/city", "expression": "address.city"}}})
	warnings, err := r.Check(comp)
	if err != nil || len(warnings) != 1 || warnings[0].Path != "SearchParameter.component[1].definition" {
		t.Fatalf("without its component: %v %v", warnings, err)
	}
	if _, ok := r.With([]*search.Definition{comp}).Lookup("Patient", "gender-city"); ok {
		t.Error("in force without its component")
	}
	tenant := r.With([]*search.Definition{comp, city}) // written before its component: still in force
	if _, ok := tenant.Lookup("Patient", "gender-city"); !ok {
		t.Fatal("not in force with its component")
	}
	patient := map[string]any{"resourceType": "Patient", "gender": "female", "address": []any{map[string]any{"city": "Boston"}}}
	idx, _ := tenant.Extract("Patient", patient)
	if !slices.ContainsFunc(idx, func(e bson.E) bool { return e.Key == "gender-city" }) {
		t.Errorf("no gender-city values in %v", idx)
	}
	if _, err := tenant.Parse("Patient", url.Values{"gender-city": {"female$boston"}}, search.ParseOptions{Strict: true}); err != nil {
		t.Error(err)
	}
}

func TestTenantSignaturesChangeWithWhatTheValuesDependOn(t *testing.T) {
	r := newRegistry(t)
	sig := func(fields map[string]any) string {
		return r.With([]*search.Definition{sp(t, fields)}).TenantSignatures("Patient")["x"]
	}
	base := sig(nil)
	if base == "" || sig(map[string]any{"description": "other words"}) != base || sig(map[string]any{"expression": "Patient . name . family"}) == "" {
		t.Fatalf("signature %q", base)
	}
	for _, f := range []map[string]any{{"expression": "Patient.name.given"}, {"type": "token"}} {
		if sig(f) == base {
			t.Errorf("%v: the signature did not change", f)
		}
	}
	if len(r.TenantSignatures("Patient")) != 0 {
		t.Error("the built-in registry has tenant parameters")
	}
}

func TestChoiceElementsNamedAsJSONDoAreSearched(t *testing.T) {
	r := newRegistry(t)
	for _, c := range []struct {
		name       string
		base, expr string
		typ        string
		resource   string
		want       bool
	}{
		{"an extension's value", "Condition", "Condition.extension.where(url = 'http://hl7.org/fhir/StructureDefinition/condition-assertedDate').valueDateTime", "date",
			`{"resourceType":"Condition","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/condition-assertedDate","valueDateTime":"2016-08-10"}]}`, true},
		{"a choice of the resource", "Patient", "Patient.deceasedDateTime", "date", `{"resourceType":"Patient","deceasedDateTime":"2020-01-01"}`, true},
		{"another type of the choice", "Patient", "Patient.deceasedDateTime", "date", `{"resourceType":"Patient","deceasedBoolean":true}`, false},
		{"an element whose name looks like one", "Consent", "Consent.dateTime", "date", `{"resourceType":"Consent","dateTime":"2020-01-01"}`, true},
		{"a type specifier", "Patient", "Patient.deceased.ofType(dateTime)", "date", `{"resourceType":"Patient","deceasedDateTime":"2020-01-01"}`, true},
		{"a quoted name", "Patient", "Patient.extension.where(url = 'valueDateTime').value", "string", `{"resourceType":"Patient","extension":[{"url":"valueDateTime","valueString":"x"}]}`, true},
	} {
		d := sp(t, map[string]any{"base": []string{c.base}, "expression": c.expr, "type": c.typ})
		if _, err := r.Check(d); err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
			continue
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(c.resource), &res); err != nil {
			t.Fatal(err)
		}
		idx, _ := r.With([]*search.Definition{d}).Extract(c.base, res)
		got := slices.ContainsFunc(idx, func(e bson.E) bool { return e.Key == "x" })
		if got != c.want {
			t.Errorf("%s: values %v, want some: %v", c.name, idx, c.want)
		}
	}
}

// BenchmarkExtractPatientUSCore is BenchmarkExtractPatient with US Core's
// SearchParameters in force: race, ethnicity and gender-identity more.
func BenchmarkExtractPatientUSCore(b *testing.B) {
	defs, _ := usCoreDefinitions(b)
	r := newRegistry(b).With(defs)
	res := example(b, "Patient-example.json")
	b.ReportAllocs()
	for b.Loop() {
		r.Extract("Patient", res)
	}
}
