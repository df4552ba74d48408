package profile_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"

	"fhirstore/fhirschema/profile"
)

// igPackage is a FHIR NPM package read for tests: its conformance
// resources and its examples.
type igPackage struct {
	defs     *profile.Memory
	byType   map[string][]string       // resource type → URLs
	examples map[string]map[string]any // file name → resource
}

var (
	pkgMu    sync.Mutex
	packages = map[string]*igPackage{}
)

// usCore reads the repository's testdata/ig/hl7.fhir.us.core-VERSION.tgz once.
func usCore(t testing.TB, version string) *igPackage {
	t.Helper()
	pkgMu.Lock()
	defer pkgMu.Unlock()
	if p := packages[version]; p != nil {
		return p
	}
	f, err := os.Open("../../testdata/ig/hl7.fhir.us.core-" + version + ".tgz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := readPackage(f)
	if err != nil {
		t.Fatalf("read US Core %s: %v", version, err)
	}
	packages[version] = p
	return p
}

func readPackage(r io.Reader) (*igPackage, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	p := &igPackage{defs: profile.NewMemory(), examples: map[string]map[string]any{}, byType: map[string][]string{}}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return p, nil
		}
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(h.Name, ".json") || strings.HasSuffix(h.Name, "package.json") || strings.Contains(h.Name, ".index.") {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		res, err := decode(data)
		if err != nil {
			return nil, err
		}
		if strings.Contains(h.Name, "/example/") {
			p.examples[path.Base(h.Name)] = res
		} else if p.defs.Add(res) {
			typ, _ := res["resourceType"].(string)
			url, _ := res["url"].(string)
			p.byType[typ] = append(p.byType[typ], url)
		}
	}
}

func decode(data []byte) (map[string]any, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

// urls lists the URLs of the package's resources of type typ, sorted.
func (p *igPackage) urls(typ string) []string {
	out := append([]string(nil), p.byType[typ]...)
	sort.Strings(out)
	return out
}
