package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// textFixtures have narratives and text elsewhere; the searches below
// name which words each holds.
var textFixtures = []struct{ typ, id, body string }{
	{"Patient", "zoe", `{"resourceType":"Patient","id":"zoe",
		"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Zoë keeps a <b>zebra finch</b> &amp; a parrot</p></div>"},
		"name":[{"family":"Lindqvist","given":["Zoë"]}]}`},
	{"Patient", "ann", `{"resourceType":"Patient","id":"ann",
		"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Ann keeps a finch and a zebra</div>"},
		"name":[{"family":"Müller","given":["Ann"]}],"address":[{"city":"Kraków"}]}`},
	{"Patient", "bob", `{"resourceType":"Patient","id":"bob","name":[{"family":"Parrot","given":["Bob"]}]}`},
	{"Observation", "w", `{"resourceType":"Observation","id":"w","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body Weight"}]},
		"valueQuantity":{"value":70,"unit":"kg"}}`},
}

// storeTextFixtures writes textFixtures.
func storeTextFixtures(t *testing.T, e *env) {
	t.Helper()
	for _, f := range textFixtures {
		if r := e.put("/"+f.typ+"/"+f.id, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", f.typ, f.id, r.Status, r.Body)
		}
	}
}

func TestTextAndContentSearchWords(t *testing.T) {
	e := newEnv(t)
	storeTextFixtures(t, e)
	tests := []struct {
		name, typ, param, value string
		want                    []string
	}{
		{"a word of the narrative", "Patient", "_text", "zebra", []string{"zoe", "ann"}},
		{"case and accents are ignored", "Patient", "_text", "ZOE", []string{"zoe"}},
		{"markup is not text", "Patient", "_text", "div", nil},
		{"entities are characters, not words", "Patient", "_text", "amp", nil},
		{"several words are all required", "Patient", "_text", "zebra parrot", []string{"zoe"}},
		{"AND may be written", "Patient", "_text", "zebra AND parrot", []string{"zoe"}},
		{"OR takes either", "Patient", "_text", "parrot OR ann", []string{"zoe", "ann"}},
		{"parentheses group", "Patient", "_text", "(parrot OR ann) finch", []string{"zoe", "ann"}},
		{"a quoted phrase keeps its order", "Patient", "_text", `"zebra finch"`, []string{"zoe"}},
		{"the words of a phrase in another order do not match", "Patient", "_text", `"finch zebra"`, nil},
		{"a trailing * is a prefix", "Patient", "_text", "parr*", []string{"zoe"}},
		{"comma-separated values are alternatives", "Patient", "_text", "parrot,ann", []string{"zoe", "ann"}},
		{"_text is the narrative only", "Patient", "_text", "lindqvist", nil},
		{"_content covers the names", "Patient", "_content", "lindqvist", []string{"zoe"}},
		{"_content covers the narrative", "Patient", "_content", "zebra", []string{"zoe", "ann"}},
		{"_content ignores accents", "Patient", "_content", "muller krakow", []string{"ann"}},
		{"_content finds a word in any element", "Patient", "_content", "parrot", []string{"zoe", "bob"}},
		{"_content on another type", "Observation", "_content", `"body weight"`, []string{"w"}},
		{"_content of a code", "Observation", "_content", "29463", []string{"w"}},
		{"no match", "Patient", "_content", "platypus", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := url.Values{tt.param: {tt.value}, "_count": {"100"}}
			got := matchIDs(t, e.get("/"+tt.typ+"?"+q.Encode()))
			want := slices.Clone(tt.want)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%s=%s: got %v, want %v", tt.param, tt.value, got, want)
			}
		})
	}
	for _, bad := range []string{`"zebra`, "(zebra", "zebra OR", "OR zebra", "()", "&&&", "zebra)"} {
		q := url.Values{"_content": {bad}}
		wantOutcome(t, e.get("/Patient?"+q.Encode()), http.StatusBadRequest, "_content")
	}
}

// TestTextSearchFollowsWrites checks that the words of a resource follow
// its updates (new words found, old ones not) and its deletion, and that
// an update changing no word keeps them.
func TestTextSearchFollowsWrites(t *testing.T) {
	e := newEnv(t)
	storeTextFixtures(t, e)
	steps := []struct {
		write        func() *response
		status       int
		param, value string
		want         []string
	}{
		{func() *response {
			return e.put("/Patient/bob", `{"resourceType":"Patient","id":"bob","name":[{"family":"Crow","given":["Bob"]}]}`)
		}, http.StatusOK, "_content", "parrot", []string{"zoe"}},
		{nil, 0, "_content", "crow", []string{"bob"}},
		{func() *response {
			return e.put("/Patient/bob", `{"resourceType":"Patient","id":"bob","active":true,"name":[{"family":"Crow","given":["Bob"]}]}`)
		}, http.StatusOK, "_content", "crow", []string{"bob"}},
		{func() *response { return e.do(request{Method: http.MethodDelete, Path: "/Patient/ann"}) },
			http.StatusOK, "_text", "zebra", []string{"zoe"}},
		{nil, 0, "_content", "krakow", nil},
		{func() *response {
			return e.put("/Patient/zoe", `{"resourceType":"Patient","id":"zoe","name":[{"family":"Lindqvist"}]}`)
		}, http.StatusOK, "_text", "zebra", nil},
		{nil, 0, "_content", "lindq*", []string{"zoe"}},
	}
	for i, s := range steps {
		if s.write != nil {
			if r := s.write(); r.Status != s.status && !(s.status == http.StatusOK && r.Status == http.StatusNoContent) {
				t.Fatalf("step %d: write: %d %s", i, r.Status, r.Body)
			}
		}
		q := url.Values{s.param: {s.value}, "_count": {"100"}}
		got := matchIDs(t, e.get("/Patient?"+q.Encode()))
		slices.Sort(got)
		if !slices.Equal(got, s.want) && !(len(got) == 0 && len(s.want) == 0) {
			t.Errorf("step %d: %s=%s: got %v, want %v", i, s.param, s.value, got, s.want)
		}
	}
}
