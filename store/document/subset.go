package document

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// subsettedTag marks a resource of which only some elements are returned.
var subsettedTag = bson.D{{Key: "system", Value: "http://terminology.hl7.org/CodeSystem/v3-ObservationValue"}, {Key: "code", Value: "SUBSETTED"}}

// Subset keeps the top-level elements of a resource for which keep is
// true, in their order and with their number text, and tags the result
// SUBSETTED in meta.tag (as _elements and _summary do).
func Subset(resourceJSON []byte, keep func(key string) bool) ([]byte, error) {
	dec, err := FromJSON(resourceJSON, 0)
	if err != nil {
		return nil, fmt.Errorf("subset resource: %w", err)
	}
	out := bson.D{}
	for _, e := range dec.Doc {
		if keep(e.Key) {
			out = append(out, e)
		}
	}
	raw, err := bson.Marshal(tagSubsetted(out))
	if err != nil {
		return nil, fmt.Errorf("subset resource: %w", err)
	}
	return ToJSON(raw, dec.NumText)
}

// tagSubsetted adds the SUBSETTED tag to meta.tag.
func tagSubsetted(doc bson.D) bson.D {
	for i, e := range doc {
		if e.Key != "meta" {
			continue
		}
		meta, _ := e.Value.(bson.D)
		for j, m := range meta {
			if m.Key == "tag" {
				tags, _ := m.Value.(bson.A)
				meta[j].Value = append(tags, subsettedTag)
				doc[i].Value = meta
				return doc
			}
		}
		doc[i].Value = append(meta, bson.E{Key: "tag", Value: bson.A{subsettedTag}})
		return doc
	}
	return doc
}
