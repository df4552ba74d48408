package view_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"fhirstore/fhirschema/view"
)

// syntheaObservations are the Observations of the Synthea sample as the
// store renders them: compact JSON, one resource each.
func syntheaObservations(b *testing.B) [][]byte {
	var out [][]byte
	for _, r := range syntheaResources(b) {
		if r["resourceType"] != "Observation" {
			continue
		}
		data, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, data)
	}
	if len(out) == 0 {
		b.Skip("no Synthea Observation")
	}
	return out
}

// BenchmarkObservationViewOverSynthea is the view work of the server's
// BenchmarkViewThroughput, per Observation of the Synthea sample:
// decoding, evaluating, and the whole of it through a Stream of one
// worker with the rows written as NDJSON.
func BenchmarkObservationViewOverSynthea(b *testing.B) {
	v, err := view.Compile([]byte(benchView), view.Options{})
	if err != nil {
		b.Fatal(err)
	}
	obs := syntheaObservations(b)
	perResource := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(obs)), "ns/resource")
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			for _, data := range obs {
				if _, err := v.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		}
		perResource(b)
	})
	b.Run("eval", func(b *testing.B) {
		decoded := make([]map[string]any, len(obs))
		for i, data := range obs {
			decoded[i], _ = v.Decode(data)
		}
		for b.Loop() {
			for _, r := range decoded {
				if err := v.Eval(context.Background(), r, func([]any) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		}
		perResource(b)
	})
	b.Run("stream", func(b *testing.B) {
		sink, _ := view.NewSink(io.Discard, view.FormatNDJSON, v.Columns(), view.SinkOptions{})
		for b.Loop() {
			s := v.NewStream(context.Background(), 1, sink.WriteRow)
			for _, data := range obs {
				if err := s.Add(data); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		perResource(b)
	})
}
