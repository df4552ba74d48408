package console_test

import (
	"strings"
	"testing"
)

// TestBrowserGraphQLRunsAQueryAndShowsItsErrors: the GraphQL page runs
// its first example (patients with their active conditions) and shows the
// answer; a query naming an unknown field shows the error at its line and
// column.
func TestBrowserGraphQLRunsAQueryAndShowsItsErrors(t *testing.T) {
	e := newEnv(t)
	p := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Quill","given":["Ada"]}],"birthDate":"1941-02-03"}`)
	e.create("Condition", `{"resourceType":"Condition","subject":{"reference":"Patient/`+p+`"},"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},"code":{"text":"Heart failure"}}`)
	e.create("Condition", `{"resourceType":"Condition","subject":{"reference":"Patient/`+p+`"},"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"resolved"}]},"code":{"text":"Sprained ankle"}}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.click("#nav-graphql")
	tb.wait("#graphql-form")
	tb.click("#graphql-run")
	tb.wait("#graphql-out .json")
	got := tb.text("#graphql-out")
	if !strings.Contains(got, `"Quill"`) || !strings.Contains(got, `"Heart failure"`) || strings.Contains(got, "Sprained") {
		t.Errorf("the answer shown:\n%s\nwant Quill with the active condition only", got)
	}
	tb.screenshot("graphql")
	// The other examples run as they are (the patient's id in the variables).
	for _, ex := range []string{"1", "2"} {
		tb.setValue("#graphql-example", ex)
		tb.setValue("#graphql-variables", strings.ReplaceAll(eval[string](tb, `document.querySelector('#graphql-variables').value`), "PATIENT", p))
		tb.click("#graphql-run")
		tb.waitFor(`document.querySelector('#graphql-out .json, #graphql-out .graphql-errors, #graphql-out .msg')`)
		if got := tb.text("#graphql-out"); !strings.Contains(got, `"data"`) {
			t.Errorf("example %s answered:\n%s", ex, got)
		}
	}
	tb.setValue("#graphql-query", "{\n  PatientList { id nope }\n}")
	tb.click("#graphql-run")
	tb.wait("#graphql-out .graphql-errors")
	if got := tb.text("#graphql-out"); !strings.Contains(got, "line 2, column") || !strings.Contains(got, "nope") {
		t.Errorf("the error shown: %q", got)
	}
}
