package mongodb

import (
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// TestLimitsOfServers: which limits each server's buildInfo leads to.
func TestLimitsOfServers(t *testing.T) {
	tests := []struct {
		name       string
		known      bool
		version    []int32
		ferretDB   string
		keyBytes   int
		wholeArray bool
	}{
		{"MongoDB 7", true, []int32{7, 0, 2, 0}, "", 0, false},
		{"MongoDB 4.2", true, []int32{4, 2, 0, 0}, "", 0, false},
		{"MongoDB 4.0", true, []int32{4, 0, 28, 0}, "", 1024, false},
		{"FerretDB 1.24", true, []int32{7, 0, 42, 0}, "v1.24.2", 2400, true},
		{"FerretDB 2", true, []int32{7, 0, 77, 0}, "v2.1.0", 0, false},
		{"FerretDB embedded", true, []int32{7, 0, 42, 0}, "unknown", 2400, true},
		{"no answer", false, nil, "", 2400, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := limitsOf(tc.known, tc.version, tc.ferretDB)
			if l.MaxDocumentBytes != 16<<20 || l.MaxIndexKeyBytes != tc.keyBytes || l.WholeArrayKeys != tc.wholeArray || l.Source == "" {
				t.Fatalf("limits %+v, want key bytes %d, whole arrays %v", l, tc.keyBytes, tc.wholeArray)
			}
		})
	}
}

// TestFoldWildcards: the nested single-field indexes of one top-level field
// become one wildcard index; everything else is kept as asked, in order.
func TestFoldWildcards(t *testing.T) {
	asc := func(field string) engine.Index {
		return engine.Index{Name: field + "_1", Keys: bson.D{{Key: field, Value: 1}}}
	}
	var many []engine.Index
	for i := range 80 {
		many = append(many, asc(fmt.Sprintf("idx.p%d", i)))
	}
	compound := engine.Index{Name: "type_id", Keys: bson.D{{Key: "type", Value: 1}, {Key: "id", Value: 1}}}
	desc := engine.Index{Name: "idx.d_-1", Keys: bson.D{{Key: "idx.d", Value: -1}}}
	tests := []struct {
		name string
		in   []engine.Index
		want []string
	}{
		{"80 search fields", many, []string{"idx.$**_1"}},
		{"mixed", []engine.Index{compound, asc("idx.a"), asc("top"), asc("idx.b.lo"), desc, asc("other.x")},
			[]string{"type_id", "idx.$**_1", "top_1", "idx.d_-1", "other.x_1"}},
		{"one nested field stays", []engine.Index{asc("idx.a")}, []string{"idx.a_1"}},
		{"none", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, ix := range foldWildcards(tc.in) {
				got = append(got, ix.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("folded to %v, want %v", got, tc.want)
			}
		})
	}
}
