// Package igpackage reads FHIR NPM packages (implementation guides): a
// gzipped tar whose package/ folder holds package.json, the guide's
// conformance resources and, in package/example/, its examples. Reading
// checks the whole package (gzip, tar, every JSON file, every resource's
// type and id) so that a malformed one is refused before anything of it
// is used.
package igpackage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"fhirstore/fhirschema"
)

// Limits of a package, against archives that expand without end.
const (
	MaxFileBytes  = 64 << 20
	MaxTotalBytes = 1 << 30
)

// CoreName is the package of the R4 core definitions, built into the
// server: a dependency on it is always met.
const CoreName = "hl7.fhir.r4.core"

// Package is a package's manifest and resources.
type Package struct {
	Name, Version, Canonical, Title string
	FHIRVersions                    []string
	// Dependencies are the packages this one names, by name.
	Dependencies []Dependency
	// Resources are the conformance resources of package/, in file name
	// order; Examples those of package/example/.
	Resources, Examples []*File
	// Skipped says which files were left out, and why: the second copy
	// of an ImplementationGuide that older IG publishers write as
	// package/ig-r4.json.
	Skipped []string
}

// Dependency is a package another one depends on.
type Dependency struct {
	Name, Version string
}

// File is one resource of a package.
type File struct {
	// Path is the file's name in the archive (package/StructureDefinition-x.json).
	Path string
	// Type and ID are the resource's resourceType and id; URL and Version
	// its canonical url and version, when it has them.
	Type, ID, URL, Version string
	// JSON is the resource, compacted.
	JSON []byte
}

// Error is a package that cannot be used, and why: File names the file at
// fault, empty for the archive itself.
type Error struct {
	File, Reason string
}

// Error names the file and the reason.
func (e *Error) Error() string {
	if e.File == "" {
		return "package: " + e.Reason
	}
	return "package: " + e.File + ": " + e.Reason
}

func fail(file, format string, args ...any) *Error {
	return &Error{File: file, Reason: fmt.Sprintf(format, args...)}
}

// ReadFile reads the package at path.
func ReadFile(name string) (*Package, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open package: %w", err)
	}
	defer f.Close()
	return Read(f)
}

// Read reads a package from r (a .tgz). Every JSON file of package/ and
// package/example/ must be a resource with a resourceType of R4 and an
// id; the other folders (other/, xml/, openapi/) and files are skipped.
func Read(r io.Reader) (*Package, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return nil, fail("", "not a gzip file (a FHIR package is a .tgz)")
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fail("", "not a gzip file: %v", err)
	}
	p := &Package{}
	var manifest []byte
	total := int64(0)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fail("", "not a tar archive: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		kind := classify(name)
		if h.Typeflag != tar.TypeReg || kind == skip {
			continue
		}
		if h.Size > MaxFileBytes {
			return nil, fail(name, "larger than %d bytes", MaxFileBytes)
		}
		if total += h.Size; total > MaxTotalBytes {
			return nil, fail("", "larger than %d bytes unpacked", MaxTotalBytes)
		}
		body, err := io.ReadAll(io.LimitReader(tr, MaxFileBytes+1))
		if err != nil {
			return nil, fail(name, "cannot be read: %v", err)
		}
		if kind == manifestFile {
			manifest = body
			continue
		}
		f, err := readResource(name, body)
		if err != nil {
			return nil, err
		}
		if kind == exampleFile {
			p.Examples = append(p.Examples, f)
		} else {
			p.Resources = append(p.Resources, f)
		}
	}
	if manifest == nil {
		return nil, fail("", "no package/package.json: not a FHIR package")
	}
	if err := p.readManifest(manifest); err != nil {
		return nil, err
	}
	return p, p.check()
}

// kinds of archive entries.
const (
	skip = iota
	manifestFile
	resourceFile
	exampleFile
)

// classify says what an archive entry is.
func classify(name string) int {
	dir, file := path.Split(name)
	switch {
	case name == "package/package.json":
		return manifestFile
	case !strings.HasSuffix(file, ".json") || strings.HasPrefix(file, "."):
		return skip // .index.json and the like describe the package, not its content
	case dir == "package/":
		return resourceFile
	case dir == "package/example/":
		return exampleFile
	}
	return skip
}

// idPattern is the FHIR id datatype.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// readResource reads one resource file.
func readResource(name string, body []byte) (*File, error) {
	var head struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
		URL          string `json:"url"`
		Version      string `json:"version"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fail(name, "not JSON: %v", err)
	}
	switch {
	case head.ResourceType == "":
		return nil, fail(name, "not a FHIR resource: no resourceType")
	case !fhirschema.IsResourceType(head.ResourceType):
		return nil, fail(name, "resourceType %q is not an R4 resource type", head.ResourceType)
	case !idPattern.MatchString(head.ID):
		return nil, fail(name, "the resource has no valid id (%q): package resources are installed by their ids", head.ID)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return nil, fail(name, "not JSON: %v", err)
	}
	return &File{Path: name, Type: head.ResourceType, ID: head.ID, URL: head.URL, Version: head.Version, JSON: compact.Bytes()}, nil
}

// readManifest reads package.json.
func (p *Package) readManifest(body []byte) error {
	var m struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Canonical    string            `json:"canonical"`
		Title        string            `json:"title"`
		FHIRVersions []string          `json:"fhirVersions"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return fail("package/package.json", "not JSON: %v", err)
	}
	if m.Name == "" || m.Version == "" {
		return fail("package/package.json", "no name or version")
	}
	p.Name, p.Version, p.Canonical, p.Title, p.FHIRVersions = m.Name, m.Version, m.Canonical, m.Title, m.FHIRVersions
	for name, v := range m.Dependencies {
		p.Dependencies = append(p.Dependencies, Dependency{Name: name, Version: v})
	}
	sort.Slice(p.Dependencies, func(i, j int) bool { return p.Dependencies[i].Name < p.Dependencies[j].Name })
	return nil
}

// check refuses a package for another FHIR version, or two different
// files of one resource; of two identical ones (package/ig-r4.json beside
// the ImplementationGuide's own file) it keeps the first. Two different
// copies of the ImplementationGuide, as older IG publishers write them,
// keep the one named ImplementationGuide-[id].json and skip the other.
func (p *Package) check() error {
	for _, v := range p.FHIRVersions {
		if !strings.HasPrefix(v, "4.0") {
			return fail("package/package.json", "for FHIR %s; this server speaks R4 (4.0.1)", strings.Join(p.FHIRVersions, ", "))
		}
	}
	var err error
	if p.Resources, err = p.distinct(p.Resources); err != nil {
		return err
	}
	p.Examples, err = p.distinct(p.Examples)
	return err
}

// distinct sorts files by name and drops the copies of a resource.
func (p *Package) distinct(files []*File) ([]*File, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	seen := map[string]int{}
	out := files[:0]
	for _, f := range files {
		key := f.Type + "/" + f.ID
		i, dup := seen[key]
		if !dup {
			seen[key] = len(out)
			out = append(out, f)
			continue
		}
		other := out[i]
		switch {
		case bytes.Equal(other.JSON, f.JSON):
		case f.Type == "ImplementationGuide":
			keep, skip := canonicalCopy(other, f)
			out[i] = keep
			p.Skipped = append(p.Skipped, fmt.Sprintf("%s: another copy of %s, which differs; %s is kept", skip.Path, key, keep.Path))
		default:
			return nil, fail(f.Path, "%s is also in %s, different", key, other.Path)
		}
	}
	return out, nil
}

// canonicalCopy chooses between two files of one ImplementationGuide the
// one its type and id name (ImplementationGuide-[id].json).
func canonicalCopy(a, b *File) (keep, skip *File) {
	if path.Base(b.Path) == "ImplementationGuide-"+b.ID+".json" {
		return b, a
	}
	return a, b
}

// Key is "name#version", the package's usual name.
func (p *Package) Key() string { return p.Name + "#" + p.Version }
