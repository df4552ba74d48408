package fhirschema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Issue is one problem found in a resource, in OperationOutcome terms.
type Issue struct {
	Severity    string // error or warning
	Code        string // structure, required, value, code-invalid, invalid
	Diagnostics string
	Expression  string // FHIRPath location such as Patient.name[0].given[1]
	// Key and Source name the invariant an issue of code "invariant"
	// reports: its key (per-1) and the canonical URL of the
	// StructureDefinition that defines it.
	Key, Source string
}

// Result is what validation found. Valid reports whether there is no error.
type Result struct {
	Issues []Issue
}

// Valid reports whether no issue is an error.
func (r *Result) Valid() bool {
	for _, is := range r.Issues {
		if is.Severity == "error" {
			return false
		}
	}
	return true
}

// Options tune one validation.
type Options struct {
	// Lenient turns unknown elements into warnings instead of errors.
	Lenient bool
	// Extensions knows extension definitions beyond the core ones the
	// validator embeds; nil knows none.
	Extensions ExtensionTypes
	// BestPractice evaluates the warning-severity invariants too (dom-6,
	// the name rules of conformance resources), as $validate does; a write
	// needs only the error-severity ones, the warnings never refusing it.
	BestPractice bool
}

// Validator checks resources against the official R4 JSON Schema. It is
// safe for concurrent use.
type Validator struct {
	schemas map[string]*jsonschema.Schema
	// elements describes every property of every definition.
	elements map[string]map[string]*element
	// required lists primitive elements with minimum cardinality 1.
	required map[string][]string
	// present lists, per definition, the properties the schema requires.
	present map[string][]string
	// coreExtensions holds the value types of core extension definitions.
	coreExtensions map[string][]string
	// invariants are the core invariants, compiled; nil checks none.
	invariants *invariantTable
}

// requiredJSON lists, per schema definition, the primitive elements whose
// minimum cardinality is 1 (see genrequired.go).
//
//go:embed required.json
var requiredJSON []byte

const schemaURL = "fhir.schema.json"

// NewValidator compiles the schema of every resource type. Nested resources
// (contained, Bundle entries, Parameters) are checked against their own type
// rather than through the schema's 146-way oneOf, which is slow and whose
// errors name every type but the right one.
func NewValidator() (*Validator, error) {
	var root map[string]any
	if err := json.Unmarshal(SchemaJSON, &root); err != nil {
		return nil, fmt.Errorf("read FHIR schema: %w", err)
	}
	defs, _ := root["definitions"].(map[string]any)
	if defs == nil {
		return nil, fmt.Errorf("read FHIR schema: no definitions")
	}
	addCanonicalTwins(defs)
	correctSchema(defs)
	defs["ResourceList"] = map[string]any{
		"type":       "object",
		"required":   []any{"resourceType"},
		"properties": map[string]any{"resourceType": map[string]any{"type": "string"}},
	}
	tables, err := readSchemaTables()
	if err != nil {
		return nil, err
	}
	v := &Validator{schemas: map[string]*jsonschema.Schema{}, elements: tables.elements, present: tables.present}
	if err := json.Unmarshal(requiredJSON, &v.required); err != nil {
		return nil, fmt.Errorf("read required elements: %w", err)
	}
	if err := json.Unmarshal(coreExtensionsJSON, &v.coreExtensions); err != nil {
		return nil, fmt.Errorf("read core extensions: %w", err)
	}
	if v.invariants, err = newInvariantTable(v.elements); err != nil {
		return nil, err
	}
	patched, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("prepare FHIR schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft6
	if err := c.AddResource(schemaURL, bytes.NewReader(patched)); err != nil {
		return nil, fmt.Errorf("load FHIR schema: %w", err)
	}
	for _, t := range ResourceTypes() {
		s, err := c.Compile(schemaURL + "#/definitions/" + t)
		if err != nil {
			return nil, fmt.Errorf("compile schema of %s: %w", t, err)
		}
		v.schemas[t] = s
	}
	return v, nil
}

// Validate checks a JSON resource of type typ. A body that is not a JSON
// object with that resourceType yields a structure error at the root.
func (v *Validator) Validate(typ string, body []byte, opts Options) *Result {
	return v.validate(typ, body, opts, false)
}

// validate is Validate, with the schema run on every resource when always
// is set: the walk alone answers the same for every resource.
func (v *Validator) validate(typ string, body []byte, opts Options, always bool) *Result {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return &Result{Issues: []Issue{{Severity: "error", Code: "structure", Diagnostics: "the body is not valid JSON: " + err.Error()}}}
	}
	return v.validateDecoded(typ, doc, opts, always)
}

// ValidateDecoded is Validate of a body already decoded as encoding/json
// decodes it with UseNumber. It does not modify doc.
func (v *Validator) ValidateDecoded(typ string, doc any, opts Options) *Result {
	return v.validateDecoded(typ, doc, opts, false)
}

func (v *Validator) validateDecoded(typ string, doc any, opts Options, always bool) *Result {
	w := &walker{v: v, opts: opts, seen: map[string]bool{}, alwaysSchema: always}
	w.resource(typ, doc, typ, false)
	if !w.failed() {
		w.checkInvariants()
	}
	sort.SliceStable(w.issues, func(i, j int) bool { return w.issues[i].Expression < w.issues[j].Expression })
	return &Result{Issues: w.issues}
}

// walker collects the issues of one resource and the resources nested in it.
type walker struct {
	v      *Validator
	opts   Options
	issues []Issue
	seen   map[string]bool
	// schemaWould is set when a value breaks a rule of the schema that
	// the walk does not report itself (an unknown or missing property, a
	// code outside its enumeration, a string off its pattern): the schema
	// then validates the resource, and its issues say what is wrong.
	schemaWould bool
	// alwaysSchema validates with the schema even when the walk found
	// nothing it would reject (for tests comparing both ways).
	alwaysSchema bool
	// scope is the resource being walked; checks are the invariants to
	// evaluate once the structure is found valid.
	scope  *resourceScope
	checks []pendingCheck
}

// failed reports whether an error was found.
func (w *walker) failed() bool {
	for _, is := range w.issues {
		if is.Severity == "error" {
			return true
		}
	}
	return false
}

// add records an issue unless one of the same severity is already at its
// location: one problem, one issue, whichever check saw it first. Each
// invariant broken is a problem of its own.
func (w *walker) add(is Issue) {
	key := is.Severity + "|" + is.Expression + "|" + is.Key
	if w.seen[key] {
		return
	}
	w.seen[key] = true
	w.issues = append(w.issues, is)
}

func (w *walker) errorf(code, expr, format string, args ...any) {
	w.add(Issue{Severity: "error", Code: code, Expression: expr, Diagnostics: fmt.Sprintf(format, args...)})
}

// resource validates doc as a resource of type typ located at path;
// contained tells a contained resource, whose %rootResource is its
// container's.
func (w *walker) resource(typ string, doc any, path string, contained bool) {
	obj, ok := doc.(map[string]any)
	if !ok {
		w.errorf("structure", path, "a resource must be a JSON object")
		return
	}
	rt, _ := obj["resourceType"].(string)
	if rt == "" {
		w.errorf("required", path, "the resource has no resourceType")
		return
	}
	if typ == "" { // nested: the resource names its own type
		typ = rt
	}
	schema := w.v.schemas[typ]
	if schema == nil || rt != typ {
		w.errorf("invalid", path+".resourceType", "unknown or unexpected resourceType %q", rt)
		return
	}
	restore := w.enterResource(obj, contained)
	at := &loc{root: path}
	w.object(obj, at, typ)
	w.domainInvariants(obj, at, typ)
	restore()
	if len(w.issues) == 0 && !w.schemaWould && !w.alwaysSchema {
		return // the schema finds nothing when the walk does not
	}
	pruned := CopyJSON(obj) // the caller's document stays as it is
	pruneExtensionNulls(pruned)
	if err := schema.Validate(pruned); err != nil {
		if ve, ok := err.(*jsonschema.ValidationError); ok {
			w.schemaError(ve, path, typ, "")
		} else {
			w.errorf("exception", path, "validation failed: %v", err)
		}
	}
}

// CopyJSON copies a decoded JSON value, its objects and arrays deeply.
func CopyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, child := range x {
			out[k] = CopyJSON(child)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, child := range x {
			out[i] = CopyJSON(child)
		}
		return out
	}
	return v
}

// pruneExtensionNulls removes the nulls FHIR JSON allows: in an array of
// primitives, a null whose _element twin carries an extension, and nulls in
// the _element array itself. The schema knows nothing of this pairing.
func pruneExtensionNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if strings.HasPrefix(k, "_") {
				continue
			}
			arr, ok := child.([]any)
			ext, hasExt := x["_"+k].([]any)
			if ok && hasExt {
				kept := arr[:0:0]
				for i, item := range arr {
					if item != nil || i >= len(ext) || ext[i] == nil {
						kept = append(kept, item)
					}
				}
				x[k] = kept
				keptExt := ext[:0:0]
				for _, e := range ext {
					if e != nil {
						keptExt = append(keptExt, e)
					}
				}
				x["_"+k] = keptExt
			}
		}
		for _, child := range x {
			pruneExtensionNulls(child)
		}
	case []any:
		for _, child := range x {
			pruneExtensionNulls(child)
		}
	}
}

var (
	refMsg      = regexp.MustCompile(`^doesn't validate with '?.*#?/definitions/([A-Za-z_.]+)'?$`)
	quotedNames = regexp.MustCompile(`'([^']*)'`)
)

// schemaError turns the leaves of a schema failure into issues; dataType is
// the FHIR type of the value being checked, learnt from the $ref above it.
func (w *walker) schemaError(e *jsonschema.ValidationError, root, def, dataType string) {
	if m := refMsg.FindStringSubmatch(e.Message); m != nil {
		dataType = m[1]
	}
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			w.schemaError(c, root, def, dataType)
		}
		return
	}
	at := w.v.fhirPath(root, def, e.InstanceLocation)
	keyword := e.KeywordLocation[strings.LastIndex(e.KeywordLocation, "/")+1:]
	switch keyword {
	case "additionalProperties":
		for _, m := range quotedNames.FindAllStringSubmatch(e.Message, -1) {
			sev := "error"
			if w.opts.Lenient {
				sev = "warning"
			}
			w.add(Issue{Severity: sev, Code: "structure", Expression: at + "." + m[1], Diagnostics: fmt.Sprintf("unknown element %q", m[1])})
		}
	case "required":
		for _, m := range quotedNames.FindAllStringSubmatch(e.Message, -1) {
			w.errorf("required", at+"."+m[1], "missing required element %q", m[1])
		}
	case "type":
		w.errorf("structure", at, "wrong JSON type: %s", e.Message)
	case "enum":
		w.errorf("code-invalid", at, "%s", strings.Replace(e.Message, "value must be", "the code must be", 1))
	case "pattern":
		w.errorf("value", at, "%s", patternMessage(dataType))
	case "const":
		w.errorf("invalid", at, "%s", e.Message)
	default:
		w.errorf("invalid", at, "%s", e.Message)
	}
}

func patternMessage(dataType string) string {
	if dataType == "" {
		return "the value has an invalid format"
	}
	return fmt.Sprintf("the value is not a valid FHIR %s", dataType)
}

// fhirPath turns a JSON pointer (/name/0/given/1) into a value of
// definition def at root into FHIRPath (Patient.name[0].given[1]): choice
// elements as value.ofType(Quantity), a _name twin as its primitive.
func (v *Validator) fhirPath(root, def, pointer string) string {
	var b strings.Builder
	b.WriteString(root)
	for _, seg := range strings.Split(pointer, "/") {
		if seg == "" {
			continue
		}
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if _, err := strconv.Atoi(seg); err == nil {
			b.WriteString("[" + seg + "]")
			continue
		}
		el := v.elements[def][seg]
		if el == nil {
			b.WriteString("." + seg)
			def = ""
			continue
		}
		b.WriteString("." + el.path)
		def = el.typ
	}
	return b.String()
}
