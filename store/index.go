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
// idx and sort documents of its current row. Every sortable parameter gets
// a sort value, missing ones a sentinel that orders them last either way,
// so that paging positions are always complete.
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
	have := make(map[string]bool, len(sortDoc))
	for _, e := range sortDoc {
		have[e.Key] = true
	}
	for _, p := range reg.Params(typ) {
		if a, d, ok := sentinels(p.Type); ok && !have[p.Code] {
			sortDoc = append(sortDoc, bson.E{Key: p.Code, Value: bson.D{{Key: "a", Value: a}, {Key: "d", Value: d}}})
		}
	}
	idxRaw, err := bson.Marshal(idx)
	if err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
	sortRaw, err := bson.Marshal(sortDoc)
	if err != nil {
		return nil, nil, fmt.Errorf("index %s: %w", typ, err)
	}
	return idxRaw, sortRaw, nil
}

// sentinels are the sort values of a parameter without a value: after every
// real value ascending (a) and descending (d).
func sentinels(paramType string) (a, d any, ok bool) {
	switch paramType {
	case "string", "token", "reference", "uri":
		return "\U0010FFFF", "", true
	case "date":
		return time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true
	case "number", "quantity":
		return math.MaxFloat64, -math.MaxFloat64, true
	}
	return nil, nil, false
}
