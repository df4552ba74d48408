package fhirpath_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fhirstore/fhirschema/fhirpath"
)

// outcome is what a bounded evaluation must end with.
type outcome int

const (
	anyOutcome outcome = iota // a result or an *fhirpath.Error
	mustFail                  // an *fhirpath.Error
)

// hostileCase is an expression built to exhaust the parser or the
// evaluator, and the input it runs over.
type hostileCase struct {
	name  string
	src   string
	input string // "patient", "bundle" (a large one) or "" for none
	want  outcome
	// unbounded names what the engine does not bound yet; the case is
	// skipped, saying so, until it does.
	unbounded string
}

func hostileCases() []hostileCase {
	return []hostileCase{
		{"10,000 nested parentheses", strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000), "", mustFail, ""},
		{"10,000 unary minus signs", strings.Repeat("-", 10000) + "1", "", mustFail, ""},
		{"10,000 nested where()", strings.Repeat("where(", 10000) + "true" + strings.Repeat(")", 10000), "patient", mustFail, ""},
		{"a 1 MB string literal", "'" + strings.Repeat("a", 1<<20) + "'.length()", "", anyOutcome, ""},
		{"1 MB of unions", strings.Repeat("name | ", 1<<20/7) + "name", "patient", mustFail, ""},
		{"1 MB of comments", strings.Repeat("/* x */ ", 1<<17) + "1", "", anyOutcome, ""},
		{"1 MB of path steps", "Patient" + strings.Repeat(".name", 1<<20/5), "patient", mustFail, ""},
		{"40,000 additions in a row", "1" + strings.Repeat(" + 1", 40000), "", anyOutcome, ""},
		{"repeat($this)", "repeat($this)", "patient", anyOutcome, ""},
		{"repeat of the resource", "repeat(%resource).count()", "patient", anyOutcome, ""},
		{"repeat of everything below", "repeat(descendants()).count()", "patient", anyOutcome, ""},
		{"repeat that never ends", "(1).repeat($this + 1)", "", mustFail, ""},
		{"repeat of growing strings", "('x' | 'y').repeat($this + 'x').count()", "", mustFail, ""},
		{"descendants() of a large Bundle", "descendants().count()", "bundle", anyOutcome, ""},
		{"descendants() of descendants()", "descendants().descendants().descendants().count()", "bundle", anyOutcome, ""},
		{"a long aggregate", "(1).repeat(iif($this < 1000000, $this + 1, {})).aggregate($total + $this, 0)", "", anyOutcome, ""},
		{"aggregate over a large Bundle", "descendants().aggregate($total + 1, 0)", "bundle", anyOutcome, ""},
		{"where() over where()", "descendants().where(%resource.descendants().where($this = 'x').exists()).count()", "bundle", anyOutcome, ""},
		{"a string doubling in repeat()", "'x'.repeat($this & $this).count()", "", mustFail, ""},
		{"a string tripling in aggregate()", "(1).repeat(iif($this < 40, $this + 1, {})).aggregate($total & $total & $total, 'x').length()", "", mustFail, ""},
		{"replace() doubling in repeat()", "'x'.repeat($this.replace('x', 'xx')).count()", "", mustFail, ""},
		{"encode() growing in repeat()", "'abc'.encode('base64').repeat($this.encode('base64')).count()", "", mustFail, ""},
	}
}

// TestHostileExpressionsAreBounded: expressions built to exhaust depth,
// size, steps or time fail with an *fhirpath.Error (or finish) under the
// default step and depth limits — never a hang or a crash. The timeout is
// a quarter of the default, which keeps the endless cases quick.
func TestHostileExpressionsAreBounded(t *testing.T) {
	patient, err := loadResource(filepath.Join(suiteDir, "patient-example.xml"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]map[string]any{"patient": patient, "bundle": largeBundle(patient, 20000)}
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // the cases that run into the timeout wait together
			if c.unbounded != "" {
				t.Skipf("not bounded by the engine yet (%s): %.80s", c.unbounded, c.src)
			}
			out, err := evalWithin(t, c.src, inputs[c.input], &fhirpath.Env{Strict: true, Timeout: 500 * time.Millisecond})
			checkBounded(t, c, out, err)
		})
	}
}

// checkBounded checks the outcome of a hostile case: a positioned
// *fhirpath.Error, or a result where the case allows one.
func checkBounded(t *testing.T, c hostileCase, out []fhirpath.Node, err error) {
	t.Helper()
	if err == nil {
		if c.want == mustFail {
			t.Fatalf("got %d items, want an *fhirpath.Error", len(out))
		}
		return
	}
	var fe *fhirpath.Error
	if !errors.As(err, &fe) || fe.Msg == "" {
		t.Fatalf("%T %v, want an *fhirpath.Error saying what went wrong", err, err)
	}
	if fe.Pos < 0 || fe.Pos > len(c.src)+1 {
		t.Fatalf("error position %d outside the expression (%d bytes): %v", fe.Pos, len(c.src), err)
	}
	t.Logf("%.200v", err)
}

// largeBundle is a searchset Bundle of n entries, each the same patient.
func largeBundle(patient map[string]any, n int) map[string]any {
	entries := make([]any, n)
	for i := range entries {
		entries[i] = map[string]any{"fullUrl": "Patient/example", "resource": patient}
	}
	return map[string]any{"resourceType": "Bundle", "type": "searchset", "entry": entries}
}

// evalWithin compiles and evaluates src over resource in a goroutine and
// fails the test if that does not end well before the test's deadline
// (at most a minute): the engine's own limits must end it first.
func evalWithin(t *testing.T, src string, resource map[string]any, env *fhirpath.Env) ([]fhirpath.Node, error) {
	t.Helper()
	env.Resource = resource
	type result struct {
		out []fhirpath.Node
		err error
	}
	done := make(chan result, 1)
	go func() {
		expr, err := fhirpath.Compile(src)
		if err != nil {
			done <- result{nil, err}
			return
		}
		var focus []fhirpath.Node
		if resource != nil {
			focus = []fhirpath.Node{fhirpath.ResourceNode(resource)}
		}
		out, err := expr.Eval(context.Background(), env, focus)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(hangBudget(t)):
		t.Fatalf("%.80s: still running after %v; the engine's limits did not end it", src, hangBudget(t))
		return nil, nil
	}
}

// hangBudget is how long an evaluation may run before it counts as a
// hang: a minute, or less when the test's deadline is nearer.
func hangBudget(t *testing.T) time.Duration {
	budget := time.Minute
	if d, ok := t.Deadline(); ok {
		if left := time.Until(d) / 2; left < budget {
			budget = left
		}
	}
	return budget
}

// TestEvaluationLimitsAreHonoured: a tight step limit, a short timeout and
// a canceled context each end an endless evaluation with an *Error.
func TestEvaluationLimitsAreHonoured(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	endless := "(1).repeat($this + 1)"
	cases := []struct {
		name string
		ctx  context.Context
		env  *fhirpath.Env
		want string
	}{
		{"MaxSteps", context.Background(), &fhirpath.Env{MaxSteps: 1000}, "1000 steps"},
		{"Timeout", context.Background(), &fhirpath.Env{MaxSteps: 1 << 40, Timeout: 50 * time.Millisecond}, "timed out"},
		{"canceled context", canceled, &fhirpath.Env{MaxSteps: 1 << 40, Timeout: time.Hour}, "cancel"},
		{"MaxDepth", context.Background(), &fhirpath.Env{MaxDepth: 5}, "deeper than 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := endless
			if c.name == "MaxDepth" {
				src = strings.Repeat("(", 10) + "1" + strings.Repeat(" + 1)", 10)
			}
			expr := fhirpath.MustCompile(src)
			done := make(chan error, 1)
			go func() {
				_, err := expr.Eval(c.ctx, c.env, nil)
				done <- err
			}()
			select {
			case err := <-done:
				var fe *fhirpath.Error
				if !errors.As(err, &fe) || fe.Kind != "execution" || !strings.Contains(fe.Msg, c.want) {
					t.Fatalf("%v, want an execution *fhirpath.Error saying %q", err, c.want)
				}
			case <-time.After(hangBudget(t)):
				t.Fatalf("still running after %v", hangBudget(t))
			}
		})
	}
}
