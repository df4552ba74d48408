package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"fhirstore/store"
)

// histBundle is a history Bundle as the tests read it.
type histBundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        *int64 `json:"total"`
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []histEntry `json:"entry"`
}

type histEntry struct {
	FullURL  string         `json:"fullUrl"`
	Resource map[string]any `json:"resource"`
	Request  struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
	Response struct {
		Status       string `json:"status"`
		Etag         string `json:"etag"`
		LastModified string `json:"lastModified"`
	} `json:"response"`
}

// link returns the URL of the link with the relation, or "".
func (b *histBundle) link(rel string) string {
	for _, l := range b.Link {
		if l.Relation == rel {
			return l.URL
		}
	}
	return ""
}

// keys lists the entries as "Type/id/vid", in Bundle order.
func (b *histBundle) keys(t testing.TB) []string {
	t.Helper()
	out := make([]string, 0, len(b.Entry))
	for _, en := range b.Entry {
		out = append(out, en.key(t))
	}
	return out
}

// key is "Type/id/vid" of the entry, from its fullUrl and ETag.
func (en *histEntry) key(t testing.TB) string {
	t.Helper()
	segs := strings.Split(en.FullURL, "/")
	vid := strings.TrimSuffix(strings.TrimPrefix(en.Response.Etag, `W/"`), `"`)
	if len(segs) < 2 || vid == "" {
		t.Fatalf("entry without fullUrl or etag: %+v", en)
	}
	return segs[len(segs)-2] + "/" + segs[len(segs)-1] + "/" + vid
}

func (b *histBundle) total(t testing.TB) int64 {
	t.Helper()
	if b.Total == nil {
		t.Fatal("history Bundle without total")
	}
	return *b.Total
}

// histGet GETs a history URL (relative to the FHIR base) and decodes the
// Bundle, failing unless it is a 200 history Bundle.
func (e *env) histGet(path string) *histBundle {
	e.t.Helper()
	r := e.get(path)
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET %s: status %d: %s", path, r.Status, r.Body)
	}
	var b histBundle
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		e.t.Fatalf("GET %s: not a Bundle: %v: %s", path, err, r.Body)
	}
	if b.ResourceType != "Bundle" || b.Type != "history" {
		e.t.Fatalf("GET %s: resourceType %q type %q, want a history Bundle", path, b.ResourceType, b.Type)
	}
	if b.link("self") == "" {
		e.t.Fatalf("GET %s: no self link: %s", path, r.Body)
	}
	return &b
}

// histFollow GETs a paging link, which must point at this env's FHIR base.
func (e *env) histFollow(link string) *histBundle {
	e.t.Helper()
	base := "http://" + e.tenant + ".localhost/fhir/r4"
	if !strings.HasPrefix(link, base+"/") {
		e.t.Fatalf("link %q is not under %s", link, base)
	}
	return e.histGet(strings.TrimPrefix(link, base))
}

// histPages follows next links from the first page, returning every page.
func (e *env) histPages(path string) []*histBundle {
	e.t.Helper()
	pages := []*histBundle{e.histGet(path)}
	for next := pages[0].link("next"); next != ""; next = pages[len(pages)-1].link("next") {
		if len(pages) > 1000 {
			e.t.Fatalf("more than 1000 pages from %s", path)
		}
		pages = append(pages, e.histFollow(next))
	}
	return pages
}

// histVersion is what a write reports about the version it made.
type histVersion struct {
	Key         string // Type/id/vid
	ID          string
	LastUpdated string // meta.lastUpdated
}

func (v histVersion) time(t testing.TB) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, v.LastUpdated)
	if err != nil {
		t.Fatalf("lastUpdated %q: %v", v.LastUpdated, err)
	}
	return ts
}

// histBody is a small valid resource of the type, labelled so that versions differ.
func histBody(typ, id, label string) string {
	idPart := ""
	if id != "" {
		idPart = fmt.Sprintf(`,"id":%q`, id)
	}
	switch typ {
	case "Observation":
		return fmt.Sprintf(`{"resourceType":"Observation"%s,"status":"final","code":{"text":%q}}`, idPart, label)
	case "Encounter":
		return fmt.Sprintf(`{"resourceType":"Encounter"%s,"status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HH","display":%q}}`, idPart, label)
	default: // Patient, Practitioner
		return fmt.Sprintf(`{"resourceType":%q%s,"name":[{"family":%q}]}`, typ, idPart, label)
	}
}

// histWrite makes a version: POST when id is empty, PUT otherwise.
func (e *env) histWrite(typ, id, label string) histVersion {
	e.t.Helper()
	var r *response
	if id == "" {
		r = e.post("/"+typ, histBody(typ, "", label))
	} else {
		r = e.put("/"+typ+"/"+id, histBody(typ, id, label))
	}
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		e.t.Fatalf("write %s/%s: %d %s", typ, id, r.Status, r.Body)
	}
	m := r.JSON(e.t)
	meta := m["meta"].(map[string]any)
	id = m["id"].(string)
	return histVersion{Key: typ + "/" + id + "/" + meta["versionId"].(string), ID: id, LastUpdated: meta["lastUpdated"].(string)}
}

func (e *env) histDelete(typ, id string) {
	e.t.Helper()
	if r := e.do(request{Method: http.MethodDelete, Path: "/" + typ + "/" + id}); r.Status != http.StatusNoContent {
		e.t.Fatalf("delete %s/%s: %d %s", typ, id, r.Status, r.Body)
	}
}

// histTick makes sure the next write gets a later lastUpdated than every earlier one.
func histTick() { time.Sleep(5 * time.Millisecond) }

func wantHistKeys(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func histQuery(params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return "?" + q.Encode()
}

func TestHistoryInstanceListsEveryVersionNewestFirst(t *testing.T) {
	e := newEnv(t)
	v1 := e.histWrite("Patient", "", "One")
	id := v1.ID
	v2 := e.histWrite("Patient", id, "Two")
	v3 := e.histWrite("Patient", id, "Three")
	e.histDelete("Patient", id)
	other := e.histWrite("Patient", "", "Other") // not part of this history

	b := e.histGet("/Patient/" + id + "/_history")
	if got := b.total(t); got != 4 {
		t.Fatalf("total %d, want 4", got)
	}
	wantHistKeys(t, "entries", b.keys(t), []string{"Patient/" + id + "/4", v3.Key, v2.Key, v1.Key})
	if b.link("next") != "" || b.link("previous") != "" {
		t.Fatalf("one page needs no next or previous link: %+v", b.Link)
	}
	if want := "http://" + e.tenant + ".localhost/fhir/r4/Patient/" + id + "/_history"; b.link("self") != want {
		t.Fatalf("self link %q, want %q", b.link("self"), want)
	}
	fullURL := "http://" + e.tenant + ".localhost/fhir/r4/Patient/" + id
	labels := []string{"", "Three", "Two", "One"}
	var prev time.Time
	for i, en := range b.Entry {
		vid := 4 - i
		if en.FullURL != fullURL {
			t.Errorf("entry %d fullUrl %q, want %q", i, en.FullURL, fullURL)
		}
		if want := fmt.Sprintf(`W/"%d"`, vid); en.Response.Etag != want {
			t.Errorf("entry %d etag %q, want %q", i, en.Response.Etag, want)
		}
		lm, err := time.Parse(time.RFC3339Nano, en.Response.LastModified)
		if err != nil {
			t.Fatalf("entry %d lastModified %q: %v", i, en.Response.LastModified, err)
		}
		if i > 0 && !lm.Before(prev) {
			t.Errorf("entry %d lastModified %s is not older than the entry before (%s)", i, lm, prev)
		}
		prev = lm
		if vid == 4 {
			continue
		}
		meta := en.Resource["meta"].(map[string]any)
		if meta["versionId"] != strconv.Itoa(vid) || meta["lastUpdated"] != en.Response.LastModified {
			t.Errorf("entry %d meta %v, want versionId %d and lastUpdated %s", i, meta, vid, en.Response.LastModified)
		}
		if en.Resource["id"] != id || en.Resource["resourceType"] != "Patient" {
			t.Errorf("entry %d resource %v", i, en.Resource)
		}
		if got := en.Resource["name"].([]any)[0].(map[string]any)["family"]; got != labels[i] {
			t.Errorf("entry %d family %v, want %s", i, got, labels[i])
		}
	}
	del, put3, put2, post := b.Entry[0], b.Entry[1], b.Entry[2], b.Entry[3]
	if del.Request.Method != "DELETE" || del.Request.URL != "Patient/"+id || del.Resource != nil || !strings.HasPrefix(del.Response.Status, "204") {
		t.Errorf("deletion entry: %+v", del)
	}
	for _, en := range []histEntry{put3, put2} {
		if en.Request.Method != "PUT" || en.Request.URL != "Patient/"+id || !strings.HasPrefix(en.Response.Status, "200") {
			t.Errorf("update entry: %+v", en)
		}
	}
	if post.Request.Method != "POST" || post.Request.URL != "Patient" || !strings.HasPrefix(post.Response.Status, "201") {
		t.Errorf("create entry: %+v", post)
	}
	if v1.LastUpdated != post.Response.LastModified || v3.LastUpdated != put3.Response.LastModified {
		t.Errorf("lastModified of the entries differ from the writes' meta.lastUpdated")
	}

	// The other patient has a history of its own.
	wantHistKeys(t, "other patient", e.histGet("/Patient/"+other.ID+"/_history").keys(t), []string{other.Key})
}

// A resource created by PUT (update as create) has a first version whose
// entry is a PUT to Patient/id; its status is the 201 that PUT answered.
func TestHistoryInstanceCreatedByPut(t *testing.T) {
	e := newEnv(t)
	e.histWrite("Patient", "p1", "One")
	e.histWrite("Patient", "p1", "Two")
	b := e.histGet("/Patient/p1/_history")
	wantHistKeys(t, "entries", b.keys(t), []string{"Patient/p1/2", "Patient/p1/1"})
	for _, en := range b.Entry {
		if en.Request.Method != "PUT" || en.Request.URL != "Patient/p1" {
			t.Errorf("entry %s request %+v, want PUT Patient/p1", en.key(t), en.Request)
		}
	}
	if got := b.Entry[0].Response.Status; !strings.HasPrefix(got, "200") {
		t.Errorf("update entry status %q, want 200", got)
	}
	if got := b.Entry[1].Response.Status; !strings.HasPrefix(got, "201") {
		t.Errorf("entry of the PUT that created Patient/p1 has status %q; the PUT answered 201 Created", got)
	}
}

func TestHistoryCountDefaultsToTenAndPagesWithNext(t *testing.T) {
	e := newEnv(t)
	id := e.histWrite("Patient", "", "v1").ID
	want := []string{"Patient/" + id + "/1"}
	for i := 2; i <= 12; i++ {
		want = append([]string{e.histWrite("Patient", id, fmt.Sprint("v", i)).Key}, want...)
	}
	path := "/Patient/" + id + "/_history"

	b := e.histGet(path)
	if b.total(t) != 12 || len(b.Entry) != 10 || b.link("next") == "" || b.link("previous") != "" {
		t.Fatalf("default page: total %d, %d entries, links %+v; want total 12, 10 entries and a next link only", b.total(t), len(b.Entry), b.Link)
	}
	wantHistKeys(t, "default page", b.keys(t), want[:10])
	wantHistKeys(t, "second default page", e.histFollow(b.link("next")).keys(t), want[10:])

	for _, count := range []int{1, 3, 4, 5, 11, 12, 13, 100} {
		t.Run(fmt.Sprint("_count=", count), func(t *testing.T) {
			e := *e
			e.t = t
			pages := e.histPages(path + histQuery("_count", strconv.Itoa(count)))
			var got []string
			for i, p := range pages {
				if p.total(t) != 12 {
					t.Fatalf("page %d total %d, want 12", i, p.total(t))
				}
				last := i == len(pages)-1
				if n := len(p.Entry); (!last && n != count) || n == 0 || n > count {
					t.Fatalf("page %d has %d entries (count %d, %d pages)", i, n, count, len(pages))
				}
				if (p.link("previous") != "") != (i > 0) {
					t.Fatalf("page %d previous link %q", i, p.link("previous"))
				}
				if !strings.Contains(p.link("self"), "_count="+strconv.Itoa(count)) || (!last && !strings.Contains(p.link("next"), "_count="+strconv.Itoa(count))) {
					t.Fatalf("page %d links lose _count: %+v", i, p.Link)
				}
				got = append(got, p.keys(t)...)
			}
			if wantPages := (12 + count - 1) / count; len(pages) != wantPages {
				t.Errorf("%d pages, want %d", len(pages), wantPages)
			}
			wantHistKeys(t, "versions visited", got, want)
		})
	}
}

func TestHistoryPreviousLeadsBackToTheSamePage(t *testing.T) {
	e := newEnv(t)
	id := e.histWrite("Patient", "", "v1").ID
	for i := 2; i <= 11; i++ {
		e.histWrite("Patient", id, fmt.Sprint("v", i))
	}
	other := e.histWrite("Observation", "", "other") // type and system history hold it too
	for _, path := range []string{"/Patient/" + id + "/_history", "/Patient/_history", "/_history"} {
		t.Run(path, func(t *testing.T) {
			e := *e
			e.t = t
			pages := e.histPages(path + "?_count=3")
			if len(pages) < 4 {
				t.Fatalf("%d pages", len(pages))
			}
			for i := len(pages) - 1; i > 0; i-- {
				back := e.histFollow(pages[i].link("previous"))
				wantHistKeys(t, fmt.Sprintf("previous of page %d", i), back.keys(t), pages[i-1].keys(t))
				if (back.link("previous") != "") != (i-1 > 0) {
					t.Errorf("page %d reached backwards: previous link %q", i-1, back.link("previous"))
				}
				// and forwards again
				wantHistKeys(t, fmt.Sprintf("next of page %d reached backwards", i-1), e.histFollow(back.link("next")).keys(t), pages[i].keys(t))
			}
			for _, p := range pages {
				for _, k := range p.keys(t) {
					if k == other.Key && path != "/_history" || strings.HasPrefix(k, "Observation/") && k != other.Key {
						t.Fatalf("unexpected entry %s in %s", k, path)
					}
				}
			}
		})
	}
}

func TestHistoryRejectsInvalidCount(t *testing.T) {
	e := newEnv(t)
	id := e.histWrite("Patient", "", "One").ID
	for _, path := range []string{"/Patient/" + id + "/_history", "/Patient/_history", "/_history"} {
		for _, v := range []string{"0", "101", "abc", "-1", "1.5", " 5"} {
			wantOutcome(t, e.get(path+histQuery("_count", v)), http.StatusBadRequest, "_count")
		}
		if b := e.histGet(path + "?_count=100"); len(b.Entry) != 1 {
			t.Fatalf("%s?_count=100: %d entries", path, len(b.Entry))
		}
	}
}

// Paging is keyed by position and pinned to the first page's time point:
// versions written after the first page was read appear neither as
// duplicates nor shift the later pages, and every page shows the total of
// that snapshot; a new first page shows the new versions.
func TestHistoryPagingStaysCorrectWhileWritesHappen(t *testing.T) {
	for _, level := range []string{"system", "type", "instance"} {
		t.Run(level, func(t *testing.T) {
			e := newEnv(t)
			var obs, pats []string
			for i := range 4 {
				obs = append(obs, e.histWrite("Observation", "", fmt.Sprint("o", i)).ID)
				pats = append(pats, e.histWrite("Patient", "", fmt.Sprint("p", i)).ID)
			}
			for i := range 3 {
				e.histWrite("Observation", obs[i], "o-updated")
				e.histWrite("Patient", pats[i], "p-updated")
			}
			for i := range 6 {
				e.histWrite("Observation", obs[0], fmt.Sprint("o0-", i))
			}
			path, prefix := "/_history", ""
			switch level {
			case "type":
				path, prefix = "/Observation/_history", "Observation/"
			case "instance":
				path, prefix = "/Observation/"+obs[0]+"/_history", "Observation/"+obs[0]+"/"
			}
			snapshot := e.histGet(path + "?_count=100")
			want := snapshot.keys(t)
			if len(want) < 8 {
				t.Fatalf("only %d versions", len(want))
			}

			first := e.histGet(path + "?_count=3")
			wantHistKeys(t, "first page", first.keys(t), want[:3])
			second := e.histFollow(first.link("next"))
			wantHistKeys(t, "second page", second.keys(t), want[3:6])

			// Writes of every kind after paging started.
			histTick()
			written := 0
			count := func(key string) {
				if strings.HasPrefix(key, prefix) {
					written++
				}
			}
			for i := range 2 {
				count(e.histWrite("Observation", obs[i], "later").Key)
				count(e.histWrite("Patient", pats[i], "later").Key)
				count(e.histWrite("Observation", "", "new").Key)
				count(e.histWrite("Patient", "", "new").Key)
			}
			e.histDelete("Observation", obs[0])
			e.histDelete("Patient", pats[3])
			count("Observation/" + obs[0] + "/deleted")
			count("Patient/" + pats[3] + "/deleted")

			got := append(first.keys(t), second.keys(t)...)
			page := second
			for page.link("next") != "" {
				page = e.histFollow(page.link("next"))
				if page.total(t) != int64(len(want)) {
					t.Errorf("total %d on a later page, want the first page's %d", page.total(t), len(want))
				}
				got = append(got, page.keys(t)...)
			}
			wantHistKeys(t, "versions paged while writing", got, want)

			// Going back from the second page still gives the first page
			// exactly, with nothing before it in the snapshot.
			back := e.histFollow(second.link("previous"))
			wantHistKeys(t, "previous of the second page", back.keys(t), want[:3])
			if back.link("previous") != "" || back.total(t) != int64(len(want)) {
				t.Errorf("the snapshot's first page has a previous link or another total: %d %+v", back.total(t), back.Link)
			}
			if fresh := e.histGet(path + "?_count=3"); fresh.total(t) != int64(len(want)+written) {
				t.Errorf("a new first page has total %d, want %d", fresh.total(t), len(want)+written)
			}
		})
	}
}

func TestHistoryTypeHasOnlyThatType(t *testing.T) {
	e := newEnv(t)
	o1 := e.histWrite("Observation", "", "a")
	o2 := e.histWrite("Observation", "", "b")
	o1b := e.histWrite("Observation", o1.ID, "a2")
	p := e.histWrite("Patient", "", "P")
	pr := e.histWrite("Practitioner", "", "Dr")

	b := e.histGet("/Observation/_history")
	if b.total(t) != 3 || len(b.Entry) != 3 {
		t.Fatalf("total %d with %d entries, want 3", b.total(t), len(b.Entry))
	}
	got := map[string]bool{}
	for _, en := range b.Entry {
		if en.Resource["resourceType"] != "Observation" || !strings.Contains(en.FullURL, "/Observation/") {
			t.Errorf("entry %s in Observation history", en.FullURL)
		}
		got[en.key(t)] = true
	}
	for _, v := range []histVersion{o1, o2, o1b} {
		if !got[v.Key] {
			t.Errorf("%s missing from Observation history", v.Key)
		}
	}
	wantHistKeys(t, "Patient history", e.histGet("/Patient/_history").keys(t), []string{p.Key})
	wantHistKeys(t, "Practitioner history", e.histGet("/Practitioner/_history").keys(t), []string{pr.Key})

	// A known type without resources has an empty history; an unknown type is a 404.
	empty := e.histGet("/Encounter/_history")
	if empty.total(t) != 0 || len(empty.Entry) != 0 || empty.link("next") != "" {
		t.Errorf("empty type history: total %d, %d entries, links %+v", empty.total(t), len(empty.Entry), empty.Link)
	}
	wantOutcome(t, e.get("/NotAType/_history"), http.StatusNotFound, "")
}

func TestHistorySystemHasEveryTypeOfTheTenantOnly(t *testing.T) {
	a, b := newEnv(t), newEnv(t)
	aKeys := map[string]bool{}
	var encounter string
	for _, typ := range []string{"Patient", "Observation", "Practitioner", "Encounter"} {
		v := a.histWrite(typ, "", "a")
		aKeys[v.Key] = true
		aKeys[a.histWrite(typ, v.ID, "a2").Key] = true
		encounter = v.ID
	}
	a.histDelete("Encounter", encounter) // a deletion is in system history too
	bKeys := map[string]bool{}
	for _, typ := range []string{"Patient", "Observation"} {
		bKeys[b.histWrite(typ, "", "b").Key] = true
	}
	bKeys[b.histWrite("Patient", "shared-id", "b").Key] = true
	aKeys[a.histWrite("Patient", "shared-id", "a").Key] = true

	for _, c := range []struct {
		env  *env
		want map[string]bool
	}{{a, aKeys}, {b, bKeys}} {
		h := c.env.histGet("/_history?_count=100")
		wantTotal := int64(len(c.want))
		if c.env == a {
			wantTotal++ // the Encounter deletion
		}
		if h.total(t) != wantTotal || len(h.Entry) != int(wantTotal) {
			t.Errorf("tenant %s: total %d with %d entries, want %d", c.env.tenant, h.total(t), len(h.Entry), wantTotal)
		}
		types := map[string]bool{}
		for _, en := range h.Entry {
			k := en.key(t)
			if en.Request.Method == "DELETE" {
				if c.env != a || k != "Encounter/"+encounter+"/3" {
					t.Errorf("tenant %s: unexpected deletion %s", c.env.tenant, k)
				}
				continue
			}
			if !c.want[k] {
				t.Errorf("tenant %s: system history has %s, which it did not write", c.env.tenant, k)
			}
			if !strings.HasPrefix(en.FullURL, "http://"+c.env.tenant+".localhost/fhir/r4/") {
				t.Errorf("tenant %s: fullUrl %s", c.env.tenant, en.FullURL)
			}
			types[strings.Split(k, "/")[0]] = true
			delete(c.want, k)
		}
		if len(c.want) != 0 {
			t.Errorf("tenant %s: system history lacks %v", c.env.tenant, c.want)
		}
		if c.env == a && len(types) != 4 {
			t.Errorf("tenant a: types %v, want 4", types)
		}
	}
	// The same id in both tenants: each instance history has its own version only.
	if got := a.histGet("/Patient/shared-id/_history"); got.total(t) != 1 || got.Entry[0].Resource["name"].([]any)[0].(map[string]any)["family"] != "a" {
		t.Errorf("tenant a's Patient/shared-id history: %+v", got.Entry)
	}
}

func TestHistorySince(t *testing.T) {
	e := newEnv(t)
	p1 := e.histWrite("Patient", "", "v1")
	histTick()
	p2 := e.histWrite("Patient", p1.ID, "v2")
	histTick()
	o1 := e.histWrite("Observation", "", "o")
	histTick()
	p3 := e.histWrite("Patient", p1.ID, "v3")

	for _, c := range []struct {
		path, since string
		want        []string
	}{
		{"/Patient/" + p1.ID + "/_history", p2.LastUpdated, []string{p3.Key, p2.Key}},
		{"/Patient/_history", p2.LastUpdated, []string{p3.Key, p2.Key}},
		{"/_history", p2.LastUpdated, []string{p3.Key, o1.Key, p2.Key}},
		{"/_history", o1.LastUpdated, []string{p3.Key, o1.Key}},
		{"/Patient/" + p1.ID + "/_history", p3.LastUpdated, []string{p3.Key}},
		{"/Patient/" + p1.ID + "/_history", p1.LastUpdated, []string{p3.Key, p2.Key, p1.Key}},
		// one millisecond after the last write: nothing
		{"/_history", p3.time(t).Add(time.Millisecond).Format(store.InstantLayout), nil},
		// the same instant in another zone
		{"/_history", p2.time(t).In(time.FixedZone("", 2*3600)).Format(store.InstantLayout), []string{p3.Key, o1.Key, p2.Key}},
		// date only: from the start of that day (UTC)
		{"/_history", p1.LastUpdated[:10], []string{p3.Key, o1.Key, p2.Key, p1.Key}},
		{"/Patient/" + p1.ID + "/_history", p1.LastUpdated[:10], []string{p3.Key, p2.Key, p1.Key}},
		{"/_history", p1.time(t).AddDate(0, 0, 1).Format("2006-01-02"), nil},
	} {
		b := e.histGet(c.path + histQuery("_since", c.since))
		wantHistKeys(t, c.path+" _since="+c.since, b.keys(t), c.want)
		if b.total(t) != int64(len(c.want)) {
			t.Errorf("%s _since=%s: total %d, want %d", c.path, c.since, b.total(t), len(c.want))
		}
	}

	// _since with paging: the next page keeps the filter.
	pages := e.histPages("/_history" + histQuery("_since", p2.LastUpdated, "_count", "1"))
	var got []string
	for _, p := range pages {
		got = append(got, p.keys(t)...)
	}
	wantHistKeys(t, "_since paged", got, []string{p3.Key, o1.Key, p2.Key})

	for _, bad := range []string{"yesterday", "2024-13-01", "2024-02-30", "24-01-01", "2024-01-01T25:00:00Z", "2024-01-01T10:00:00+2"} {
		wantOutcome(t, e.get("/_history"+histQuery("_since", bad)), http.StatusBadRequest, "_since")
		wantOutcome(t, e.get("/Patient/"+p1.ID+"/_history"+histQuery("_since", bad)), http.StatusBadRequest, "_since")
	}
}

func TestHistoryAtInstance(t *testing.T) {
	e := newEnv(t)
	v1 := e.histWrite("Patient", "", "v1")
	id := v1.ID
	time.Sleep(20 * time.Millisecond)
	v2 := e.histWrite("Patient", id, "v2")
	time.Sleep(20 * time.Millisecond)
	v3 := e.histWrite("Patient", id, "v3")
	path := "/Patient/" + id + "/_history"
	between := v2.time(t).Add(v3.time(t).Sub(v2.time(t)) / 2)

	for _, c := range []struct {
		name, at string
		want     []string
	}{
		{"v2's instant", v2.LastUpdated, []string{v2.Key}},
		{"v1's instant", v1.LastUpdated, []string{v1.Key}},
		{"v3's instant", v3.LastUpdated, []string{v3.Key}},
		{"1ms before v2", v2.time(t).Add(-time.Millisecond).Format(store.InstantLayout), []string{v1.Key}},
		{"between v2 and v3", between.Format(store.InstantLayout), []string{v2.Key}},
		{"after v3", v3.time(t).Add(time.Hour).Format(store.InstantLayout), []string{v3.Key}},
		{"this year", v1.LastUpdated[:4], []string{v3.Key, v2.Key, v1.Key}},
		{"this day", v1.LastUpdated[:10], []string{v3.Key, v2.Key, v1.Key}},
		{"before it existed", "2000", nil},
		{"1ms before v1", v1.time(t).Add(-time.Millisecond).Format(store.InstantLayout), nil},
	} {
		b := e.histGet(path + histQuery("_at", c.at))
		wantHistKeys(t, c.name+" (_at="+c.at+")", b.keys(t), c.want)
		if b.total(t) != int64(len(c.want)) {
			t.Errorf("%s (_at=%s): total %d, want %d", c.name, c.at, b.total(t), len(c.want))
		}
	}
	for _, bad := range []string{"now", "2024-1-1", "2024-01-01T10", "2024-01-01 10:00:00Z", "2024-02-30"} {
		wantOutcome(t, e.get(path+histQuery("_at", bad)), http.StatusBadRequest, "_at")
	}
}

func TestHistoryAtType(t *testing.T) {
	e := newEnv(t)
	a1 := e.histWrite("Patient", "", "a1")
	histTick()
	b1 := e.histWrite("Patient", "", "b1")
	histTick()
	a2 := e.histWrite("Patient", a1.ID, "a2")
	histTick()
	o1 := e.histWrite("Observation", "", "o1")
	histTick()
	b2 := e.histWrite("Patient", b1.ID, "b2")
	histTick()
	c1 := e.histWrite("Patient", "", "c1")

	for _, c := range []struct {
		name, path, at string
		want           []string
	}{
		{"a2's instant", "/Patient/_history", a2.LastUpdated, []string{a2.Key, b1.Key}},
		{"b1's instant", "/Patient/_history", b1.LastUpdated, []string{b1.Key, a1.Key}},
		{"a1's instant", "/Patient/_history", a1.LastUpdated, []string{a1.Key}},
		{"c1's instant", "/Patient/_history", c1.LastUpdated, []string{c1.Key, b2.Key, a2.Key}},
		{"this year", "/Patient/_history", a1.LastUpdated[:4], []string{c1.Key, b2.Key, a2.Key, b1.Key, a1.Key}},
		{"before they existed", "/Patient/_history", "2000-01-01", nil},
		{"o1's instant, system", "/_history", o1.LastUpdated, []string{o1.Key, a2.Key, b1.Key}},
		{"o1's instant, Observation", "/Observation/_history", o1.LastUpdated, []string{o1.Key}},
	} {
		b := e.histGet(c.path + histQuery("_at", c.at))
		wantHistKeys(t, c.name+" (_at="+c.at+")", b.keys(t), c.want)
		if b.total(t) != int64(len(c.want)) {
			t.Errorf("%s (_at=%s): total %d, want %d", c.name, c.at, b.total(t), len(c.want))
		}
	}
	wantOutcome(t, e.get("/Patient/_history"+histQuery("_at", "last week")), http.StatusBadRequest, "_at")
	wantOutcome(t, e.get("/_history"+histQuery("_at", "2024-13")), http.StatusBadRequest, "_at")
}

// With _at, versions superseded before the instant are skipped, also when
// they fill whole pages' worth of rows, and paging still visits each kept
// version once.
func TestHistoryAtPagesPastSupersededVersions(t *testing.T) {
	e := newEnv(t)
	a := e.histWrite("Patient", "", "a1")
	var aLast histVersion
	for i := 2; i <= 6; i++ {
		aLast = e.histWrite("Patient", a.ID, fmt.Sprint("a", i))
	}
	histTick()
	b1 := e.histWrite("Patient", "", "b1")
	histTick()
	for i := 2; i <= 4; i++ { // after the instant: not current at it
		e.histWrite("Patient", a.ID, fmt.Sprint("a-late", i))
	}
	for _, count := range []string{"1", "2", "10"} {
		pages := e.histPages("/Patient/_history" + histQuery("_at", b1.LastUpdated, "_count", count))
		var got []string
		for _, p := range pages {
			got = append(got, p.keys(t)...)
			if p.total(t) != 2 {
				t.Errorf("_count=%s: total %d, want 2", count, p.total(t))
			}
		}
		wantHistKeys(t, "_count="+count, got, []string{b1.Key, aLast.Key})
	}
	// instance level, one per page: only a6 was current when b1 was written
	pages := e.histPages("/Patient/" + a.ID + "/_history" + histQuery("_at", b1.LastUpdated, "_count", "1"))
	if len(pages) != 1 {
		t.Errorf("%d pages, want 1", len(pages))
	}
	wantHistKeys(t, "instance", pages[0].keys(t), []string{aLast.Key})
}

func TestHistoryOfUnknownAndDeletedResources(t *testing.T) {
	e := newEnv(t)
	wantOutcome(t, e.get("/Patient/no-such-id/_history"), http.StatusNotFound, "")
	v1 := e.histWrite("Patient", "", "v1")
	v2 := e.histWrite("Patient", v1.ID, "v2")
	e.histDelete("Patient", v1.ID)
	if r := e.get("/Patient/" + v1.ID); r.Status != http.StatusGone {
		t.Fatalf("read of the deleted patient: %d", r.Status)
	}
	b := e.histGet("/Patient/" + v1.ID + "/_history")
	wantHistKeys(t, "deleted patient", b.keys(t), []string{"Patient/" + v1.ID + "/3", v2.Key, v1.Key})
	if b.total(t) != 3 {
		t.Errorf("total %d, want 3", b.total(t))
	}
	// The same id under another type is unknown.
	wantOutcome(t, e.get("/Observation/"+v1.ID+"/_history"), http.StatusNotFound, "")
	// Re-created after the deletion: history goes on.
	e.histWrite("Patient", v1.ID, "v4")
	b = e.histGet("/Patient/" + v1.ID + "/_history")
	if b.total(t) != 4 || b.Entry[0].Request.Method != "PUT" || b.Entry[1].Request.Method != "DELETE" {
		t.Errorf("after re-creation: %+v", b.Entry)
	}
}

func TestHistoryRejectsBadCursor(t *testing.T) {
	e := newEnv(t)
	id := e.histWrite("Patient", "", "v1").ID
	e.histWrite("Patient", id, "v2")
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, path := range []string{"/Patient/" + id + "/_history", "/Patient/_history", "/_history"} {
		for _, bad := range []string{"not a cursor!", "%%", enc("x|1|Patient/a/1"), enc("n|soon|Patient/a/1"), enc("n|1|"), enc("n|1"), enc("garbage")} {
			wantOutcome(t, e.get(path+histQuery("_cursor", bad)), http.StatusBadRequest, "_cursor")
		}
		// a good cursor still works
		first := e.histGet(path + "?_count=1")
		if next := e.histFollow(first.link("next")); len(next.Entry) != 1 {
			t.Fatalf("%s: next page with %d entries", path, len(next.Entry))
		}
	}
}

// With _at, previous links step back over superseded versions too and give
// each earlier page back exactly.
func TestHistoryAtPagesBackwards(t *testing.T) {
	e := newEnv(t)
	b1 := e.histWrite("Patient", "", "b1")
	histTick()
	a := e.histWrite("Patient", "", "a1")
	var aLast histVersion
	for i := 2; i <= 6; i++ {
		aLast = e.histWrite("Patient", a.ID, fmt.Sprint("a", i))
	}
	histTick()
	c1 := e.histWrite("Patient", "", "c1")
	histTick()
	e.histWrite("Patient", a.ID, "a-late")
	e.histWrite("Patient", b1.ID, "b-late")

	pages := e.histPages("/Patient/_history" + histQuery("_at", c1.LastUpdated, "_count", "1"))
	var got []string
	for _, p := range pages {
		got = append(got, p.keys(t)...)
	}
	wantHistKeys(t, "forwards", got, []string{c1.Key, aLast.Key, b1.Key})
	for i := len(pages) - 1; i > 0; i-- {
		back := e.histFollow(pages[i].link("previous"))
		wantHistKeys(t, fmt.Sprintf("previous of page %d", i), back.keys(t), pages[i-1].keys(t))
		if (back.link("previous") != "") != (i-1 > 0) {
			t.Errorf("page %d reached backwards: previous link %q", i-1, back.link("previous"))
		}
	}
}

// A page's self link identifies that page: following it gives the same
// entries again, not the first page.
func TestHistorySelfLinkOfALaterPageIsThatPage(t *testing.T) {
	e := newEnv(t)
	id := e.histWrite("Patient", "", "v1").ID
	for i := 2; i <= 5; i++ {
		e.histWrite("Patient", id, fmt.Sprint("v", i))
	}
	first := e.histGet("/Patient/" + id + "/_history?_count=2")
	second := e.histFollow(first.link("next"))
	again := e.histFollow(second.link("self"))
	wantHistKeys(t, "page reached through the second page's self link "+second.link("self"), again.keys(t), second.keys(t))
}
