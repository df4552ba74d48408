package document_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/document"
)

var benchFiles = []struct{ name, path string }{
	{"Patient-3.7KB", filepath.Join("testdata", "seeds", "Patient-example.json")},
	{"MeasureReport-50KB", filepath.Join("testdata", "bench", "MeasureReport-measurereport-cms146-cat1-example.json")},
}

// BenchmarkFromJSON measures the write path: parse and encode to BSON.
func BenchmarkFromJSON(b *testing.B) {
	for _, bf := range benchFiles {
		in, err := os.ReadFile(bf.path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bf.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				dec, err := document.FromJSON(in, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bson.Marshal(dec.Doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToJSON measures the read path: stored BSON to JSON.
func BenchmarkToJSON(b *testing.B) {
	for _, bf := range benchFiles {
		in, err := os.ReadFile(bf.path)
		if err != nil {
			b.Fatal(err)
		}
		dec, err := document.FromJSON(in, 0)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := bson.Marshal(dec.Doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bf.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := document.ToJSON(raw, dec.NumText); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
