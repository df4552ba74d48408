package server_test

import (
	"fmt"
	"strings"
	"testing"

	"fhirstore/server"
	"fhirstore/store"
)

// BenchmarkSearchComplete times composite, _content/_text and $lastn
// searches on the tenant BenchmarkEngineTargets builds (sizes from
// FHIRSTORE_BENCH_SIZES), each as a ratio to a plain token search of the
// same run (and _content to a plain name search):
//
//	FHIRSTORE_BENCH_SIZES=10000,100000 go test ./server -run '^$' -bench SearchComplete -benchtime 1x -timeout 60m
//
// Figures and their reading: docs/performance.md, section "Search, complete".
func BenchmarkSearchComplete(b *testing.B) {
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			e := newEnv(b, func(*server.Config, *store.Options) {})
			loaded := loadSynthea(b, e, n)
			targets := pickTargets(b, e)
			var family, patient string
			for _, tg := range targets {
				switch tg.name {
				case "patient-by-family":
					family = strings.TrimPrefix(tg.path, "/Patient?family=")
				case "obs-by-patient":
					patient = strings.TrimSuffix(strings.TrimPrefix(tg.path, "/Observation?patient="), "&_count=20")
				}
			}
			b.Logf("%d resources loaded", loaded)
			const loinc = "http://loinc.org|"
			rows := []struct{ name, base, path string }{
				{"token", "", "/Observation?code=" + loinc + "85354-9"},
				{"composite", "token", "/Observation?component-code-value-quantity=" + loinc + "8480-6$gt130"},
				{"composite-trap", "token", "/Observation?component-code-value-quantity=" + loinc + "8462-4$gt100"},
				{"composite-own", "token", "/Observation?code-value-quantity=" + loinc + "29463-7$gt80"},
				{"token-quantity", "token", "/Observation?code=" + loinc + "29463-7&value-quantity=gt80"},
				{"token-of-patient", "", "/Observation?patient=" + patient + "&code=" + loinc + "85354-9"},
				{"lastn-patient", "token-of-patient", "/Observation/$lastn?patient=" + patient},
				{"lastn-vitals-3", "token-of-patient", "/Observation/$lastn?patient=" + patient + "&category=vital-signs&max=3"},
				{"name", "", "/Patient?name=" + family},
				{"content", "name", "/Patient?_content=" + family},
				{"content-words", "name", "/Patient?_content=" + family + "%20female"},
				{"text", "name", "/Patient?_text=synthea"},
				{"content-obs", "token", "/Observation?_content=%22blood%20pressure%22"},
			}
			base := map[string]float64{}
			for _, row := range rows {
				checkOK(b, e, row.path)
				t := ms(median(31, func() { checkOK(b, e, row.path) }))
				base[row.name] = t
				b.ReportMetric(t, row.name+"-ms")
				ratio := ""
				if row.base != "" {
					ratio = fmt.Sprintf("%5.2f× %s", t/base[row.base], row.base)
				}
				b.Logf("%-16s %8.2f ms  %-22s %s", row.name, t, ratio, row.path)
			}
		})
	}
}
