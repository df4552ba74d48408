package igpackage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Transaction is a transaction Bundle writing files by their ids (PUT
// Type/id), in order: entry i is files[i].
func Transaction(files []*File) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Bundle","type":"transaction","entry":[`)
	for i, f := range files {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"resource":`)
		b.Write(f.JSON)
		fmt.Fprintf(&b, `,"request":{"method":"PUT","url":%s}}`, strconv.Quote(f.Type+"/"+f.ID))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// Decode returns the file's resource as a generic map, numbers as
// json.Number (what the profile validator reads).
func (f *File) Decode() (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(f.JSON))
	dec.UseNumber()
	var r map[string]any
	if err := dec.Decode(&r); err != nil {
		return nil, fail(f.Path, "not JSON: %v", err)
	}
	return r, nil
}

// Same reports whether stored, a resource as the server returns it, is
// f's resource: equal but for meta.versionId and meta.lastUpdated, which
// the server sets.
func (f *File) Same(stored []byte) bool {
	a, err := canonicalJSON(f.JSON)
	if err != nil {
		return false
	}
	b, err := canonicalJSON(stored)
	return err == nil && bytes.Equal(a, b)
}

// canonicalJSON re-encodes a resource with sorted keys, numbers as
// written, and without the meta elements a server sets.
func canonicalJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var r map[string]any
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if meta, ok := r["meta"].(map[string]any); ok {
		delete(meta, "versionId")
		delete(meta, "lastUpdated")
		if len(meta) == 0 {
			delete(r, "meta")
		}
	}
	return json.Marshal(r)
}

// EntryIndex reads the entry number out of a FHIRPath expression of a
// Bundle's entry (Bundle.entry[3].resource.name); -1 when there is none.
func EntryIndex(expr string) int {
	rest, ok := strings.CutPrefix(expr, "Bundle.entry[")
	if !ok {
		return -1
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(n)
	if err != nil {
		return -1
	}
	return i
}
