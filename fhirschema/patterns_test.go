package fhirschema

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestPlainPatternsMatchTheirExpressions holds each byte-by-byte pattern
// to its regular expression: on strings built of whitespace, word bytes,
// multi-byte and invalid UTF-8, and on random strings of those.
func TestPlainPatternsMatchTheirExpressions(t *testing.T) {
	pieces := []string{"", " ", "\t", "\n", "\f", "\r", "\v", "a", "Z", "0", "-", "é", "\u00a0", "\u2003", "\xff", "\xe2\x80", "|"}
	var inputs []string
	for _, a := range pieces {
		for _, b := range pieces {
			for _, c := range pieces {
				inputs = append(inputs, a+b+c)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := ""
		for range rng.IntN(8) {
			s += pieces[rng.IntN(len(pieces))]
		}
		inputs = append(inputs, s)
	}
	for src, plain := range plainPatterns {
		re := regexp.MustCompile(src)
		for _, s := range inputs {
			if got, want := plain(s), re.MatchString(s); got != want {
				t.Errorf("%s on %q: %v, the expression says %v", src, s, got, want)
			}
		}
	}
}

// BenchmarkPattern times the code pattern on a code, byte by byte and as
// a regular expression.
func BenchmarkPattern(b *testing.B) {
	const src, code = `^[^\s]+(\s[^\s]+)*$`, "http://loinc.org 8302-2"
	re := regexp.MustCompile(src)
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			plainPatterns[src](code)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			re.MatchString(code)
		}
	})
}
