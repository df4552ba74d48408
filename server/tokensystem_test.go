package server_test

import (
	"net/url"
	"slices"
	"testing"
)

// TestSyntheaSystemOnlyTokenSearch searches by a code system alone
// (system|), which the stored system|code forms answer by prefix, on its
// own, with :not, mixed with codes, in _filter and as a composite's token,
// and compares each result with the resources the data says match.
func TestSyntheaSystemOnlyTokenSearch(t *testing.T) {
	d := synLoad(t)
	const loinc, snomed = "http://loinc.org", "http://snomed.info/sct"
	inSystem := func(path []string, system string) func(synRes) bool {
		return func(r synRes) bool {
			return slices.ContainsFunc(synAt(r, path...), func(c any) bool { return synStr(c, "system") == system })
		}
	}
	hasCode := func(r synRes, code string) bool {
		return slices.ContainsFunc(synAt(r, "code", "coding"), func(c any) bool { return synStr(c, "code") == code })
	}
	not := func(f func(synRes) bool) func(synRes) bool { return func(r synRes) bool { return !f(r) } }
	condCode := synStr(synAt(d.res["Condition"][0], "code", "coding")[0], "code")
	patientSystem := synStr(synAt(d.res["Patient"][0], "identifier")[0], "system")
	rows := []struct {
		name, typ, query string
		match            func(synRes) bool
		none             bool
	}{
		{"a system", "Observation", "code=" + loinc + "|", inSystem([]string{"code", "coding"}, loinc), false},
		{"another system", "Condition", "code=" + snomed + "|", inSystem([]string{"code", "coding"}, snomed), false},
		{"a system no code is in", "Observation", "code=http://example.org/none|", func(synRes) bool { return false }, true},
		{"a system's prefix is not the system", "Observation", "code=http://loinc.or|", func(synRes) bool { return false }, true},
		{"a system or a code", "Condition", "code=" + loinc + "|," + condCode, func(r synRes) bool {
			return inSystem([]string{"code", "coding"}, loinc)(r) || hasCode(r, condCode)
		}, false},
		{":not", "Observation", "code:not=" + loinc + "|", not(inSystem([]string{"code", "coding"}, loinc)), false},
		{":not with a code", "Condition", "code:not=" + snomed + "|," + condCode, func(r synRes) bool {
			return !inSystem([]string{"code", "coding"}, snomed)(r) && !hasCode(r, condCode)
		}, false},
		{"a bound code's system", "Observation", "status=http://hl7.org/fhir/observation-status|", func(synRes) bool { return true }, false},
		{"category", "Observation", "category=http://terminology.hl7.org/CodeSystem/observation-category|", inSystem([]string{"category", "coding"}, "http://terminology.hl7.org/CodeSystem/observation-category"), false},
		{"an identifier system", "Patient", "identifier=" + url.QueryEscape(patientSystem+"|"), inSystem([]string{"identifier"}, patientSystem), false},
		{"_filter eq", "Observation", "_filter=" + url.QueryEscape("code eq "+loinc+"|"), inSystem([]string{"code", "coding"}, loinc), false},
		{"_filter ne", "Observation", "_filter=" + url.QueryEscape("code ne "+loinc+"|"), not(inSystem([]string{"code", "coding"}, loinc)), false},
		{"a composite's token", "Observation", "code-value-quantity=" + loinc + "|$gt100", func(r synRes) bool {
			q, _ := r["valueQuantity"].(map[string]any)
			v, ok := synNumber(t, q["value"])
			return ok && v > 100 && inSystem([]string{"code", "coding"}, loinc)(r)
		}, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { synSearchAgrees(t, d.e, row.typ, row.query, d.res[row.typ], row.match, row.none) })
	}
}

// TestSystemOnlyTokenSearchOnOtherForms searches by a system alone where
// the stored forms are not a Coding's: a coding with a system and no code,
// a reference's identifier, a tag, and a code that itself holds a bar.
func TestSystemOnlyTokenSearchOnOtherForms(t *testing.T) {
	e := newEnv(t)
	noCode := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/s"}],"text":"x"}}`)
	withCode := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/s","code":"c"}]}}`)
	other := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/t","code":"c"}]},
		"subject":{"identifier":{"system":"http://example.org/mrn","value":"123"}},"meta":{"tag":[{"system":"http://example.org/tags","code":"t1"}]}}`)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"code=http://example.org/s|", []string{noCode, withCode}},
		{"code:not=http://example.org/s|", []string{other}},
		{"code=http://example.org/s|,http://example.org/t|c", []string{noCode, withCode, other}},
		{"subject:identifier=http://example.org/mrn|", []string{other}},
		{"subject:identifier=http://example.org/mrn|123", []string{other}},
		{"subject:identifier=http://example.org/other|", nil},
		{"_tag=http://example.org/tags|", []string{other}},
		{"_tag:not=http://example.org/tags|", []string{noCode, withCode}},
	} {
		got := matchIDs(t, e.get("/Observation?"+tc.query))
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: %v, want %v", tc.query, got, want)
		}
	}
}
