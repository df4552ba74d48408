package profile_test

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"testing"

	"fhirstore/fhirschema/profile"
)

// TestSyntheaConformsToUSCore: every resource of the Synthea sample
// validates without error against each US Core 6.1.0 profile it claims,
// each entry with its Bundle at hand. The profiles it claims that 6.1.0
// does not define (from other US Core versions) are listed.
func TestSyntheaConformsToUSCore(t *testing.T) {
	files, err := filepath.Glob("../../testdata/synthea/*.json")
	if err != nil || len(files) == 0 {
		t.Skip("no Synthea sample")
	}
	defs := profile.Merge(usCore(t, "6.1.0").defs, profile.Core())
	unknown := map[string]int{}
	validated := 0
	for _, f := range files {
		bundle := readJSON(t, f)
		index := profile.IndexBundle(bundle)
		for i, e := range asList(bundle["entry"]) {
			r, _ := e.(map[string]any)["resource"].(map[string]any)
			for _, url := range claimed(r) {
				issues, err := validator.Validate(context.Background(), defs, r, url, profile.WithIndexedBundle(index))
				if errors.Is(err, profile.ErrUnknownProfile) {
					unknown[url]++
					continue
				}
				if err != nil {
					t.Fatalf("%s entry %d: %v", filepath.Base(f), i, err)
				}
				validated++
				for _, e := range errorsOf(issues) {
					t.Errorf("%s entry %d (%s): %s", filepath.Base(f), i, url, e)
				}
			}
		}
	}
	urls := make([]string, 0, len(unknown))
	for u := range unknown {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	t.Logf("%d validations; claimed but not in US Core 6.1.0: %v", validated, urls)
}
