package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// index extracts the search values of a resource (its stored JSON) as the
// idx and sort documents of its current row. A parameter without a value
// has no sort value: searches read the rows without one after the others
// (sortedRows).
func (s *Store) index(typ string, resourceJSON []byte) (bson.Raw, bson.Raw, error) {
	reg := s.opts.Registry
	if reg == nil {
		return nil, nil, nil
	}
	var res map[string]any
	dec := json.NewDecoder(bytes.NewReader(resourceJSON))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
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
