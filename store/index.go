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
// resourceJSON: it reads doc rather than parsing the JSON again.
func (s *Store) indexParsed(reg *search.Registry, typ string, doc bson.D, numText []document.NumText, resourceJSON []byte) (bson.Raw, bson.Raw, error) {
	if reg == nil {
		return nil, nil, nil
	}
	if res, ok := newJSONConverter(numText).value(doc).(map[string]any); ok {
		return indexValues(reg, typ, res)
	}
	return s.indexWith(reg, typ, resourceJSON)
}

// jsonConverter turns a parsed document into what encoding/json decodes
// with UseNumber: numbers as the text the client wrote (texts, by their
// document.NumText path) or else their canonical text.
type jsonConverter struct {
	texts map[string]string
	path  []byte // of the value converted, as document.NumText spells it
}

// newJSONConverter converts documents whose numbers have the texts numText.
func newJSONConverter(numText []document.NumText) *jsonConverter {
	c := &jsonConverter{}
	if len(numText) > 0 {
		c.texts = make(map[string]string, len(numText))
		for _, t := range numText {
			c.texts[t.Path] = t.Text
		}
	}
	return c
}

func (c *jsonConverter) value(v any) any {
	switch x := v.(type) {
	case bson.D:
		m := make(map[string]any, len(x))
		for _, e := range x {
			n := len(c.path)
			if c.texts != nil {
				if n > 0 {
					c.path = append(c.path, '.')
				}
				c.path = append(c.path, e.Key...)
			}
			conv := c.value(e.Value)
			c.path = c.path[:n]
			if conv == nil && e.Value != nil {
				return nil
			}
			m[e.Key] = conv
		}
		return m
	case bson.A:
		a := make([]any, len(x))
		for i, e := range x {
			n := len(c.path)
			if c.texts != nil {
				c.path = append(strconv.AppendInt(append(c.path, '['), int64(i), 10), ']')
			}
			a[i] = c.value(e)
			c.path = c.path[:n]
			if a[i] == nil && e != nil {
				return nil
			}
		}
		return a
	case string, bool:
		return x
	case int32, int64, float64:
		if text, ok := c.texts[string(c.path)]; ok {
			return json.Number(text)
		}
		switch n := x.(type) {
		case int32:
			return json.Number(strconv.FormatInt(int64(n), 10))
		case int64:
			return json.Number(strconv.FormatInt(n, 10))
		default:
			return json.Number(document.FormatFloat(n.(float64)))
		}
	}
	return nil
}

// indexValues is indexWith of the resource res, decoded with UseNumber.
func indexValues(reg *search.Registry, typ string, res map[string]any) (bson.Raw, bson.Raw, error) {
	idx, sortDoc := reg.Extract(typ, res)
	idxRaw, err := document.Marshal(idx)
	if err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
	if len(sortDoc) == 0 { // no _sort key has a value: the row has no sort field
		return idxRaw, nil, nil
	}
	sortRaw, err := document.Marshal(sortDoc)
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
