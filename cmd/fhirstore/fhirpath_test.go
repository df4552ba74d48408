package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	examplePatient = "../../testdata/fhir/examples/Patient-example.json"
	patientXML     = "../../testdata/fhirpath/patient-example.xml"
	decimalObs     = "../../testdata/fhir/examples/Observation-decimal.json"
)

// TestFHIRPathPrintsTheResultAsOneJSONArray: the result collection is one
// JSON array on stdout, primitives as their FHIR JSON values (decimals
// with their text), complex values as objects, nothing for none.
func TestFHIRPathPrintsTheResultAsOneJSONArray(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"given names of a JSON resource", []string{"--resource", examplePatient, "Patient.name.given"}, `["Peter","James","Jim","Peter","James"]`},
		{"a date of an XML resource", []string{"--resource", patientXML, "Patient.birthDate"}, `["1974-12-25"]`},
		{"a boolean", []string{"--resource", examplePatient, "Patient.active"}, `[true]`},
		{"a complex value as an object", []string{"--resource", examplePatient, "Patient.name[1]"}, `[{"use":"usual","given":["Jim"]}]`},
		{"decimals keep their text", []string{"--resource", decimalObs, "Observation.component.value.value.take(2)"}, `[1.0,1.00]`},
		{"nothing selected is an empty array", []string{"--resource", examplePatient, "Patient.photo"}, `[]`},
		{"no resource: arithmetic", []string{"1 + 2"}, `[3]`},
		{"no resource: strings", []string{"'a' & 'b'"}, `["ab"]`},
		{"an expression starting with a dash", []string{"-1 + 3"}, `[2]`},
		{"the flag after the expression", []string{"Patient.gender", "--resource", examplePatient}, `["male"]`},
		{"everything after -- is the expression", []string{"--resource=" + examplePatient, "--", "-Patient.name.count()"}, `[-3]`},
		{"%resource is the resource", []string{"--resource", examplePatient, "%resource.id"}, `["example"]`},
		{"a file with a byte order mark", []string{"--resource", withBOM(t, examplePatient), "Patient.id"}, `["example"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := mustRun(t, append([]string{"fhirpath"}, c.args...)...)
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Fatalf("stdout is not one line: %q", out)
			}
			if !sameJSON(out, c.want) {
				t.Fatalf("fhirstore fhirpath %q printed %s, want %s", c.args, strings.TrimSpace(out), c.want)
			}
		})
	}
}

// withBOM copies a file with a UTF-8 byte order mark before its content.
func withBOM(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, append([]byte("\xef\xbb\xbf"), raw...), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON reports whether two JSON texts hold the same value, numbers
// compared by their text (1.00 is not 1.0) and objects regardless of key
// order.
func sameJSON(a, b string) bool {
	decode := func(s string) (any, error) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

// TestFHIRPathQuantityIsAQuantityObject: a quantity prints as a FHIR
// Quantity, its UCUM unit as code.
func TestFHIRPathQuantityIsAQuantityObject(t *testing.T) {
	out := mustRun(t, "fhirpath", "5 'mg'")
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("stdout %q is not an array of one object: %v", out, err)
	}
	if q := got[0]; q["value"] != 5.0 || q["code"] != "mg" {
		t.Fatalf("5 'mg' printed %s, want value 5 and code mg", out)
	}
}

// TestFHIRPathIsStrictUnlessLenient: an element the model does not know
// is an evaluation error, and empty under --lenient.
func TestFHIRPathIsStrictUnlessLenient(t *testing.T) {
	_, _, err := runCmd(t, "fhirpath", "--resource", examplePatient, "Patient.nmae")
	if err == nil || exitCode(err) != exitEval {
		t.Fatalf("unknown element in strict mode: %v (status %d), want an evaluation error (status 1)", err, exitCode(err))
	}
	if out := mustRun(t, "fhirpath", "--lenient", "--resource", examplePatient, "Patient.nmae"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("unknown element under --lenient printed %q, want []", out)
	}
	t.Setenv("FHIRSTORE_FHIRPATH_LENIENT", "true")
	if out := mustRun(t, "fhirpath", "--resource", examplePatient, "Patient.nmae"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("FHIRSTORE_FHIRPATH_LENIENT=true printed %q, want []", out)
	}
}

// TestFHIRPathTraceGoesToStderr: trace() writes its values to stderr and
// leaves stdout the result alone.
func TestFHIRPathTraceGoesToStderr(t *testing.T) {
	out, errOut, err := runCmd(t, "fhirpath", "--resource", examplePatient, "Patient.name.given.trace('g').count()")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "[5]" {
		t.Fatalf("stdout %q, want [5]", out)
	}
	if !strings.Contains(errOut, `trace g: ["Peter","James","Jim","Peter","James"]`) {
		t.Fatalf("stderr %q lacks the trace line", errOut)
	}
}

// TestFHIRPathFailuresExitWithTheirStatus: a syntax error and bad usage
// exit 2, an evaluation error 1, each with one line naming the problem.
func TestFHIRPathFailuresExitWithTheirStatus(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name   string
		args   []string
		status int
		want   []string
	}{
		{"syntax error", []string{"--resource", examplePatient, "Patient.name.where("}, exitUsage, []string{"syntax error at "}},
		{"syntax error over lines", []string{"1 +\n  * 2"}, exitUsage, []string{"syntax error at "}},
		{"unknown element", []string{"--resource", examplePatient, "Patient.name.nmae"}, exitEval, []string{"error at ", "nmae"}},
		{"single() of many", []string{"--resource", examplePatient, "Patient.name.given.single()"}, exitEval, []string{"error at "}},
		{"no expression", []string{"--resource", examplePatient}, exitUsage, []string{"one EXPRESSION", "got 0"}},
		{"two expressions", []string{"Patient.id", "Patient.name"}, exitUsage, []string{"one EXPRESSION", "got 2"}},
		{"unknown flag", []string{"--bogus", "1"}, exitUsage, []string{"unknown flag --bogus", "fhirstore fhirpath -h"}},
		{"--resource without a value", []string{"--resource"}, exitUsage, []string{"--resource needs a value"}},
		{"bad --lenient", []string{"--lenient=maybe", "1"}, exitUsage, []string{"--lenient", "maybe"}},
		{"missing file", []string{"--resource", filepath.Join(dir, "nothing.json"), "1"}, exitUsage, []string{"nothing.json"}},
		{"not JSON", []string{"--resource", file("text.json", "hello"), "1"}, exitUsage, []string{"text.json", "not JSON or XML"}},
		{"a JSON array", []string{"--resource", file("array.json", `[{"resourceType":"Patient"}]`), "1"}, exitUsage, []string{"array.json", "not a FHIR resource"}},
		{"no resourceType", []string{"--resource", file("plain.json", `{"name":"x"}`), "1"}, exitUsage, []string{"plain.json", "no resourceType"}},
		{"unknown resourceType", []string{"--resource", file("foo.json", `{"resourceType":"Foo"}`), "1"}, exitUsage, []string{`"Foo"`, "not an R4 resource type"}},
		{"two JSON values", []string{"--resource", file("two.json", `{"resourceType":"Patient"} {}`), "1"}, exitUsage, []string{"more than one JSON value"}},
		{"XML that is not FHIR", []string{"--resource", file("note.xml", `<note><to>x</to></note>`), "1"}, exitUsage, []string{"note.xml", "not a FHIR XML resource"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"fhirpath"}, c.args...)
			out, _, err := runCmd(t, args...)
			if err == nil {
				t.Fatalf("fhirstore %q succeeded with %q, want status %d", args, out, c.status)
			}
			if got := exitCode(err); got != c.status {
				t.Fatalf("fhirstore %q: status %d (%v), want %d", args, got, err, c.status)
			}
			checkOneLine(t, args, err.Error())
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("fhirstore %q: %q does not say %q", args, err, w)
				}
			}
			if out != "" {
				t.Errorf("fhirstore %q printed %q on stdout, want nothing", args, out)
			}
		})
	}
}

// TestFHIRPathBinaryExitStatus checks what only the process shows: the exit
// status and the one line on stderr.
func TestFHIRPathBinaryExitStatus(t *testing.T) {
	t.Parallel()
	bin := fhirstoreBinary(t)
	for _, c := range []struct {
		name   string
		args   []string
		status int
		stdout string
	}{
		{"a result", []string{"--resource", examplePatient, "Patient.name.given"}, 0, `["Peter","James","Jim","Peter","James"]`},
		{"a syntax error", []string{"--resource", examplePatient, "Patient.name.where("}, 2, ""},
		{"an evaluation error", []string{"--resource", examplePatient, "Patient.nmae"}, 1, ""},
		{"no expression", nil, 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"fhirpath"}, c.args...)...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			status := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != c.status || strings.TrimSpace(out.String()) != c.stdout {
				t.Fatalf("status %d, stdout %q (stderr %q); want %d and %q", status, out.String(), errb.String(), c.status, c.stdout)
			}
			if e := errb.String(); status != 0 && (strings.Count(e, "\n") != 1 || !strings.HasPrefix(e, "fhirstore: ")) {
				t.Fatalf("stderr is not one line: %q", e)
			}
		})
	}
}

// fhirstoreBinary builds the command into the test's temporary directory.
func fhirstoreBinary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary")
	}
	bin := filepath.Join(t.TempDir(), "fhirstore")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
