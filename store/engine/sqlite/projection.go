package sqlite

import (
	"encoding/binary"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"fhirstore/store/engine"
)

// projection keeps (include) or drops the named top-level fields; _id is
// always kept.
type projection struct {
	include bool
	fields  map[string]bool
}

// parseProjection reads a projection: fields with 1 (include) or 0
// (exclude), not mixed; a dotted path includes its top-level field.
func parseProjection(p bson.D) (*projection, error) {
	if len(p) == 0 {
		return nil, nil
	}
	pr := &projection{fields: map[string]bool{}}
	mode := 0 // 1 include, -1 exclude
	for _, e := range p {
		on, ok := truth(e.Value)
		if !ok {
			return nil, fmt.Errorf("projection %s: %v: %w", e.Key, e.Value, engine.ErrUnsupported)
		}
		if e.Key == "_id" {
			if !on {
				return nil, fmt.Errorf("projection _id: 0: _id is always kept: %w", engine.ErrUnsupported)
			}
			continue
		}
		top, _, dotted := strings.Cut(e.Key, ".")
		m := -1
		if on {
			m = 1
		}
		switch {
		case top == "" || strings.HasPrefix(top, "$"):
			return nil, fmt.Errorf("projection %s: %w", e.Key, engine.ErrUnsupported)
		case mode != 0 && m != mode:
			return nil, fmt.Errorf("projection %v mixes inclusion and exclusion: %w", p, engine.ErrUnsupported)
		case dotted && !on:
			return nil, fmt.Errorf("projection %s: 0: excluding part of a field: %w", e.Key, engine.ErrUnsupported)
		}
		mode = m
		pr.fields[top] = true
	}
	pr.include = mode >= 0
	return pr, nil
}

// keeps tells whether the projection keeps the top-level field name (a
// nil projection keeps every field).
func (p *projection) keeps(name string) bool {
	return p == nil || name == "_id" || p.fields[name] == p.include
}

// apply returns doc with the projection's fields kept or dropped, in a
// new slice when the projection is set (doc may be SQLite's memory, valid
// only until the statement moves on).
func (p *projection) apply(doc []byte) (bson.Raw, error) {
	if p == nil {
		return doc, nil
	}
	n := 5
	if err := p.each(doc, func(el []byte) { n += len(el) }); err != nil {
		return nil, err
	}
	out := make([]byte, 4, n)
	if err := p.each(doc, func(el []byte) { out = append(out, el...) }); err != nil {
		return nil, err
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out, nil
}

// each calls fn with every element of doc the projection keeps.
func (p *projection) each(doc []byte, fn func(el []byte)) error {
	if len(doc) < 5 {
		return fmt.Errorf("project document: malformed BSON")
	}
	rest := doc[4 : len(doc)-1]
	for len(rest) > 0 {
		el, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return fmt.Errorf("project document: malformed BSON")
		}
		rest = next
		if key := el.Key(); key == "_id" || p.fields[key] == p.include {
			fn(el)
		}
	}
	return nil
}
