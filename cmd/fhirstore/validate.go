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
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirxml"
	"fhirstore/fhirschema/igpackage"
	"fhirstore/store"
)

// validateSynopsis is the usage text of the validate command.
const validateSynopsis = `fhirstore validate [--ig PACKAGE.tgz]... [--profile URL] FILE...

Validates FHIR resources in JSON or XML files without a server, with the
checks and messages of a write and of $validate: the R4 base definitions
and core invariants, then every profile a resource claims in meta.profile
(and --profile), from the core definitions and the packages given with
--ig. A Bundle is validated entry by entry, a reference to another entry
by the profiles that entry claims. Each issue is printed as
FILE[ entry N (Type/id)]: SEVERITY ELEMENT: MESSAGE. Exit status: 0 when
no resource has an error, 1 when one has, 2 on bad usage (no FILE, a file
or package that cannot be read).`

// validateCmd validates files offline.
func validateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("validate", "ig", "profile")
	igs, args := repeatedFlag(args, "ig")
	files, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, validateSynopsis)
			return err
		}
		return &exitError{code: exitUsage, err: err}
	}
	if len(igs) == 0 && cfg.str("ig") != "" {
		igs = splitList(cfg.str("ig"))
	}
	if len(files) == 0 {
		return usageFail("validate: no FILE given (see fhirstore validate -h)")
	}
	oc, err := offlineCheckerOf(igs)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var profiles []string
	if p := cfg.str("profile"); p != "" {
		profiles = []string{p}
	}
	t := &validationTally{out: stdout}
	for _, f := range files {
		if err := t.file(ctx, oc, f, profiles); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	return t.summary()
}

// repeatedFlag takes every --name VALUE and --name=VALUE out of args.
func repeatedFlag(args []string, name string) (values, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return values, append(rest, args[i:]...)
		case a == "-"+name || a == "--"+name:
			if i+1 < len(args) {
				i++
				values = append(values, args[i])
			} else {
				rest = append(rest, a) // the flag package says a value is missing
			}
		case strings.HasPrefix(a, "-"+name+"=") || strings.HasPrefix(a, "--"+name+"="):
			values = append(values, a[strings.Index(a, "=")+1:])
		default:
			rest = append(rest, a)
		}
	}
	return values, rest
}

// offlineCheckerOf reads the packages and builds the checker.
func offlineCheckerOf(paths []string) (*offlineChecker, error) {
	pkgs := make([]*igpackage.Package, 0, len(paths))
	for _, p := range paths {
		pkg, err := igpackage.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--ig %s: %w", p, err)
		}
		pkgs = append(pkgs, pkg)
	}
	return newOfflineChecker(pkgs...)
}

// validationTally prints issues and counts them.
type validationTally struct {
	out                          io.Writer
	files, resources, errs, warn int
}

// file validates one file: a resource, or each entry of a Bundle. Only a
// file that cannot be read at all is an error of its own.
func (t *validationTally) file(ctx context.Context, oc *offlineChecker, path string, profiles []string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	t.files++
	body, typ, err := resourceJSON(raw)
	if err != nil {
		t.print(path, store.Issue{Severity: "error", Code: "structure", Diagnostics: err.Error()})
		return nil
	}
	if typ != "Bundle" {
		return t.resource(ctx, oc, path, typ, body, profiles, nil)
	}
	var b struct {
		Entry []struct {
			FullURL  string          `json:"fullUrl"`
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.print(path, store.Issue{Severity: "error", Code: "structure", Diagnostics: "the Bundle cannot be read: " + err.Error()})
		return nil
	}
	// The entries refer to each other by fullUrl or by type and id, as
	// the profile validator resolves them in any Bundle.
	bundle := &store.Bundle{}
	for _, e := range b.Entry {
		typ, id := resourceHead(e.Resource)
		bundle.Entries = append(bundle.Entries, store.BundleEntry{FullURL: e.FullURL, Type: typ, ID: id, Resource: e.Resource})
	}
	for i, e := range b.Entry {
		where := fmt.Sprintf("%s entry %d", path, i)
		typ, id := resourceHead(e.Resource)
		if typ != "" {
			where += fmt.Sprintf(" (%s/%s)", typ, id)
		}
		if err := t.resource(ctx, oc, where, typ, e.Resource, profiles, bundle); err != nil {
			return err
		}
	}
	return nil
}

// resource validates one resource and prints its issues.
func (t *validationTally) resource(ctx context.Context, oc *offlineChecker, where, typ string, body []byte, profiles []string, bundle *store.Bundle) error {
	t.resources++
	if !fhirschema.IsResourceType(typ) {
		t.print(where, store.Issue{Severity: "error", Code: "structure", Expression: "resourceType", Diagnostics: fmt.Sprintf("resourceType %q is not an R4 resource type", typ)})
		return nil
	}
	issues, err := oc.check(ctx, typ, body, profiles, true, bundle)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	for _, is := range issues {
		t.print(where, is)
	}
	return nil
}

// print writes one issue as FILE: SEVERITY ELEMENT: MESSAGE.
func (t *validationTally) print(where string, is store.Issue) {
	switch is.Severity {
	case "error", "fatal":
		t.errs++
	case "warning":
		t.warn++
	}
	at := is.Expression
	if at == "" {
		at = "-"
	}
	fmt.Fprintf(t.out, "%s: %s %s: %s\n", where, is.Severity, at, singleLine(is.Diagnostics))
}

// summary prints the counts; any error is exit status 1.
func (t *validationTally) summary() error {
	fmt.Fprintf(t.out, "%d files, %d resources: %d errors, %d warnings\n", t.files, t.resources, t.errs, t.warn)
	if t.errs > 0 {
		return &exitError{code: exitEval, err: fmt.Errorf("validate: %d errors", t.errs)}
	}
	return nil
}

// resourceJSON reads a JSON or XML file as a JSON resource and its type.
func resourceJSON(raw []byte) ([]byte, string, error) {
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // a byte order mark some editors write
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '<' {
		var err error
		if raw, err = fhirxml.ToJSON(raw); err != nil {
			return nil, "", fmt.Errorf("not a FHIR XML resource: %w", err)
		}
	}
	if !json.Valid(raw) {
		return nil, "", errors.New("not JSON or XML")
	}
	typ, _ := resourceHead(raw)
	if typ == "" {
		return nil, "", errors.New("not a FHIR resource: no resourceType")
	}
	return raw, typ, nil
}

// resourceHead reads a resource's type and id.
func resourceHead(body []byte) (typ, id string) {
	var head struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
	}
	_ = json.Unmarshal(body, &head)
	return head.ResourceType, head.ID
}
