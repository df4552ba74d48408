package sqlite

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/klauspost/compress/dict"
)

// TestTrainDictionary makes docs.zdict anew from the documents of a file
// (FHIRSTORE_TRAIN_DICT names it; skipped otherwise): the rest of each
// document and each distinct shared value, as format 2 stores them. The
// committed dictionary was trained on a file holding the R4 examples
// (fhirstore load --batch-size 1 of testdata/fhir/examples as ndjson) and
// the Synthea sample (testdata/synthea), as the store writes them.
//
//	FHIRSTORE_TRAIN_DICT=data/sqlite/fhirstore_demo.db go test ./store/engine/sqlite -run TestTrainDictionary
func TestTrainDictionary(t *testing.T) {
	path := os.Getenv("FHIRSTORE_TRAIN_DICT")
	if path == "" {
		t.Skip("FHIRSTORE_TRAIN_DICT names no file to train on")
	}
	ctx := context.Background()
	c, err := openConn(path, []string{"query_only = 1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var version int64
	if _, err := c.queryRow(ctx, "PRAGMA user_version", nil, &version); err != nil {
		t.Fatal(err)
	}
	cd, err := newCodec()
	if err != nil {
		t.Fatal(err)
	}
	defer cd.close()
	colls, err := queryStrings(ctx, c, "SELECT substr(name, 3) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'd\\_%' ESCAPE '\\' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var samples [][]byte
	seen := map[string]bool{}
	for _, coll := range colls {
		docs, err := readRawDocs(ctx, c, cd, namesOf(coll), version)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range docs {
			parts, err := cd.split(raw, "resource")
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, parts.rest)
			if parts.shared != nil && !seen[string(parts.shared)] {
				seen[string(parts.shared)] = true
				samples = append(samples, parts.shared)
			}
		}
	}
	// The builder fails on samples larger than its window: the few large
	// documents (Bundles kept as resources) are left out.
	samples = slices.DeleteFunc(samples, func(b []byte) bool { return len(b) > 32<<10 })
	d, err := dict.BuildZstdDict(samples, dict.Options{MaxDictSize: 64 << 10, HashBytes: 6, ZstdDictID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("docs.zdict", d, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("docs.zdict: %d bytes from %d samples", len(d), len(samples))
}

// readRawDocs reads the BSON of every document of a collection of a file
// of format version (1: as inserted; 2: stored parts).
func readRawDocs(ctx context.Context, c *conn, cd *codec, n names, version int64) ([][]byte, error) {
	q := "SELECT id, doc, NULL FROM " + n.d
	if version >= 2 {
		q = "SELECT d.id, d.doc, b.z FROM " + n.d + " AS d LEFT JOIN " + blobsTable + " AS b ON b.id = d.b"
	}
	r, err := c.query(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	var out [][]byte
	for r.next() {
		if version < 2 {
			out = append(out, r.bytes(1))
			continue
		}
		var z []byte
		if !r.null(2) {
			z = r.bytes(2)
		}
		doc, err := cd.decode(storedParts{id: r.text(0), doc: r.bytes(1), value: z}, "resource", false, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, doc)
	}
	return out, r.err
}
