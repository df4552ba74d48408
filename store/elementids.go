package store

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// completeElementIDs gives every element of a StructureDefinition's
// differential and snapshot that has a path but no id the id the HL7
// tooling gives it: its path, each segment followed by the slice name of
// the element it is under (Patient.identifier:mrn.system). Hand-written
// profiles often leave ids out; R4 requires them (sdf-14) and snapshot
// generation follows them. Elements with an id keep it.
func completeElementIDs(doc bson.D) {
	for _, part := range []string{"differential", "snapshot"} {
		holder, _ := lookup(doc, part).(bson.D)
		elements, _ := lookup(holder, "element").(bson.A)
		last := map[string]string{} // path → id of the latest element at that path
		for i, e := range elements {
			el, ok := e.(bson.D)
			if !ok {
				continue
			}
			path, _ := lookup(el, "path").(string)
			id, hasID := lookup(el, "id").(string)
			if path == "" {
				continue
			}
			if !hasID {
				id = elementID(path, el, last)
				elements[i] = append(bson.D{{Key: "id", Value: id}}, el...)
			}
			last[path] = id
		}
	}
}

// elementID is the id of the element at path: the id of the latest element
// at its parent path (or the parent path itself, with the slice names of
// its own ancestors), then its last segment and slice name.
func elementID(path string, el bson.D, last map[string]string) string {
	id := path
	if dot := strings.LastIndexByte(path, '.'); dot >= 0 {
		id = parentID(path[:dot], last) + path[dot:]
	}
	if slice, _ := lookup(el, "sliceName").(string); slice != "" {
		id += ":" + slice
	}
	return id
}

// parentID is the id under which the children of the element at path are
// named.
func parentID(path string, last map[string]string) string {
	if id, ok := last[path]; ok {
		return id
	}
	dot := strings.LastIndexByte(path, '.')
	if dot < 0 {
		return path
	}
	return parentID(path[:dot], last) + path[dot:]
}
