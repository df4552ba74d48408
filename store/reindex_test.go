package store_test

import (
	"context"
	"net/url"
	"testing"

	"fhirstore/search"
	"fhirstore/store"
)

func TestReindexBringsOlderRowsToTheCurrentFormat(t *testing.T) {
	ctx := context.Background()
	old := db.Options()
	old.Registry = nil // rows without the search values of this version
	before := db.Open(t, old)
	tenant := db.Tenant(t, before)
	for typ, body := range map[string]string{
		"Patient": `{"resourceType":"Patient","name":[{"family":"Quokka"}],"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">keeps a zebrafinch</div>"}}`,
		"Observation": `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},
		  "component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":150}}]}`,
	} {
		if _, err := before.Create(ctx, tenant, typ, []byte(body), store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st := db.Open(t, db.Options())
	searches := []struct{ typ, param, value string }{
		{"Patient", "_text", "zebrafinch"},
		{"Patient", "family", "quokka"},
		{"Observation", "component-code-value-quantity", "8480-6$gt140"},
	}
	count := func() []int64 {
		var out []int64
		for _, s := range searches {
			q, err := db.Registry().Parse(s.typ, url.Values{s.param: {s.value}, "_summary": {"count"}}, search.ParseOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			page, err := st.Search(ctx, tenant, q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Total)
		}
		return out
	}
	if got := count(); got[0]+got[1]+got[2] != 0 {
		t.Fatalf("rows without search values matched: %v", got)
	}
	n, err := st.Reindex(ctx)
	if err != nil || n != 2 {
		t.Fatalf("reindex: %d rows, %v; want 2", n, err)
	}
	if got := count(); got[0] != 1 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("after reindex: %v matches, want one each", got)
	}
	if n, err := st.Reindex(ctx); err != nil || n != 0 {
		t.Fatalf("second reindex: %d rows, %v; want none", n, err)
	}
}
