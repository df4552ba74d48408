package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"fhirstore/fhirschema/igpackage"
	"fhirstore/server"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
)

// isPackage reports whether a PATH of load is a FHIR package.
func isPackage(path string) bool {
	p := strings.ToLower(path)
	return strings.HasSuffix(p, ".tgz") || strings.HasSuffix(p, ".tar.gz")
}

// splitPackages separates the packages among load's PATHs from the rest.
func splitPackages(paths []string) (pkgs, rest []string) {
	for _, p := range paths {
		if isPackage(p) {
			pkgs = append(pkgs, p)
		} else {
			rest = append(rest, p)
		}
	}
	return pkgs, rest
}

// installer installs FHIR packages through a loader's server.
type installer struct {
	l        *loader
	examples bool
	out      io.Writer
}

// installed is what an install did.
type installed struct {
	written, unchanged, examples int
}

// install reads and checks the package at path, then writes what differs
// from the server's copy in one transaction — the conformance resources,
// then the examples when asked — so that a package is installed whole or
// not at all. A second install of the same package changes nothing.
func (in *installer) install(ctx context.Context, path string) error {
	pkg, err := igpackage.ReadFile(path)
	if err != nil {
		return err
	}
	if err := in.check(ctx, pkg); err != nil {
		return err
	}
	if err := in.reportDependencies(ctx, pkg); err != nil {
		return err
	}
	var done installed
	if done.written, done.unchanged, err = in.writeChanged(ctx, pkg.Resources); err != nil {
		return err
	}
	if in.examples {
		n, _, err := in.writeChanged(ctx, pkg.Examples)
		if err != nil {
			return fmt.Errorf("the conformance resources are installed, the examples not: %w", err)
		}
		done.examples = n
	}
	fmt.Fprintf(in.out, "package %s (%s): %d conformance resources written, %d unchanged", pkg.Key(), filepath.Base(path), done.written, done.unchanged)
	if in.examples {
		fmt.Fprintf(in.out, ", %d examples written", done.examples)
	}
	fmt.Fprintln(in.out)
	for _, s := range pkg.Skipped {
		fmt.Fprintf(in.out, "  skipped %s\n", s)
	}
	return nil
}

// check validates every resource to be written, and compiles every
// profile, before anything is: the first error refuses the package with
// its file and reason.
func (in *installer) check(ctx context.Context, pkg *igpackage.Package) error {
	oc, err := newOfflineChecker(pkg)
	if err != nil {
		return err
	}
	if err := oc.checkProfiles(ctx, pkg.Resources); err != nil {
		return err
	}
	files := pkg.Resources
	if in.examples {
		files = append(files[:len(files):len(files)], pkg.Examples...)
	}
	for _, f := range files {
		issues, err := oc.check(ctx, f.Type, f.JSON, nil, false, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		for _, is := range issues {
			if is.Severity == "error" || is.Severity == "fatal" {
				return &igpackage.Error{File: f.Path, Reason: issueText(is)}
			}
		}
	}
	return nil
}

// issueText is an issue in one line: its message and where.
func issueText(is store.Issue) string {
	if is.Expression == "" {
		return is.Diagnostics
	}
	return is.Diagnostics + " (at " + is.Expression + ")"
}

// reportDependencies names the dependencies the server holds no guide of:
// what they define is unknown there, so their profiles and value sets
// degrade to warnings.
func (in *installer) reportDependencies(ctx context.Context, pkg *igpackage.Package) error {
	have, err := in.installedGuides(ctx)
	if err != nil {
		return err
	}
	if v, ok := have[pkg.Name]; ok && v != pkg.Version {
		fmt.Fprintf(in.out, "package %s: updating version %s\n", pkg.Key(), v)
	}
	for _, d := range pkg.Dependencies {
		if d.Name == igpackage.CoreName {
			continue // built in
		}
		if _, ok := have[d.Name]; !ok {
			fmt.Fprintf(in.out, "package %s: dependency %s#%s is not installed: its profiles are unknown here and its value sets cannot be expanded, so claims of them and bindings to them are warnings, not errors\n", pkg.Key(), d.Name, d.Version)
		}
	}
	return nil
}

// installedGuides reads the server's ImplementationGuides: package id →
// version.
func (in *installer) installedGuides(ctx context.Context) (map[string]string, error) {
	have := map[string]string{}
	next := "/ImplementationGuide?_count=100"
	for next != "" {
		var page struct {
			Link []struct {
				Relation string `json:"relation"`
				URL      string `json:"url"`
			} `json:"link"`
			Entry []struct {
				Resource struct {
					PackageID string `json:"packageId"`
					Version   string `json:"version"`
				} `json:"resource"`
			} `json:"entry"`
		}
		if err := in.getJSON(ctx, next, &page); err != nil {
			return nil, fmt.Errorf("list the installed guides: %w", err)
		}
		for _, e := range page.Entry {
			if e.Resource.PackageID != "" {
				have[e.Resource.PackageID] = e.Resource.Version
			}
		}
		next = ""
		for _, l := range page.Link {
			if l.Relation == "next" {
				next = strings.TrimPrefix(l.URL, in.l.base)
			}
		}
	}
	return have, nil
}

// writeChanged writes, in one transaction, the files whose resource the
// server does not hold as it is in the package.
func (in *installer) writeChanged(ctx context.Context, files []*igpackage.File) (written, unchanged int, err error) {
	var changed []*igpackage.File
	for typ, group := range groupByType(files) {
		stored, err := in.current(ctx, typ, group)
		if err != nil {
			return 0, 0, err
		}
		for _, f := range group {
			if s, ok := stored[f.ID]; ok && f.Same(s) {
				unchanged++
				continue
			}
			changed = append(changed, f)
		}
	}
	if len(changed) == 0 {
		return 0, unchanged, nil
	}
	sortFiles(changed)
	return len(changed), unchanged, in.transaction(ctx, changed)
}

// groupByType groups files by resource type.
func groupByType(files []*igpackage.File) map[string][]*igpackage.File {
	out := map[string][]*igpackage.File{}
	for _, f := range files {
		out[f.Type] = append(out[f.Type], f)
	}
	return out
}

// sortFiles orders files by name, the order the package lists them in.
func sortFiles(files []*igpackage.File) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
}

// idsPerSearch bounds the ids of one _id search.
const idsPerSearch = 50

// current reads the server's current resources of typ among files: id →
// JSON.
func (in *installer) current(ctx context.Context, typ string, files []*igpackage.File) (map[string][]byte, error) {
	out := map[string][]byte{}
	for start := 0; start < len(files); start += idsPerSearch {
		ids := make([]string, 0, idsPerSearch)
		for _, f := range files[start:min(start+idsPerSearch, len(files))] {
			ids = append(ids, f.ID)
		}
		var page struct {
			Entry []struct {
				Resource json.RawMessage `json:"resource"`
			} `json:"entry"`
		}
		q := fmt.Sprintf("/%s?_id=%s&_count=%d", typ, url.QueryEscape(strings.Join(ids, ",")), idsPerSearch)
		if err := in.getJSON(ctx, q, &page); err != nil {
			return nil, fmt.Errorf("read the installed %s resources: %w", typ, err)
		}
		for _, e := range page.Entry {
			var head struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(e.Resource, &head) == nil {
				out[head.ID] = e.Resource
			}
		}
	}
	return out, nil
}

// transaction writes files in one transaction Bundle; a refusal names the
// file of the entry at fault.
func (in *installer) transaction(ctx context.Context, files []*igpackage.File) error {
	status, body, err := in.do(ctx, http.MethodPost, "/", igpackage.Transaction(files))
	if err != nil {
		return err
	}
	if status == http.StatusOK {
		return nil
	}
	var r fhirReply
	_ = json.Unmarshal(body, &r)
	for _, is := range r.Issue {
		for _, x := range is.Expression {
			if i := igpackage.EntryIndex(x); i >= 0 && i < len(files) {
				return &igpackage.Error{File: files[i].Path, Reason: fmt.Sprintf("refused by the server (%d): %s; nothing of the package was written", status, r.diagnostics())}
			}
		}
	}
	return fmt.Errorf("%d %s: %s; nothing of the package was written", status, http.StatusText(status), r.diagnostics())
}

// getJSON reads a FHIR JSON answer of a GET into v.
func (in *installer) getJSON(ctx context.Context, path string, v any) error {
	status, body, err := in.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var r fhirReply
		_ = json.Unmarshal(body, &r)
		return fmt.Errorf("%d %s: %s", status, http.StatusText(status), r.diagnostics())
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	return nil
}

// do sends one request to the loader's server.
func (in *installer) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, in.l.base+path, r)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", server.FHIRJSON)
	req.Header.Set("Authorization", "Bearer "+in.l.token)
	if body != nil {
		req.Header.Set("Content-Type", server.FHIRJSON)
		req.Header.Set("Prefer", "return=minimal")
	}
	resp, err := in.l.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return resp.StatusCode, out, nil
}

// installPackages installs the loader's packages in order, stopping at the
// first that fails.
func (l *loader) installPackages(ctx context.Context, cfg *config, stdout io.Writer) error {
	examples, _ := strconv.ParseBool(cfg.str("examples")) // checked by prepareLoad
	in := &installer{l: l, examples: examples, out: stdout}
	for _, p := range l.packages {
		if err := in.install(ctx, p); err != nil {
			fmt.Fprintf(stdout, "FAILED %s: %v\n", p, err)
			return fmt.Errorf("load: package %s not installed: %w", p, err)
		}
	}
	return nil
}

// profilePolicy reads --unknown-profiles and --required-profiles.
func profilePolicy(cfg *config) (schemacheck.Option, error) {
	p, err := schemacheck.ParsePolicy(cfg.str("unknown-profiles"), cfg.str("required-profiles"))
	if err != nil {
		return nil, fmt.Errorf("--unknown-profiles or --required-profiles: %w", err)
	}
	return schemacheck.WithPolicy(p), nil
}
