package view_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"fhirstore/fhirschema/view"
)

// suiteDir holds a copy of the official SQL on FHIR v2 test suite.
const suiteDir = "../../testdata/sql-on-fhir"

// suiteFile is one file of the official suite.
type suiteFile struct {
	Title     string           `json:"title"`
	Resources []map[string]any `json:"resources"`
	Tests     []suiteTest      `json:"tests"`
}

// suiteTest is one test: a view, and the rows or the error it must give.
type suiteTest struct {
	Title         string          `json:"title"`
	View          json.RawMessage `json:"view"`
	Expect        json.RawMessage `json:"expect"`
	ExpectColumns []string        `json:"expectColumns"`
	ExpectError   bool            `json:"expectError"`
}

// TestOfficialSuite runs every test of the official suite through the
// engine: rows are compared as sets, numbers by kind and value as a JSON
// reader sees them. The tests listed in known-failures.txt must fail, all
// others pass, and at least 95% of all pass.
func TestOfficialSuite(t *testing.T) {
	known := readKnownFailures(t)
	files, err := filepath.Glob(filepath.Join(suiteDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite files in %s: %v", suiteDir, err)
	}
	total, passed := 0, 0
	seen := map[string]bool{}
	for _, file := range files {
		var sf suiteFile
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&sf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, tc := range sf.Tests {
			name := filepath.Base(file) + " :: " + tc.Title
			seen[name] = true
			total++
			problem := runSuiteTest(sf.Resources, tc)
			_, listed := known[name]
			switch {
			case problem == "":
				passed++
				if listed {
					t.Errorf("%s passes but is listed in known-failures.txt", name)
				}
			case !listed:
				t.Errorf("%s: %s", name, problem)
			}
		}
	}
	for name := range known {
		if !seen[name] {
			t.Errorf("known-failures.txt lists %q, which the suite does not have", name)
		}
	}
	t.Logf("official suite: %d of %d pass", passed, total)
	if passed*100 < total*95 {
		t.Errorf("only %d of %d tests pass, below 95%%", passed, total)
	}
}

// runSuiteTest returns why the test fails, "" when it passes.
func runSuiteTest(resources []map[string]any, tc suiteTest) string {
	v, err := view.Compile(tc.View, view.Options{})
	var rows []map[string]any
	if err == nil {
		rows, err = evalAll(v, resources)
	}
	if tc.ExpectError {
		if err == nil {
			return fmt.Sprintf("expected an error, got %d rows", len(rows))
		}
		return ""
	}
	if err != nil {
		return "unexpected error: " + err.Error()
	}
	if tc.ExpectColumns != nil {
		var names []string
		for _, c := range v.Columns() {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, tc.ExpectColumns) {
			return fmt.Sprintf("columns %v, want %v", names, tc.ExpectColumns)
		}
	}
	if tc.Expect == nil {
		return ""
	}
	var want []map[string]any
	if err := json.Unmarshal(tc.Expect, &want); err != nil {
		return "bad expect: " + err.Error()
	}
	got, exp := canonRows(rows), canonRows(want)
	if !slices.Equal(got, exp) {
		return fmt.Sprintf("rows\n  got  %v\n  want %v", got, exp)
	}
	return ""
}

// evalAll evaluates v over resources, each row as an object.
func evalAll(v *view.View, resources []map[string]any) ([]map[string]any, error) {
	cols := v.Columns()
	var rows []map[string]any
	for _, full := range resources {
		// Through the view's own decoding, which keeps only what it reads.
		data, err := json.Marshal(full)
		if err != nil {
			return nil, err
		}
		r, err := v.Decode(data)
		if err != nil {
			return nil, err
		}
		err = v.Eval(context.Background(), r, func(row []any) error {
			m := make(map[string]any, len(row))
			for i, c := range cols {
				m[c.Name] = row[i]
			}
			rows = append(rows, m)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// canonRows renders rows as sorted canonical JSON, reading numbers as a
// JSON reader does: integers as integers, the others as doubles.
func canonRows(rows []map[string]any) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			out = append(out, "!"+err.Error())
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		_ = dec.Decode(&v)
		c, _ := json.Marshal(canonNumbers(v))
		out = append(out, string(c))
	}
	slices.Sort(out)
	return out
}

func canonNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonNumbers(e)
		}
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			return "int:" + s
		}
		f, _ := strconv.ParseFloat(s, 64)
		return "float:" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v
}

// readKnownFailures reads the tests listed as failing: "file :: title",
// a tab, then the reason.
func readKnownFailures(t *testing.T) map[string]string {
	f, err := os.Open(filepath.Join(suiteDir, "known-failures.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, "\t")
		out[name] = reason
	}
	return out
}
