package document

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestMarshalIsBSONMarshal: values of every type Marshal encodes itself,
// at the edges of their encodings, and values it leaves to bson.Marshal,
// come out as bson.Marshal encodes them (the parsed examples and Synthea
// bundles are FuzzFastParserMatchesTokens's seeds).
func TestMarshalIsBSONMarshal(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	values := []any{
		"", "é\x00", true, false, 0.0, math.Copysign(0, -1), math.Inf(1), 1.5, nil,
		int32(-7), int64(1 << 40), int64(3), 0, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1,
		at, time.Time{}, time.Date(1901, 1, 1, 0, 0, 0, 999999999, time.FixedZone("x", -3600)),
		bson.Raw(nil), bson.Raw(mustMarshal(t, bson.D{{Key: "a", Value: "b"}})),
		bson.D(nil), bson.D{}, bson.D{{Key: "x", Value: bson.A{int32(1), "y", bson.D{{Key: "z", Value: nil}}}}},
		bson.A(nil), bson.A{}, []any(nil), []any{"a", 1.0, []any{}}, []string(nil), []string{}, []string{"a", "b"},
		[]NumText(nil), []NumText{{Path: "a[0]", Text: "1.50"}, {Path: "b", Text: "1e2"}},
		make([]any, 70), map[string]any{"left": "to bson.Marshal"}, []int{1, 2},
	}
	for _, v := range values {
		doc := bson.D{{Key: "v", Value: v}, {Key: "nested", Value: bson.D{{Key: "v", Value: v}}}, {Key: "list", Value: bson.A{v}}}
		got, err := Marshal(doc)
		want, werr := bson.Marshal(doc)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%T %v: Marshal gave %x (%v), bson.Marshal %x (%v)", v, v, got, err, want, werr)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syntheaResource is the first resource of type typ in the Synthea
// sample, parsed.
func syntheaResource(b *testing.B, typ string) bson.D {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "synthea", "*.json"))
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var bundle struct {
			Entry []struct{ Resource json.RawMessage } `json:"entry"`
		}
		if err := json.Unmarshal(body, &bundle); err != nil {
			b.Fatal(err)
		}
		for _, e := range bundle.Entry {
			var head struct{ ResourceType string }
			if json.Unmarshal(e.Resource, &head) == nil && head.ResourceType == typ {
				dec, err := FromJSON(e.Resource, DefaultMaxDepth)
				if err != nil {
					b.Fatal(err)
				}
				return dec.Doc
			}
		}
	}
	b.Fatalf("no %s in the Synthea sample", typ)
	return nil
}

// BenchmarkMarshal encodes a parsed Synthea ExplanationOfBenefit with
// Marshal and with bson.Marshal.
func BenchmarkMarshal(b *testing.B) {
	doc := syntheaResource(b, "ExplanationOfBenefit")
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bson.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bson.Marshal(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
