package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/document"
)

// index extracts the search values of a resource (its stored JSON) as the
// idx and sort documents of its current row. A parameter without a value
// has no sort value: searches read the rows without one after the others
// (sortedRows).
func (s *Store) index(typ string, resourceJSON []byte) (bson.Raw, bson.Raw, error) {
	return s.indexWith(s.opts.Registry, typ, resourceJSON)
}

// indexWith is index with the parameters of reg (a tenant's registry).
func (s *Store) indexWith(reg *search.Registry, typ string, resourceJSON []byte) (bson.Raw, bson.Raw, error) {
	if reg == nil {
		return nil, nil, nil
	}
	var res map[string]any
	dec := json.NewDecoder(bytes.NewReader(resourceJSON))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
	return indexValues(reg, typ, res)
}

// indexParsed is indexWith of the resource doc (parsed by
// document.FromJSON, numText its numbers' texts) whose JSON is
// resourceJSON: it reads doc rather than parsing the JSON again when no
// number has a text of its own.
func (s *Store) indexParsed(reg *search.Registry, typ string, doc bson.D, numText []document.NumText, resourceJSON []byte) (bson.Raw, bson.Raw, error) {
	if reg == nil {
		return nil, nil, nil
	}
	if len(numText) == 0 {
		if res, ok := jsonValue(doc).(map[string]any); ok {
			return indexValues(reg, typ, res)
		}
	}
	return s.indexWith(reg, typ, resourceJSON)
}

// jsonValue is v, a value of a parsed document, as encoding/json decodes
// its JSON with UseNumber: numbers as their canonical text (as the stored
// JSON renders them when they have no text of their own). A value of any
// other type makes it answer nil.
func jsonValue(v any) any {
	switch x := v.(type) {
	case bson.D:
		m := make(map[string]any, len(x))
		for _, e := range x {
			c := jsonValue(e.Value)
			if c == nil && e.Value != nil {
				return nil
			}
			m[e.Key] = c
		}
		return m
	case bson.A:
		a := make([]any, len(x))
		for i, e := range x {
			if a[i] = jsonValue(e); a[i] == nil && e != nil {
				return nil
			}
		}
		return a
	case string, bool:
		return x
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case float64:
		return json.Number(document.FormatFloat(x))
	}
	return nil
}

// indexValues is indexWith of the resource res, decoded with UseNumber.
func indexValues(reg *search.Registry, typ string, res map[string]any) (bson.Raw, bson.Raw, error) {
	idx, sortDoc := reg.Extract(typ, res)
	idxRaw, err := bson.Marshal(idx)
	if err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
	if len(sortDoc) == 0 { // no _sort key has a value: the row has no sort field
		return idxRaw, nil, nil
	}
	sortRaw, err := bson.Marshal(sortDoc)
	if err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
	return idxRaw, sortRaw, nil
}

// leastSortValue is a value no sort value of a parameter of paramType is
// below: a filter of "at least it" holds for the rows that have one.
func leastSortValue(paramType string) any {
	switch paramType {
	case "date":
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	case "number", "quantity":
		return -math.MaxFloat64
	}
	return ""
}
