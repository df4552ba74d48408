package mongodb

import "testing"

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
