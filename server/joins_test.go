package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/server"
	"fhirstore/store"
)

// includedRefs returns the Type/id of a searchset's include entries, sorted.
func includedRefs(t *testing.T, r *response) []string {
	t.Helper()
	out := []string{}
	entries, _ := r.JSON(t)["entry"].([]any)
	for _, e := range entries {
		m := e.(map[string]any)
		if m["search"].(map[string]any)["mode"] == "include" {
			res := m["resource"].(map[string]any)
			out = append(out, res["resourceType"].(string)+"/"+res["id"].(string))
		}
	}
	slices.Sort(out)
	return out
}

func joinsEnv(t *testing.T, mutate ...func(*server.Config, *store.Options)) *env {
	t.Helper()
	e := newEnv(t, mutate...)
	for _, f := range []struct{ typ, id, body string }{
		{"Organization", "org1", `{"resourceType":"Organization","id":"org1","name":"Agency One","partOf":{"reference":"Organization/org0"}}`},
		{"Organization", "org0", `{"resourceType":"Organization","id":"org0","name":"Holding"}`},
		{"Patient", "p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"Joinson"}],"identifier":[{"system":"urn:mrn","value":"J1"}],"managingOrganization":{"reference":"Organization/org1"}}`},
		{"Patient", "p2", `{"resourceType":"Patient","id":"p2","name":[{"family":"Other"}],"managingOrganization":{"reference":"Organization/org1"}}`},
		{"Patient", "p3", `{"resourceType":"Patient","id":"p3","name":[{"family":"Third"}]}`},
		{"EpisodeOfCare", "e1", `{"resourceType":"EpisodeOfCare","id":"e1","status":"active","patient":{"reference":"Patient/p1"},"managingOrganization":{"reference":"Organization/org1"}}`},
		{"EpisodeOfCare", "e2", `{"resourceType":"EpisodeOfCare","id":"e2","status":"finished","patient":{"reference":"Patient/p2"}}`},
		{"Questionnaire", "q1", `{"resourceType":"Questionnaire","id":"q1","status":"active","url":"http://example.org/q/oasis"}`},
		{"QuestionnaireResponse", "r1", `{"resourceType":"QuestionnaireResponse","id":"r1","status":"completed","questionnaire":"http://example.org/q/oasis","subject":{"reference":"Patient/p1"}}`},
	} {
		if r := e.put("/"+f.typ+"/"+f.id, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", f.typ, f.id, r.Status, r.Body)
		}
	}
	return e
}

func TestIncludesChainsAndReverseChains(t *testing.T) {
	e := joinsEnv(t)
	tests := []struct {
		name, query      string
		matches, include []string
	}{
		{"_include a reference", "Patient?_id=p1&_include=Patient:organization", []string{"p1"}, []string{"Organization/org1"}},
		{"_include with a target type", "Patient?_id=p1,p2&_include=Patient:organization:Organization", []string{"p1", "p2"}, []string{"Organization/org1"}},
		{"_include=* follows every reference", "EpisodeOfCare?_id=e1&_include=*", []string{"e1"}, []string{"Organization/org1", "Patient/p1"}},
		{"_include of a canonical reference", "QuestionnaireResponse?_id=r1&_include=QuestionnaireResponse:questionnaire", []string{"r1"}, []string{"Questionnaire/q1"}},
		{"_revinclude", "Patient?_id=p1,p3&_revinclude=EpisodeOfCare:patient", []string{"p1", "p3"}, []string{"EpisodeOfCare/e1"}},
		{"_include:iterate follows included resources", "EpisodeOfCare?_id=e1&_include=EpisodeOfCare:patient&_include:iterate=Patient:organization&_include:iterate=Organization:partof", []string{"e1"}, []string{"Organization/org0", "Organization/org1", "Patient/p1"}},
		{"a match is never an include too", "Organization?_id=org1,org0&_include=Organization:partof", []string{"org0", "org1"}, []string{}},
		{"chain on a reference", "EpisodeOfCare?patient.identifier=urn:mrn|J1", []string{"e1"}, nil},
		{"typed chain", "EpisodeOfCare?patient:Patient.name=joinson", []string{"e1"}, nil},
		{"two-level chain", "EpisodeOfCare?patient.organization.name=agency", []string{"e1", "e2"}, nil},
		{"chain with no match", "EpisodeOfCare?patient.name=nobody", []string{}, nil},
		{"_has", "Patient?_has:EpisodeOfCare:patient:status=active", []string{"p1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/" + tt.query)
			got := matchIDs(t, r)
			slices.Sort(got)
			if !slices.Equal(got, tt.matches) && !(len(got) == 0 && len(tt.matches) == 0) {
				t.Fatalf("%s: matches %v, want %v", tt.query, got, tt.matches)
			}
			if inc := includedRefs(t, r); tt.include != nil && !slices.Equal(inc, tt.include) {
				t.Fatalf("%s: includes %v, want %v", tt.query, inc, tt.include)
			}
			if total := r.JSON(t)["total"]; fmt.Sprint(total) != fmt.Sprint(len(tt.matches)) {
				t.Fatalf("%s: total %v counts includes", tt.query, total)
			}
		})
	}
	for _, bad := range []struct{ query, expr string }{
		{"Patient?_include=Patient:nosuch", "_include"},
		{"Patient?_include=Observation:subject", "_include"},
		{"Patient?_include=garbage", "_include"},
		{"Patient?gender.name=x", "gender.name"},
		{"EpisodeOfCare?patient.organization.partof.name=x", "patient.organization.partof.name"},
		{"EpisodeOfCare?patient.nosuch=x", "patient.nosuch"},
	} {
		wantOutcome(t, e.get("/"+bad.query), http.StatusBadRequest, bad.expr)
	}
}

// TestIncludesCostTheSameQueriesWhateverThePageSize counts the database
// commands of a page with includes at two page sizes.
func TestIncludesCostTheSameQueriesWhateverThePageSize(t *testing.T) {
	var finds atomic.Int64
	monitor := &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "find" || ev.CommandName == "aggregate" || ev.CommandName == "count" {
			finds.Add(1)
		}
	}}
	e := joinsEnv(t, func(_ *server.Config, o *store.Options) { o.Monitor = monitor })
	for i := 0; i < 12; i++ {
		id := e.create("Patient", fmt.Sprintf(`{"resourceType":"Patient","managingOrganization":{"reference":"Organization/org%d"}}`, i%2))
		e.create("EpisodeOfCare", fmt.Sprintf(`{"resourceType":"EpisodeOfCare","status":"active","patient":{"reference":"Patient/%s"}}`, id))
	}
	cost := func(count int) int64 {
		q := fmt.Sprintf("/Patient?_count=%d&_include=Patient:organization&_revinclude=EpisodeOfCare:patient", count)
		e.get(q) // warm the tenant cache
		before := finds.Load()
		r := e.get(q)
		if n := len(includedRefs(t, r)); n < count {
			t.Fatalf("_count=%d: only %d includes", count, n)
		}
		return finds.Load() - before
	}
	small, large := cost(2), cost(10)
	if small != large {
		t.Fatalf("a page of 2 cost %d queries, a page of 10 cost %d", small, large)
	}
	t.Logf("%d database queries per page", large)
}
