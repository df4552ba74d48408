package profile

import (
	"bytes"
	"compress/flate"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
)

// coreBin holds the R4 core StructureDefinitions, ValueSets and
// CodeSystems, each deflated on its own (see gencore.go).
//
//go:generate sh -c "go run gencore.go ../../../shared/fhir/definitions/r4-core > core.bin"
//go:embed core.bin
var coreBin []byte

// coreDefs is the Definitions of the built-in R4 core resources. The index
// is read on first use; a resource is inflated and decoded at each lookup
// and not kept (all decoded, they would hold some 12 MB): a Validator
// keeps what it compiles from them.
type coreDefs struct {
	once  sync.Once
	err   error
	index map[string]coreEntry // "Type url" and "Type url|version"
	keys  map[string]bool
	body  []byte // the deflated resources
}

type coreEntry struct {
	offset, length int
}

var core = &coreDefs{}

// Core returns the R4 (4.0.1) core conformance resources built into the
// binary: the StructureDefinitions of resources, data types and core
// extensions, and the core ValueSets and CodeSystems (with the v2 and v3
// ones). Narratives, mappings and prose are left out. Its Generation is 0.
func Core() Definitions { return core }

// Resource returns the core resource of type typ at url.
func (c *coreDefs) Resource(_ context.Context, typ, url string) (map[string]any, error) {
	if err := c.load(); err != nil {
		return nil, err
	}
	e, ok := c.index[typ+" "+url]
	if !ok {
		return nil, nil
	}
	r, err := decodeDeflated(c.body[e.offset : e.offset+e.length])
	if err != nil {
		return nil, fmt.Errorf("core %s %s: %w", typ, url, err)
	}
	return r, nil
}

// Generation is always 0: the core never changes.
func (c *coreDefs) Generation(context.Context) (uint64, error) { return 0, nil }

// coreKey reports whether key names an invariant of a core resource or
// data type definition, which the base validator checks.
func coreKey(key string) bool {
	if core.load() != nil {
		return false
	}
	return core.keys[key]
}

func (c *coreDefs) load() error {
	c.once.Do(func() { c.err = c.read() })
	return c.err
}

func (c *coreDefs) read() error {
	if len(coreBin) < 8 || string(coreBin[:4]) != "FSC1" {
		return fmt.Errorf("core definitions: bad header")
	}
	n := int(binary.BigEndian.Uint32(coreBin[4:8]))
	if 8+n > len(coreBin) {
		return fmt.Errorf("core definitions: truncated index")
	}
	raw, err := inflate(coreBin[8 : 8+n])
	if err != nil {
		return fmt.Errorf("core definitions index: %w", err)
	}
	var index struct {
		Keys    []string `json:"keys"`
		Entries [][5]any `json:"entries"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return fmt.Errorf("core definitions index: %w", err)
	}
	c.body = coreBin[8+n:]
	c.index = make(map[string]coreEntry, 2*len(index.Entries))
	for _, e := range index.Entries {
		typ, _ := e[0].(string)
		url, _ := e[1].(string)
		version, _ := e[2].(string)
		off, _ := e[3].(float64)
		length, _ := e[4].(float64)
		ce := coreEntry{int(off), int(length)}
		c.index[typ+" "+url] = ce
		if version != "" {
			c.index[typ+" "+url+"|"+version] = ce
		}
	}
	c.keys = make(map[string]bool, len(index.Keys))
	for _, k := range index.Keys {
		c.keys[k] = true
	}
	return nil
}

func inflate(b []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(b))
	defer r.Close()
	return io.ReadAll(r)
}

func decodeDeflated(b []byte) (map[string]any, error) {
	raw, err := inflate(b)
	if err != nil {
		return nil, err
	}
	return decodeJSON(raw)
}

// decodeJSON decodes a JSON object with numbers as json.Number, as the
// FHIRPath engine expects.
func decodeJSON(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// splitCanonical splits "url|version" into its parts.
func splitCanonical(s string) (url, version string) {
	if i := strings.LastIndexByte(s, '|'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// CoreInvariant reports whether key names an invariant of a core resource
// or data type definition (ele-1, pat-1, sqty-1): one the base validator
// checks, and profile validation leaves to it.
func CoreInvariant(key string) bool { return coreKey(key) }
