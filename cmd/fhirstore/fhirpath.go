package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
	"fhirstore/fhirschema/fhirxml"
)

// Exit statuses of fhirstore fhirpath beyond 0: an evaluation error is 1,
// like any other failure; a syntax error and bad usage are 2.
const (
	exitEval  = 1
	exitUsage = 2
)

// usageFail is bad usage of fhirpath: exit status 2.
func usageFail(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// fhirpathCmd evaluates a FHIRPath expression against a resource (or
// none) and prints the result collection as one JSON array.
func fhirpathCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("fhirpath", "resource", "lenient")
	flags, pos := splitExpression(args, "resource")
	if _, err := cfg.parse(boolFlagArgs(flags, "lenient")); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore fhirpath [--resource FILE] [--lenient] EXPRESSION")
			return err
		}
		return &exitError{code: exitUsage, err: err}
	}
	lenient, err := strconv.ParseBool(cfg.str("lenient"))
	if err != nil {
		return usageFail("--lenient: %q is not true or false", cfg.str("lenient"))
	}
	if len(pos) != 1 {
		return usageFail("fhirpath takes one EXPRESSION, quoted as one argument; got %d (see fhirstore fhirpath -h)", len(pos))
	}
	var resource map[string]any
	if path := cfg.str("resource"); path != "" {
		if resource, err = readResourceFile(path); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	out, err := evalFHIRPath(ctx, pos[0], resource, !lenient, stderr)
	if err != nil {
		return err
	}
	return writeCollection(stdout, out)
}

// flagLike is an argument that reads as a flag (-name, --name, --name=v);
// anything else that starts with a dash is an expression, such as -1 or
// -Patient.name.count().
var flagLike = regexp.MustCompile(`^--?[A-Za-z][A-Za-z0-9-]*(=.*)?$`)

// splitExpression separates the flags (with the values of the flags named
// in valued) from the positional arguments, so that an expression starting
// with a dash is not taken for a flag. After -- every argument is
// positional.
func splitExpression(args []string, valued ...string) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(pos, args[i+1:]...)
		case !flagLike.MatchString(a):
			pos = append(pos, a)
		default:
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			for _, v := range valued {
				if name == v && i+1 < len(args) {
					i++
					flags = append(flags, args[i])
				}
			}
		}
	}
	return flags, pos
}

// readResourceFile reads a FHIR resource in JSON or XML; its numbers stay
// json.Number so that decimals keep their text.
func readResourceFile(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--resource: %w", err)
	}
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // a byte order mark some editors write
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '<' {
		if raw, err = fhirxml.ToJSON(raw); err != nil {
			return nil, fmt.Errorf("--resource %s is not a FHIR XML resource: %w", path, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("--resource %s is not JSON or XML: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("--resource %s holds more than one JSON value", path)
	}
	res, _ := doc.(map[string]any)
	rt, ok := res["resourceType"].(string)
	switch {
	case !ok:
		return nil, fmt.Errorf("--resource %s is not a FHIR resource: no resourceType", path)
	case !fhirschema.IsResourceType(rt):
		return nil, fmt.Errorf("--resource %s is not a FHIR resource: resourceType %q is not an R4 resource type", path, rt)
	}
	return res, nil
}

// evalFHIRPath compiles and evaluates src with resource as its input and
// %resource; trace() output goes to stderr, a line per call.
func evalFHIRPath(ctx context.Context, src string, resource map[string]any, strict bool, stderr io.Writer) ([]fhirpath.Node, error) {
	expr, err := fhirpath.Compile(src)
	if err != nil {
		code := exitEval
		if fhirpath.IsSyntax(err) {
			code = exitUsage
		}
		return nil, &exitError{code: code, err: err}
	}
	env := &fhirpath.Env{Resource: resource, Strict: strict, Trace: traceTo(stderr)}
	var focus []fhirpath.Node
	if resource != nil {
		focus = []fhirpath.Node{fhirpath.ResourceNode(resource)}
	}
	out, err := expr.Eval(ctx, env, focus)
	if err != nil {
		return nil, &exitError{code: exitEval, err: err}
	}
	return out, nil
}

// traceTo writes each trace() call as "trace NAME: [values]".
func traceTo(w io.Writer) func(string, []fhirpath.Node) {
	return func(name string, nodes []fhirpath.Node) {
		b, err := json.Marshal(jsonValues(nodes))
		if err != nil {
			b = []byte(err.Error())
		}
		fmt.Fprintf(w, "trace %s: %s\n", name, b)
	}
}

// writeCollection prints the result collection as one JSON array.
func writeCollection(w io.Writer, nodes []fhirpath.Node) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jsonValues(nodes)); err != nil {
		return fmt.Errorf("fhirpath result: %w", err)
	}
	return nil
}

// jsonValues renders each node as FHIR JSON.
func jsonValues(nodes []fhirpath.Node) []any {
	out := make([]any, len(nodes))
	for i, n := range nodes {
		out[i] = fhirpath.JSONValue(n)
	}
	return out
}
