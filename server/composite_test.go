package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bpObservation is a blood pressure panel: systolic and diastolic components.
func bpObservation(id string, systolic, diastolic int) string {
	return fmt.Sprintf(`{"resourceType":"Observation","id":%q,"status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},
		"effectiveDateTime":"2024-01-01",
		"component":[
		 {"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":%d,"unit":"mm[Hg]","system":"http://unitsofmeasure.org","code":"mm[Hg]"}},
		 {"code":{"coding":[{"system":"http://loinc.org","code":"8462-4"}]},"valueQuantity":{"value":%d,"unit":"mm[Hg]","system":"http://unitsofmeasure.org","code":"mm[Hg]"}}]}`,
		id, systolic, diastolic)
}

// compositeExamples are official R4 examples stored as they are.
var compositeExamples = []string{
	"Observation-blood-pressure", "Observation-example", "Observation-bloodgroup",
	"Observation-date-lastmp", "Observation-eye-color", "Observation-trachcare",
	"MolecularSequence-example", "MolecularSequence-fda-example", "MolecularSequence-graphic-example-4",
	"PlanDefinition-zika-virus-intervention", "PlanDefinition-protocol-example", "DocumentReference-example",
	"Group-example-patientlist",
}

func compositeEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	for _, bp := range []struct {
		id       string
		sys, dia int
	}{{"bp-high", 150, 90}, {"bp-trap", 120, 150}, {"bp-low", 118, 76}} {
		if r := e.put("/Observation/"+bp.id, bpObservation(bp.id, bp.sys, bp.dia)); r.Status != http.StatusCreated {
			t.Fatalf("store %s: %d %s", bp.id, r.Status, r.Body)
		}
	}
	for _, f := range []struct{ path, body string }{
		{"/MolecularSequence/seq-chr1", `{"resourceType":"MolecularSequence","id":"seq-chr1","coordinateSystem":0,
			"referenceSeq":{"chromosome":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/chromosome-human","code":"1"}]},"genomeBuild":"GRCh38","windowStart":100,"windowEnd":200},
			"variant":[{"start":120,"end":121},{"start":180,"end":185}]}`},
		{"/Group/g-smokers", `{"resourceType":"Group","id":"g-smokers","type":"person","actual":false,
			"characteristic":[{"code":{"coding":[{"system":"http://loinc.org","code":"72166-2"}]},"valueCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"77176002"}]},"exclude":false},
			                  {"code":{"coding":[{"system":"http://example.org","code":"age"}]},"valueCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"266919005"}]},"exclude":false}]}`},
		{"/Observation/sdoh", `{"resourceType":"Observation","id":"sdoh","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"93025-5"}]},
			"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"93030-5"}]},"valueCodeableConcept":{"coding":[{"system":"http://loinc.org","code":"LA33-6"}]}},
			             {"code":{"coding":[{"system":"http://loinc.org","code":"93038-8"}]},"valueCodeableConcept":{"coding":[{"system":"http://loinc.org","code":"LA32-8"}]}}]}`},
	} {
		if r := e.put(f.path, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s: %d %s", f.path, r.Status, r.Body)
		}
	}
	for _, name := range compositeExamples {
		body, err := os.ReadFile(filepath.Join("..", "testdata", "fhir", "examples", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		typ, id, _ := strings.Cut(name, "-")
		if r := e.put("/"+typ+"/"+id, string(body)); r.Status != http.StatusCreated {
			t.Fatalf("store %s: %d %s", name, r.Status, r.Body)
		}
	}
	return e
}

func TestCompositeSearchMatchesOneElement(t *testing.T) {
	e := compositeEnv(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{"systolic over 140: the component with that code has the value", "Observation?component-code-value-quantity=http://loinc.org|8480-6$gt140", []string{"bp-high"}},
		{"never a code from one component and a value from another", "Observation?component-code-value-quantity=8480-6$gt145", []string{"bp-high"}},
		{"diastolic over 140 is the trap alone", "Observation?component-code-value-quantity=http://loinc.org|8462-4$gt140", []string{"bp-trap"}},
		{"systolic le 120 in a range of two", "Observation?component-code-value-quantity=http://loinc.org|8480-6$le120", []string{"bp-trap", "bp-low", "blood-pressure"}},
		{"gt leaves out the value itself", "Observation?component-code-value-quantity=http://loinc.org|8480-6$gt150", nil},
		{"ge takes the value itself", "Observation?component-code-value-quantity=http://loinc.org|8480-6$ge150", []string{"bp-high"}},
		{"le takes the value itself", "Observation?component-code-value-quantity=http://loinc.org|8480-6$le118", []string{"bp-low", "blood-pressure"}},
		{"lt leaves it out", "Observation?component-code-value-quantity=http://loinc.org|8480-6$lt118", []string{"blood-pressure"}},
		{"sa is after", "Observation?component-code-value-quantity=http://loinc.org|8462-4$sa149.9", []string{"bp-trap"}},
		{"a quantity with its unit", "Observation?component-code-value-quantity=http://loinc.org|8480-6$107|http://unitsofmeasure.org|mm[Hg]", []string{"blood-pressure"}},
		{"another unit does not match", "Observation?component-code-value-quantity=http://loinc.org|8480-6$107|http://unitsofmeasure.org|kg", nil},
		{"comma-separated tuples are alternatives", "Observation?component-code-value-quantity=http://loinc.org|8480-6$gt145,http://loinc.org|8462-4$lt70", []string{"bp-high", "blood-pressure"}},
		{"a repeated parameter is a conjunction over elements", "Observation?component-code-value-quantity=8480-6$gt145&component-code-value-quantity=8462-4$lt95", []string{"bp-high"}},
		{"a code alias of the same component", "Observation?component-code-value-quantity=http://snomed.info/sct|271649006$107", []string{"blood-pressure"}},
		{"code-value-quantity on the observation itself", "Observation?code-value-quantity=http://loinc.org|29463-7$gt180", []string{"example"}},
		{"code-value-quantity le excludes", "Observation?code-value-quantity=http://loinc.org|29463-7$le180", nil},
		{"code-value-quantity never looks into components", "Observation?code-value-quantity=8480-6$gt0", nil},
		{"combo looks at the observation and its components", "Observation?combo-code-value-quantity=8480-6$gt140,29463-7$185", []string{"bp-high", "example"}},
		{"code-value-concept", "Observation?code-value-concept=http://loinc.org|883-9$http://snomed.info/sct|112144000", []string{"bloodgroup"}},
		{"code-value-concept of another value", "Observation?code-value-concept=http://loinc.org|883-9$http://snomed.info/sct|1", nil},
		{"combo-code-value-concept", "Observation?combo-code-value-concept=883-9$112144000", []string{"bloodgroup"}},
		{"code-value-date with a prefix", "Observation?code-value-date=http://loinc.org|8665-2$ge2016-12", []string{"date-lastmp"}},
		{"code-value-date outside", "Observation?code-value-date=http://loinc.org|8665-2$lt2016", nil},
		{"code-value-string is a folded prefix", "Observation?code-value-string=410211008$MOTHER%20is%20trained", []string{"trachcare"}},
		{"code-value-string of another code", "Observation?code-value-string=883-9$mother", nil},
		{"number components: a variant inside a window", "MolecularSequence?referenceseqid-variant-coordinate=NC_000009.11$gt22125500$lt22125510", []string{"example"}},
		{"number components: start and end of another variant", "MolecularSequence?referenceseqid-variant-coordinate=NC_000001.11$ge13116$le13117", []string{"fda-example"}},
		{"chromosome window", "MolecularSequence?chromosome-window-coordinate=http://terminology.hl7.org/CodeSystem/chromosome-human|2$le128273736$ge128273740", []string{"graphic-example-4"}},
		{"referenceseqid window", "MolecularSequence?referenceseqid-window-coordinate=NC_000009.11$le22125500$ge22125510", []string{"example"}},
		{"chromosome and a variant of the sequence", "MolecularSequence?chromosome-variant-coordinate=1$ge180$le185", []string{"seq-chr1"}},
		{"chromosome and the start of one variant with the end of another", "MolecularSequence?chromosome-variant-coordinate=1$ge180$le121", nil},
		{"group characteristic and its value", "Group?characteristic-value=http://loinc.org|72166-2$http://snomed.info/sct|77176002", []string{"g-smokers"}},
		{"group characteristic with the value of another", "Group?characteristic-value=http://loinc.org|72166-2$http://snomed.info/sct|266919005", nil},
		{"component concept", "Observation?component-code-value-concept=93030-5$LA33-6", []string{"sdoh"}},
		{"component concept of the other component", "Observation?component-code-value-concept=93030-5$LA32-8", nil},
		{"use context type and quantity", "PlanDefinition?context-type-quantity=age$gt20", []string{"zika-virus-intervention"}},
		{"use context type and value", "PlanDefinition?context-type-value=focus$http://snomed.info/sct|414916001", []string{"protocol-example"}},
		{"use context value of another type", "PlanDefinition?context-type-value=user$http://snomed.info/sct|414916001", nil},
		{"relates-to target and relation", "DocumentReference?relationship=DocumentReference/example$appends", []string{"example"}},
		{"relation of another kind", "DocumentReference?relationship=DocumentReference/example$replaces", nil},
		{"missing composite", "Observation?component-code-value-quantity:missing=false", []string{"bp-high", "bp-trap", "bp-low", "blood-pressure"}},
		{"combo present on the observation or a component", "Observation?combo-code-value-quantity:missing=false", []string{"bp-high", "bp-trap", "bp-low", "blood-pressure", "example"}},
		{"combo missing from both", "Observation?combo-code-value-quantity:missing=true&code=http://loinc.org|883-9", []string{"bloodgroup"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, e.get("/"+tt.query+"&_count=100"))
			want := slices.Clone(tt.want)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%s: got %v, want %v", tt.query, got, want)
			}
		})
	}
}

func TestCompositeSearchPagesCountsAndRefusesBadValues(t *testing.T) {
	e := compositeEnv(t)
	q := "/Observation?component-code-value-quantity=8480-6$gt100&_count=1&_sort=-date"
	var ids []string
	next := q
	for next != "" {
		r := e.get(next)
		ids = append(ids, matchIDs(t, r)...)
		next = ""
		for _, l := range r.JSON(t)["link"].([]any) {
			if m := l.(map[string]any); m["relation"] == "next" {
				u, _ := url.Parse(m["url"].(string))
				next = strings.TrimPrefix(u.RequestURI(), "/fhir/r4")
			}
		}
	}
	slices.Sort(ids)
	if want := []string{"blood-pressure", "bp-high", "bp-low", "bp-trap"}; !slices.Equal(ids, want) {
		t.Errorf("pages of %s: %v, want %v", q, ids, want)
	}
	r := e.get("/Observation?component-code-value-quantity=8462-4$gt140&_summary=count")
	if total := r.JSON(t)["total"]; fmt.Sprint(total) != "1" {
		t.Errorf("count of the diastolic trap: %v", total)
	}
	for _, bad := range []string{
		"component-code-value-quantity=8480-6",
		"component-code-value-quantity=8480-6$gt140$1",
		"component-code-value-quantity=$gt140",
		"component-code-value-quantity=8480-6$gtx",
		"component-code-value-quantity:exact=8480-6$1",
	} {
		name, _, _ := strings.Cut(bad, "=")
		wantOutcome(t, e.get("/Observation?"+bad), http.StatusBadRequest, name)
	}
}

func TestCapabilityStatementListsComposites(t *testing.T) {
	e := newEnv(t)
	cs := e.get("/metadata").JSON(t)
	found := map[string]string{}
	for _, r := range cs["rest"].([]any)[0].(map[string]any)["resource"].([]any) {
		m := r.(map[string]any)
		if m["type"] != "Observation" {
			continue
		}
		for _, p := range m["searchParam"].([]any) {
			sp := p.(map[string]any)
			found[sp["name"].(string)] = sp["type"].(string)
		}
		ops, _ := json.Marshal(m["operation"])
		if !strings.Contains(string(ops), "Observation-lastn") {
			t.Errorf("Observation operations %s lack $lastn", ops)
		}
	}
	for _, code := range []string{"code-value-quantity", "code-value-concept", "code-value-date", "code-value-string",
		"component-code-value-quantity", "component-code-value-concept", "combo-code-value-quantity", "combo-code-value-concept"} {
		if found[code] != "composite" {
			t.Errorf("Observation %s listed as %q", code, found[code])
		}
	}
	for _, code := range []string{"_text", "_content"} {
		if found[code] == "" {
			t.Errorf("Observation %s not listed", code)
		}
	}
}

// synElements are the elements a composite parameter's expression selects
// on an Observation: itself, its components, or both (combo).
func synElements(r synRes, base string) []map[string]any {
	var out []map[string]any
	if base != "component" {
		out = append(out, r)
	}
	if base != "observation" {
		for _, c := range synAt(r, "component") {
			if m, ok := c.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// synHasCoding tells whether a CodeableConcept at key of el has system|code.
func synHasCoding(el map[string]any, key, token string) bool {
	system, code, _ := strings.Cut(token, "|")
	for _, c := range synAt(el, key, "coding") {
		m, _ := c.(map[string]any)
		if synStr(m, "system") == system && synStr(m, "code") == code {
			return true
		}
	}
	return false
}

func TestSyntheaCompositeSearch(t *testing.T) {
	d := synLoad(t)
	obs := d.res["Observation"]
	value := func(el map[string]any) (float64, bool) {
		q, ok := el["valueQuantity"].(map[string]any)
		if !ok {
			return 0, false
		}
		return synNumber(t, q["value"])
	}
	quantity := func(base, code, unit string, keep func(float64) bool) func(synRes) bool {
		return func(r synRes) bool {
			for _, el := range synElements(r, base) {
				unitOK := unit == "" || synStr(el["valueQuantity"], "code") == unit
				if v, ok := value(el); ok && unitOK && synHasCoding(el, "code", code) && keep(v) {
					return true
				}
			}
			return false
		}
	}
	concept := func(base, code, val string) func(synRes) bool {
		return func(r synRes) bool {
			for _, el := range synElements(r, base) {
				if synHasCoding(el, "code", code) && synHasCoding(el, "valueCodeableConcept", val) {
					return true
				}
			}
			return false
		}
	}
	// a smoking status value that occurs in the data
	smoking := ""
	for _, r := range obs {
		for _, c := range synAt(r, "valueCodeableConcept", "coding") {
			if m := c.(map[string]any); synHasCoding(r, "code", "http://loinc.org|72166-2") {
				smoking = synStr(m, "system") + "|" + synStr(m, "code")
			}
		}
	}
	// a component with a concept value (social determinants surveys)
	var compCode, compValue string
	for _, r := range obs {
		for _, c := range synAt(r, "component") {
			m := c.(map[string]any)
			codes, values := synAt(m, "code", "coding"), synAt(m, "valueCodeableConcept", "coding")
			if compCode == "" && len(codes) > 0 && len(values) > 0 {
				cc, vc := codes[0].(map[string]any), values[0].(map[string]any)
				compCode, compValue = synStr(cc, "system")+"|"+synStr(cc, "code"), synStr(vc, "system")+"|"+synStr(vc, "code")
			}
		}
	}
	const loinc = "http://loinc.org|"
	rows := []struct {
		name, query string
		match       func(synRes) bool
		none        bool
	}{
		{"systolic over 121", "component-code-value-quantity=" + loinc + "8480-6$gt121", quantity("component", loinc+"8480-6", "", func(v float64) bool { return v > 121 }), false},
		{"systolic at most 121", "component-code-value-quantity=" + loinc + "8480-6$le121", quantity("component", loinc+"8480-6", "", func(v float64) bool { return v <= 121 }), false},
		{"diastolic over 70", "component-code-value-quantity=" + loinc + "8462-4$gt70", quantity("component", loinc+"8462-4", "", func(v float64) bool { return v > 70 }), false},
		{"diastolic over 100: the systolic values never count", "component-code-value-quantity=" + loinc + "8462-4$gt100", quantity("component", loinc+"8462-4", "", func(v float64) bool { return v > 100 }), true},
		{"systolic under 60: the diastolic values never count", "component-code-value-quantity=" + loinc + "8480-6$lt65", quantity("component", loinc+"8480-6", "", func(v float64) bool { return v < 65 }), true},
		{"body weight over 60 kg", "code-value-quantity=" + loinc + "29463-7$gt60|http://unitsofmeasure.org|kg", quantity("observation", loinc+"29463-7", "kg", func(v float64) bool { return v > 60 }), false},
		{"body height at least 160", "code-value-quantity=" + loinc + "8302-2$ge160", quantity("observation", loinc+"8302-2", "", func(v float64) bool { return v >= 160 }), false},
		{"combo: systolic or weight", "combo-code-value-quantity=" + loinc + "8480-6$gt121," + loinc + "29463-7$lt50", func(r synRes) bool {
			return quantity("both", loinc+"8480-6", "", func(v float64) bool { return v > 121 })(r) || quantity("both", loinc+"29463-7", "", func(v float64) bool { return v < 50 })(r)
		}, false},
		{"smoking status concept", "code-value-concept=" + loinc + "72166-2$" + smoking, concept("observation", loinc+"72166-2", smoking), false},
		{"combo smoking status concept", "combo-code-value-concept=" + loinc + "72166-2$" + smoking, concept("both", loinc+"72166-2", smoking), false},
		{"component concept", "component-code-value-concept=" + compCode + "$" + compValue, concept("component", compCode, compValue), false},
		{"component concept of the observation code is not a component", "component-code-value-concept=" + loinc + "72166-2$" + smoking, concept("component", loinc+"72166-2", smoking), true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { synSearchAgrees(t, d.e, "Observation", row.query, obs, row.match, row.none) })
	}
}
