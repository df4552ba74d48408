package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/document"
)

// InstantLayout renders meta.lastUpdated: a FHIR instant in UTC with milliseconds.
const InstantLayout = "2006-01-02T15:04:05.000Z07:00"

// prepared is a parsed, checked resource waiting for its id and version.
type prepared struct {
	typ      string
	doc      bson.D
	numText  []document.NumText
	warnings []Issue
	// reg is the tenant's search registry the version is indexed with.
	reg *search.Registry
}

// prepare parses body and checks what every write needs: a JSON object of
// type typ whose id (for updates) matches the URL, passing the validator.
func (s *Store) prepare(ctx context.Context, tenant, typ, id string, body []byte, opts WriteOptions, check bool) (*prepared, error) {
	dec, err := document.FromJSON(body, s.opts.MaxDepth)
	if err != nil {
		var se *document.SyntaxError
		if errors.As(err, &se) {
			return nil, syntaxIssue("structure", se.Msg, prefixPath(typ, se.Path))
		}
		return nil, err
	}
	rt, ok := lookup(dec.Doc, "resourceType").(string)
	switch {
	case !ok:
		return nil, syntaxIssue("required", "the resource has no resourceType", "")
	case rt != typ:
		return nil, syntaxIssue("invalid", fmt.Sprintf("resourceType %q does not match the %s endpoint", rt, typ), "resourceType")
	}
	if err := checkBodyID(typ, id, dec.Doc); err != nil {
		return nil, err
	}
	if m, present := lookupOK(dec.Doc, "meta"); present {
		if _, ok := m.(bson.D); !ok {
			return nil, &InvalidError{Issues: []Issue{{Severity: "error", Code: "structure", Diagnostics: "meta must be an object", Expression: typ + ".meta"}}}
		}
	}
	if typ == "StructureDefinition" {
		completeElementIDs(dec.Doc)
	}
	p := &prepared{typ: typ, doc: dec.Doc, numText: dec.NumText}
	if s.opts.Validate != nil {
		find := func(ctx context.Context, typ, condition string) ([][]byte, error) {
			if s.opts.Registry == nil { // a store that cannot search knows no definitions
				return nil, nil
			}
			matches, err := s.matchCondition(ctx, tenant, typ, condition)
			out := make([][]byte, len(matches))
			for i, m := range matches {
				out[i] = m.JSON
			}
			return out, err
		}
		resource, _ := newJSONConverter(dec.NumText).value(dec.Doc).(map[string]any)
		warnings, err := s.opts.Validate(ctx, Validation{Tenant: tenant, Type: typ, Body: body, Resource: resource, Lenient: opts.Lenient, Check: check, Find: find,
			Profiles: opts.Profiles, Definitions: s.Definitions(tenant), Bundle: opts.bundle})
		if err != nil {
			return nil, err
		}
		p.warnings = warnings
	}
	if err := s.prepareSearch(ctx, tenant, p, body); err != nil {
		return nil, err
	}
	return p, nil
}

// Check runs every check a create (id empty) or update of typ/id in tenant
// would run and stores nothing: the $validate operation.
func (s *Store) Check(ctx context.Context, tenant, typ, id string, body []byte, opts WriteOptions) ([]Issue, error) {
	if err := s.checkType(typ); err != nil {
		return nil, err
	}
	if id != "" {
		if err := ValidateID(id); err != nil {
			return nil, err
		}
	}
	p, err := s.prepare(ctx, tenant, typ, id, body, opts, true)
	if err != nil {
		return nil, err
	}
	return p.warnings, nil
}

func checkBodyID(typ, urlID string, doc bson.D) error {
	v, present := lookupOK(doc, "id")
	if urlID == "" { // create: the server assigns the id and ignores the client's
		return nil
	}
	bodyID, isString := v.(string)
	switch {
	case !present:
		return syntaxIssue("required", fmt.Sprintf("the resource has no id; an update needs id %q in the body", urlID), typ+".id")
	case !isString:
		return syntaxIssue("structure", "id must be a string", typ+".id")
	case bodyID != urlID:
		return syntaxIssue("invalid", fmt.Sprintf("id %q in the body does not match id %q in the URL", bodyID, urlID), typ+".id")
	}
	return nil
}

// finish sets id and meta.versionId/lastUpdated and returns the stored BSON
// and the JSON the client will see.
func (p *prepared) finish(id string, vid int, ts time.Time) (bson.D, bson.Raw, []byte, error) {
	doc := setKey(p.doc, "id", id, "resourceType")
	meta, _ := lookup(doc, "meta").(bson.D)
	meta = setKey(meta, "versionId", fmt.Sprint(vid), "")
	meta = setKey(meta, "lastUpdated", ts.UTC().Format(InstantLayout), "versionId")
	doc = setKey(doc, "meta", meta, "id")
	raw, err := document.Marshal(doc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode %s/%s: %w", p.typ, id, err)
	}
	out, err := document.ToJSON(raw, p.numText)
	if err != nil {
		return nil, nil, nil, err
	}
	return doc, raw, out, nil
}

func lookup(doc bson.D, key string) any {
	v, _ := lookupOK(doc, key)
	return v
}

func lookupOK(doc bson.D, key string) (any, bool) {
	for _, e := range doc {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// setKey returns doc with key set to v: in place when present, otherwise
// right after the key named after (or first when after is absent or empty).
func setKey(doc bson.D, key string, v any, after string) bson.D {
	out := make(bson.D, 0, len(doc)+1)
	for _, e := range doc {
		if e.Key == key {
			e.Value = v
			out = append(out, e)
			continue
		}
		out = append(out, e)
	}
	if _, ok := lookupOK(doc, key); ok {
		return out
	}
	pos := 0
	for i, e := range out {
		if e.Key == after {
			pos = i + 1
		}
	}
	out = append(out, bson.E{})
	copy(out[pos+1:], out[pos:])
	out[pos] = bson.E{Key: key, Value: v}
	return out
}

func syntaxIssue(code, msg, expr string) *InvalidError {
	return &InvalidError{Syntax: true, Issues: []Issue{{Severity: "error", Code: code, Diagnostics: msg, Expression: expr}}}
}

func prefixPath(typ, path string) string {
	if path == "" {
		return ""
	}
	return typ + "." + path
}
