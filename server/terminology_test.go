package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

const conditionsCS = "http://example.org/fhir/CodeSystem/conditions"

// terminologyFixtures: a code system with a hierarchy, value sets built
// every way compose allows, and Conditions coded from it.
var terminologyFixtures = []struct{ typ, id, body string }{
	{"CodeSystem", "conditions", `{"resourceType":"CodeSystem","id":"conditions","url":"` + conditionsCS + `",
		"version":"1","name":"Conditions","status":"active","content":"complete","concept":[
		{"code":"cardio","display":"Cardiovascular","concept":[
			{"code":"htn","display":"Hypertension","definition":"High blood pressure","concept":[{"code":"htn-ess","display":"Essential hypertension"}]},
			{"code":"afib","display":"Atrial fibrillation"}]},
		{"code":"resp","display":"Respiratory","concept":[{"code":"asthma","display":"Asthma"}]}]}`},
	{"ValueSet", "cardio", `{"resourceType":"ValueSet","id":"cardio","url":"http://example.org/fhir/ValueSet/cardio","status":"active",
		"compose":{"include":[{"system":"` + conditionsCS + `","filter":[{"property":"concept","op":"is-a","value":"cardio"}]}]}}`},
	{"ValueSet", "nested", `{"resourceType":"ValueSet","id":"nested","url":"http://example.org/fhir/ValueSet/nested","status":"active",
		"compose":{"include":[{"valueSet":["http://example.org/fhir/ValueSet/cardio"]}],
		"exclude":[{"system":"` + conditionsCS + `","concept":[{"code":"htn-ess"}]}]}}`},
	{"ValueSet", "not-cardio", `{"resourceType":"ValueSet","id":"not-cardio","url":"http://example.org/fhir/ValueSet/not-cardio","status":"active",
		"compose":{"include":[{"system":"` + conditionsCS + `"}],"exclude":[{"valueSet":["ValueSet/cardio"]}]}}`},
	{"ValueSet", "expanded", `{"resourceType":"ValueSet","id":"expanded","url":"http://example.org/fhir/ValueSet/expanded","status":"active",
		"expansion":{"timestamp":"2024-01-01T00:00:00Z","contains":[{"system":"` + conditionsCS + `","code":"asthma","display":"Asthma"}]}}`},
	{"ValueSet", "unstored-system", `{"resourceType":"ValueSet","id":"unstored-system","url":"http://example.org/fhir/ValueSet/unstored-system","status":"active",
		"compose":{"include":[{"system":"http://snomed.info/sct"}]}}`},
	{"ValueSet", "cycle", `{"resourceType":"ValueSet","id":"cycle","url":"http://example.org/fhir/ValueSet/cycle","status":"active",
		"compose":{"include":[{"valueSet":["http://example.org/fhir/ValueSet/cycle"]}]}}`},
	{"Condition", "c-htn", condition("htn")},
	{"Condition", "c-htn-ess", condition("htn-ess")},
	{"Condition", "c-afib", condition("afib")},
	{"Condition", "c-asthma", condition("asthma")},
	{"Condition", "c-resp", condition("resp")},
}

func condition(code string) string {
	return `{"resourceType":"Condition","id":"c-` + code + `","subject":{"reference":"Patient/p1"},
		"code":{"coding":[{"system":"` + conditionsCS + `","code":"` + code + `"}]}}`
}

func terminologyEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	for _, f := range terminologyFixtures {
		if r := e.put("/"+f.typ+"/"+f.id, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", f.typ, f.id, r.Status, r.Body)
		}
	}
	return e
}

func TestValueSetAndHierarchyModifiersMatchStoredTerminology(t *testing.T) {
	e := terminologyEnv(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{":in a value set by canonical URL (is-a filter)", "code:in=http://example.org/fhir/ValueSet/cardio", []string{"c-afib", "c-htn", "c-htn-ess"}},
		{":in a value set by ValueSet/id", "code:in=ValueSet/cardio", []string{"c-afib", "c-htn", "c-htn-ess"}},
		{":in a nested value set with an excluded concept", "code:in=http://example.org/fhir/ValueSet/nested", []string{"c-afib", "c-htn"}},
		{":in a whole code system excluding a nested value set", "code:in=http://example.org/fhir/ValueSet/not-cardio", []string{"c-asthma", "c-resp"}},
		{":in a value set stored with its expansion", "code:in=http://example.org/fhir/ValueSet/expanded", []string{"c-asthma"}},
		{":in a value set by its literal URL on this server", "code:in=https://fhir.example.org/fhir/r4/ValueSet/cardio", []string{"c-afib", "c-htn", "c-htn-ess"}},
		{":in two value sets is their union", "code:in=http://example.org/fhir/ValueSet/nested,ValueSet/expanded", []string{"c-afib", "c-asthma", "c-htn"}},
		{":not-in a value set", "code:not-in=http://example.org/fhir/ValueSet/cardio", []string{"c-asthma", "c-resp"}},
		{":below a code of a stored hierarchy", "code:below=" + conditionsCS + "|htn", []string{"c-htn", "c-htn-ess"}},
		{":below the root", "code:below=" + conditionsCS + "|cardio", []string{"c-afib", "c-htn", "c-htn-ess"}},
		{":above a leaf", "code:above=" + conditionsCS + "|htn-ess", []string{"c-htn", "c-htn-ess"}},
		{"_filter ss is :below", "_filter=" + url.QueryEscape("code ss "+conditionsCS+"|htn"), []string{"c-htn", "c-htn-ess"}},
		{"_filter sb is :above", "_filter=" + url.QueryEscape("code sb "+conditionsCS+"|afib"), []string{"c-afib"}},
		{"_filter in and not", "_filter=" + url.QueryEscape("code in http://example.org/fhir/ValueSet/cardio and not (code eq "+conditionsCS+"|afib)"), []string{"c-htn", "c-htn-ess"}},
		{"_filter ni", "_filter=" + url.QueryEscape("code ni ValueSet/cardio"), []string{"c-asthma", "c-resp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, e.get("/Condition?_count=100&"+tt.query))
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Condition?%s = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}

func TestURIBelowAndAboveArePathWise(t *testing.T) {
	e := terminologyEnv(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{":below a path segment", "url:below=http://example.org/fhir/ValueSet", []string{"cardio", "cycle", "expanded", "nested", "not-cardio", "unstored-system"}},
		{":below is not a text prefix", "url:below=http://example.org/fhir/ValueSet/c", []string{}},
		{":below the uri itself", "url:below=http://example.org/fhir/ValueSet/cardio", []string{"cardio"}},
		{":above a longer path", "url:above=http://example.org/fhir/ValueSet/cardio/v2", []string{"cardio"}},
		{"_filter sw is a text prefix", "_filter=" + url.QueryEscape("url sw http://example.org/fhir/ValueSet/c"), []string{"cardio", "cycle"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, e.get("/ValueSet?_count=100&"+tt.query))
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ValueSet?%s = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}

func TestTerminologyModifiersSayWhyTheyCannotAnswer(t *testing.T) {
	e := terminologyEnv(t)
	tests := []struct{ name, query, param, says string }{
		{"value set not stored", "code:in=http://example.org/fhir/ValueSet/nowhere", "code:in", "no ValueSet"},
		{"include of a code system that is not stored", "code:in=ValueSet/unstored-system", "code:in", "no CodeSystem with that url is stored"},
		{"value set including itself", "code:in=http://example.org/fhir/ValueSet/cycle", "code:in", "includes itself"},
		{":below in a code system that is not stored", "code:below=http://snomed.info/sct|123", "code:below", "CodeSystem http://snomed.info/sct is not stored"},
		{":below a code the code system lacks", "code:below=" + conditionsCS + "|nope", "code:below", `is not in code system`},
		{":below without a system", "code:below=htn", "code:below", "system|code"},
		{"_filter in a value set not stored", "_filter=" + url.QueryEscape("code in http://x/vs"), "_filter", "no ValueSet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/Condition?" + tt.query)
			wantOutcome(t, r, http.StatusBadRequest, tt.param)
			if !strings.Contains(string(r.Body), tt.says) {
				t.Errorf("Condition?%s: %s, want it to say %q", tt.query, r.Body, tt.says)
			}
		})
	}
}

// expansionCodes are the codes of an expanded ValueSet, in order.
func expansionCodes(t *testing.T, r *response) ([]string, string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("$expand: %d %s", r.Status, r.Body)
	}
	exp, _ := r.JSON(t)["expansion"].(map[string]any)
	codes := []string{}
	contains, _ := exp["contains"].([]any)
	for _, c := range contains {
		codes = append(codes, c.(map[string]any)["code"].(string))
	}
	total, _ := exp["total"].(interface{ String() string })
	if total == nil {
		return codes, ""
	}
	return codes, total.String()
}

func TestExpandListsTheCodesOfAStoredValueSet(t *testing.T) {
	e := terminologyEnv(t)
	post := func(params string) *response {
		return e.post("/ValueSet/$expand", `{"resourceType":"Parameters","parameter":[`+params+`]}`)
	}
	tests := []struct {
		name  string
		r     func() *response
		want  []string
		total string
	}{
		{"by id", func() *response { return e.get("/ValueSet/cardio/$expand") }, []string{"cardio", "htn", "htn-ess", "afib"}, "4"},
		{"by url", func() *response { return e.get("/ValueSet/$expand?url=http://example.org/fhir/ValueSet/nested") }, []string{"cardio", "htn", "afib"}, "3"},
		{"with a filter on the display", func() *response { return e.get("/ValueSet/cardio/$expand?filter=HYPER") }, []string{"htn", "htn-ess"}, "2"},
		{"a page by count and offset", func() *response { return e.get("/ValueSet/cardio/$expand?count=2&offset=1") }, []string{"htn", "htn-ess"}, "4"},
		{"POST with url and count", func() *response {
			return post(`{"name":"url","valueUri":"http://example.org/fhir/ValueSet/not-cardio"},{"name":"count","valueInteger":1}`)
		}, []string{"resp"}, "2"},
		{"POST with the value set inline", func() *response {
			return post(`{"name":"valueSet","resource":{"resourceType":"ValueSet","status":"draft","compose":{"include":[{"system":"` + conditionsCS + `","concept":[{"code":"asthma"}]}]}}}`)
		}, []string{"asthma"}, "1"},
		{"a stored expansion", func() *response { return e.get("/ValueSet/expanded/$expand") }, []string{"asthma"}, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, total := expansionCodes(t, tt.r())
			if !slices.Equal(got, tt.want) || total != tt.total {
				t.Errorf("codes %v total %s, want %v total %s", got, total, tt.want, tt.total)
			}
		})
	}
	if r := e.post("/ValueSet/$expand", `{"resourceType":"Parameters","parameter":[{"name":"valueSet","resource":{"resourceType":"ValueSet","compose":{"include":[{"system":"`+conditionsCS+`","concept":[{"code":"asthma"}]}]}}}]}`); r.Status == http.StatusOK {
		if !strings.Contains(string(r.Body), `"display":"Asthma"`) {
			t.Errorf("an enumerated concept without a display takes the code system's: %s", r.Body)
		}
	}
}

func TestTerminologyOperationErrors(t *testing.T) {
	e := terminologyEnv(t)
	tests := []struct {
		name   string
		r      func() *response
		status int
		says   string
	}{
		{"expand of a value set that cannot be expanded", func() *response { return e.get("/ValueSet/unstored-system/$expand") }, 400, "no CodeSystem with that url is stored"},
		{"expand of an unknown id", func() *response { return e.get("/ValueSet/nope/$expand") }, 404, ""},
		{"expand of an unknown url", func() *response { return e.get("/ValueSet/$expand?url=http://x/none") }, 404, "http://x/none"},
		{"expand naming no value set", func() *response { return e.get("/ValueSet/$expand") }, 400, "name the value set"},
		{"expand with a bad count", func() *response { return e.get("/ValueSet/cardio/$expand?count=many") }, 400, "count"},
		{"expand on another type", func() *response { return e.get("/Patient/$expand") }, 404, "operation on ValueSet"},
		{"lookup of an unknown code", func() *response { return e.get("/CodeSystem/$lookup?system=" + conditionsCS + "&code=nope") }, 404, "nope"},
		{"lookup without a code", func() *response { return e.get("/CodeSystem/$lookup?system=" + conditionsCS) }, 400, "code"},
		{"validate-code without a code", func() *response { return e.get("/ValueSet/cardio/$validate-code") }, 400, "code"},
		{"an operation body that is not Parameters", func() *response { return e.post("/ValueSet/$expand", `{"resourceType":"Patient"}`) }, 400, "Parameters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r()
			wantOutcome(t, r, tt.status, "")
			if !strings.Contains(string(r.Body), tt.says) {
				t.Errorf("%s, want it to say %q", r.Body, tt.says)
			}
		})
	}
}

// parameter returns the first value of a named output parameter.
func parameter(t *testing.T, r *response, name string) any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	params, _ := r.JSON(t)["parameter"].([]any)
	for _, p := range params {
		m := p.(map[string]any)
		if m["name"] == name {
			for k, v := range m {
				if strings.HasPrefix(k, "value") {
					return v
				}
			}
		}
	}
	return nil
}

func TestValidateCodeAndLookup(t *testing.T) {
	e := terminologyEnv(t)
	vc := func(q string) *response { return e.get("/ValueSet/cardio/$validate-code?" + q) }
	sys := "system=" + url.QueryEscape(conditionsCS)
	tests := []struct {
		name  string
		r     func() *response
		param string
		want  any
	}{
		{"a member code is valid", func() *response { return vc(sys + "&code=htn") }, "result", true},
		{"its display comes back", func() *response { return vc(sys + "&code=htn") }, "display", "Hypertension"},
		{"a code outside the value set is not", func() *response { return vc(sys + "&code=asthma") }, "result", false},
		{"a wrong display is not valid", func() *response { return vc(sys + "&code=htn&display=Low") }, "result", false},
		{"by url", func() *response {
			return e.get("/ValueSet/$validate-code?url=http://example.org/fhir/ValueSet/nested&" + sys + "&code=htn-ess")
		}, "result", false},
		{"POST with a coding", func() *response {
			return e.post("/ValueSet/cardio/$validate-code", `{"resourceType":"Parameters","parameter":[{"name":"coding","valueCoding":{"system":"`+conditionsCS+`","code":"afib"}}]}`)
		}, "result", true},
		{"POST with a codeableConcept", func() *response {
			return e.post("/ValueSet/$validate-code", `{"resourceType":"Parameters","parameter":[{"name":"url","valueUri":"http://example.org/fhir/ValueSet/expanded"},
				{"name":"codeableConcept","valueCodeableConcept":{"coding":[{"system":"x","code":"y"},{"system":"`+conditionsCS+`","code":"asthma"}]}}]}`)
		}, "result", true},
		{"lookup gives the display", func() *response { return e.get("/CodeSystem/$lookup?" + sys + "&code=htn") }, "display", "Hypertension"},
		{"lookup gives the code system name", func() *response { return e.get("/CodeSystem/$lookup?" + sys + "&code=htn") }, "name", "Conditions"},
		{"lookup by id", func() *response { return e.get("/CodeSystem/conditions/$lookup?code=asthma") }, "display", "Asthma"},
		{"lookup POST with a coding", func() *response {
			return e.post("/CodeSystem/$lookup", `{"resourceType":"Parameters","parameter":[{"name":"coding","valueCoding":{"system":"`+conditionsCS+`","code":"afib"}}]}`)
		}, "version", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parameter(t, tt.r(), tt.param); got != tt.want {
				t.Errorf("%s = %v, want %v", tt.param, got, tt.want)
			}
		})
	}
	body := string(e.get("/CodeSystem/$lookup?" + sys + "&code=htn").Body)
	for _, part := range []string{`"valueCode":"cardio"`, `"valueCode":"htn-ess"`, `"valueString":"High blood pressure"`} {
		if !strings.Contains(body, part) {
			t.Errorf("lookup of htn lacks %s (parent, child, definition): %s", part, body)
		}
	}
}

func TestCapabilityStatementListsTerminologyOperations(t *testing.T) {
	e := newEnv(t)
	body := string(e.get("/metadata").Body)
	if !strings.Contains(body, `"name":"_filter"`) {
		t.Errorf("metadata does not list _filter")
	}
	for _, def := range []string{"ValueSet-expand", "ValueSet-validate-code", "CodeSystem-lookup"} {
		if !strings.Contains(body, "http://hl7.org/fhir/OperationDefinition/"+def) {
			t.Errorf("metadata does not list %s", def)
		}
	}
}

func TestConditionalCreateWithAValueSet(t *testing.T) {
	e := terminologyEnv(t)
	r := e.do(request{Method: http.MethodPost, Path: "/Condition", Body: condition("afib"),
		Header: map[string]string{"If-None-Exist": "code:in=http://example.org/fhir/ValueSet/cardio&_id=c-afib"}})
	if r.Status != http.StatusOK {
		t.Errorf("If-None-Exist matching through a value set: %d %s, want 200 (the existing match)", r.Status, r.Body)
	}
	r = e.do(request{Method: http.MethodPost, Path: "/Condition", Body: condition("afib"),
		Header: map[string]string{"If-None-Exist": "code:in=http://example.org/fhir/ValueSet/nowhere"}})
	wantOutcome(t, r, http.StatusBadRequest, "")
}
