package view_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"fhirstore/fhirschema/view"
)

// TestBadViewsAreRefusedAtTheElement compiles views the rules refuse:
// each gives an issue at the element at fault, naming the problem.
func TestBadViewsAreRefusedAtTheElement(t *testing.T) {
	for _, tc := range []struct {
		name, view, at, says string
		stored               bool
	}{
		{"no resource", `{"select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.resource", "resource type it reads", false},
		{"a resource that is no R4 type", `{"resource":"Patientt","select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.resource", "not a FHIR R4 resource type", false},
		{"no select", `{"resource":"Patient"}`, "ViewDefinition.select", "at least one select", false},
		{"an unknown function", `{"resource":"Patient","select":[{"column":[{"name":"x","path":"name.frist()"}]}]}`, "ViewDefinition.select[0].column[0].path", "unknown function", false},
		{"a path that does not parse", `{"resource":"Patient","select":[{"column":[{"name":"x","path":"name.where("}]}]}`, "ViewDefinition.select[0].column[0].path", "does not compile", false},
		{"a path into a choice without a type", `{"resource":"Observation","select":[{"column":[{"name":"v","path":"value"}]}]}`, "ViewDefinition.select[0].column[0].path", "choice element", false},
		{"a column name used twice", `{"resource":"Patient","select":[{"column":[{"name":"id","path":"id"}]},{"forEach":"name","column":[{"name":"id","path":"family"}]}]}`, "ViewDefinition.select[1].column[0].name", "already used", false},
		{"a column name SQL cannot use", `{"resource":"Patient","select":[{"column":[{"name":"first name","path":"id"}]}]}`, "ViewDefinition.select[0].column[0].name", "letters, digits and _", false},
		{"a repeat on itself", `{"resource":"QuestionnaireResponse","select":[{"repeat":["$this"],"column":[{"name":"l","path":"linkId"}]}]}`, "ViewDefinition.select[0].repeat[0]", "never end", false},
		{"a repeat back to the resource", `{"resource":"QuestionnaireResponse","select":[{"repeat":["item","%resource"],"column":[{"name":"l","path":"linkId"}]}]}`, "ViewDefinition.select[0].repeat[1]", "never end", false},
		{"a forEach that is not a string", `{"resource":"Patient","select":[{"forEach":1,"column":[{"name":"l","path":"id"}]}]}`, "ViewDefinition.select[0].forEach", "must be a string", false},
		{"forEach and forEachOrNull together", `{"resource":"Patient","select":[{"forEach":"name","forEachOrNull":"name","column":[{"name":"l","path":"family"}]}]}`, "ViewDefinition.select[0]", "only one of", false},
		{"a where that is not boolean", `{"resource":"Patient","where":[{"path":"name.family"}],"select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.where[0].path", "not a boolean", false},
		{"an undefined constant", `{"resource":"Patient","select":[{"column":[{"name":"id","path":"name.where(use = %nope)"}]}]}`, "ViewDefinition.select[0].column[0].path", "%nope", false},
		{"a constant without a value", `{"resource":"Patient","constant":[{"name":"c"}],"select":[{"column":[{"name":"id","path":"%c"}]}]}`, "ViewDefinition.constant[0]", "exactly one value", false},
		{"unionAll branches with other columns", `{"resource":"Patient","select":[{"unionAll":[{"column":[{"name":"a","path":"id"}]},{"column":[{"name":"b","path":"id"}]}]}]}`, "ViewDefinition.select[0].unionAll[1].column[0].name", "same columns", false},
		{"a misspelt element", `{"resource":"Patient","select":[{"colunm":[{"name":"a","path":"id"}]}]}`, "ViewDefinition.select[0].colunm", "unknown element", false},
		{"getReferenceKey of no type", `{"resource":"Patient","select":[{"column":[{"name":"a","path":"link.other.getReferenceKey(Nope)"}]}]}`, "ViewDefinition.select[0].column[0].path", "must be a resource type", false},
		{"a stored view without status", `{"resourceType":"ViewDefinition","resource":"Patient","select":[{"column":[{"name":"a","path":"id"}]}]}`, "ViewDefinition.status", "must have a status", true},
		{"a stored view of another resourceType", `{"resourceType":"Library","status":"active","resource":"Patient","select":[{"column":[{"name":"a","path":"id"}]}]}`, "ViewDefinition.resourceType", "must be ViewDefinition", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := view.Compile([]byte(tc.view), view.Options{Stored: tc.stored})
			var ie *view.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
			for _, is := range ie.Issues {
				if is.Expression == tc.at && strings.Contains(is.Diagnostics, tc.says) {
					return
				}
			}
			t.Errorf("no issue at %s saying %q: %+v", tc.at, tc.says, ie.Issues)
		})
	}
}

// TestEvaluationErrorsNameTheResourceAndElement: problems only the data
// shows fail the evaluation with the resource and the element.
func TestEvaluationErrorsNameTheResourceAndElement(t *testing.T) {
	for _, tc := range []struct {
		name, view, at, says string
	}{
		{"several values in a column without collection", `{"resource":"Patient","select":[{"column":[{"name":"g","path":"name.given"}]}]}`, "ViewDefinition.select[0].column[0].path", "at most one"},
		{"a where yielding a string", `{"resource":"Patient","where":[{"path":"name.given.first().trim()"}],"select":[{"column":[{"name":"id","path":"id"}]}]}`, "ViewDefinition.where[0]", "one boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := view.Compile([]byte(tc.view), view.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res := map[string]any{"resourceType": "Patient", "id": "p1", "name": []any{map[string]any{"given": []any{"A", "B"}}}}
			err = v.Eval(context.Background(), res, func([]any) error { return nil })
			var ee *view.EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("got %v, want an *EvalError", err)
			}
			if ee.Resource != "Patient/p1" || !strings.HasPrefix(ee.Expression, tc.at) || !strings.Contains(ee.Msg, tc.says) {
				t.Errorf("got %+v", ee)
			}
		})
	}
}

// TestARowExplosionIsCut: a resource whose rows multiply past the limit
// fails instead of running on.
func TestARowExplosionIsCut(t *testing.T) {
	v, err := view.Compile([]byte(`{"resource":"Patient","select":[{"forEach":"name","column":[{"name":"a","path":"family"}]},
		{"forEach":"name","column":[{"name":"b","path":"family"}]},{"forEach":"name","column":[{"name":"c","path":"family"}]}]}`),
		view.Options{Limits: view.Limits{MaxRowsPerResource: 100}})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]any, 10)
	for i := range names {
		names[i] = map[string]any{"family": "F"}
	}
	n := 0
	err = v.Eval(context.Background(), map[string]any{"resourceType": "Patient", "id": "p", "name": names}, func([]any) error { n++; return nil })
	var ee *view.EvalError
	if !errors.As(err, &ee) || n != 100 {
		t.Errorf("got %v after %d rows, want an *EvalError after 100", err, n)
	}
}

// TestReferenceKeysAgreeEitherWay: a path ending with getReferenceKey is
// keyed in Go; any other use goes through FHIRPath; both give the same keys.
func TestReferenceKeysAgreeEitherWay(t *testing.T) {
	refs := []string{"Patient/p1", "http://example.org/fhir/Patient/p2", "Patient/p3/_history/4", "#contained",
		"urn:uuid:0a1b", "Patient", "patient/p5", "Observation/o1", "Patient/", "https://x/Group/g/_history/1"}
	for _, typ := range []string{"", "Patient", "Group"} {
		fast, err := view.Compile([]byte(`{"resource":"Observation","select":[{"column":[{"name":"k","path":"subject.getReferenceKey(`+typ+`)"}]}]}`), view.Options{})
		if err != nil {
			t.Fatal(err)
		}
		slow, err := view.Compile([]byte(`{"resource":"Observation","select":[{"column":[{"name":"k","path":"subject.getReferenceKey(`+typ+`) | {}"}]}]}`), view.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			res := map[string]any{"resourceType": "Observation", "id": "o", "subject": map[string]any{"reference": ref}}
			var a, b any
			_ = fast.Eval(context.Background(), res, func(row []any) error { a = row[0]; return nil })
			_ = slow.Eval(context.Background(), res, func(row []any) error { b = row[0]; return nil })
			if a != b {
				t.Errorf("getReferenceKey(%s) of %q: %v in Go, %v through FHIRPath", typ, ref, a, b)
			}
		}
	}
}

// TestHugeViewsAreRefused: too many columns or selects nested too deep
// are refused before anything runs.
func TestHugeViewsAreRefused(t *testing.T) {
	var cols []string
	for i := range 1001 {
		cols = append(cols, fmt.Sprintf(`{"name":"c%d","path":"id"}`, i))
	}
	wide := `{"resource":"Patient","select":[{"column":[` + strings.Join(cols, ",") + `]}]}`
	deep := `{"column":[{"name":"id","path":"id"}]}`
	for range 40 {
		deep = `{"select":[` + deep + `]}`
	}
	deep = `{"resource":"Patient","select":[` + deep + `]}`
	for name, tc := range map[string]struct{ view, says string }{
		"1,001 columns":            {wide, "1001 columns"},
		"selects nested 40 deep":   {deep, "deeper than 32"},
		"a path of 200,000 tokens": {`{"resource":"Patient","select":[{"column":[{"name":"x","path":"` + strings.Repeat("id.", 200000) + `id"}]}]}`, "does not compile"},
	} {
		_, err := view.Compile([]byte(tc.view), view.Options{})
		var ie *view.InvalidError
		if !errors.As(err, &ie) || !strings.Contains(ie.Error(), tc.says) {
			t.Errorf("%s: got %v, want an InvalidError saying %q", name, err, tc.says)
		}
	}
}
