package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The tests of this file use the conditional interactions and JSON Patch
// over plain HTTP, alone and concurrently; helpers are in bundle_test.go.

// btJSONPatch is the header of a JSON Patch request.
var btJSONPatch = map[string]string{"Content-Type": "application/json-patch+json"}

// TestConditionalCreateWithIfNoneExist: POST with If-None-Exist creates
// once, then answers the match with 200; several matches are 412.
func TestConditionalCreateWithIfNoneExist(t *testing.T) {
	e := newEnv(t)
	create := func(ifNoneExist string) *response {
		return e.do(request{Method: http.MethodPost, Path: "/Patient", Body: btPatient("Once", "ic"), Header: map[string]string{"If-None-Exist": ifNoneExist}})
	}
	first := create(btCrit("ic"))
	e2eWantStatus(t, first, http.StatusCreated)
	id, _ := first.JSON(t)["id"].(string)
	for _, tc := range []struct{ name, header string }{
		{"criteria as a query", btCrit("ic")},
		{"criteria with the type", "Patient?" + btCrit("ic")},
		{"criteria with the type and a second parameter", "Patient?" + btCrit("ic") + "&family=Once"},
	} {
		t.Run("a second create finds the match: "+tc.name, func(t *testing.T) {
			r := create(tc.header)
			e2eWantStatus(t, r, http.StatusOK)
			e2eWantVersion(t, r, 1)
			if got := r.JSON(t)["id"]; got != id {
				t.Fatalf("id %v, want the match %s", got, id)
			}
			if loc := r.Header.Get("Location"); !strings.HasSuffix(loc, "/Patient/"+id+"/_history/1") {
				t.Fatalf("Location %q", loc)
			}
		})
	}
	if n := btTotal(t, e, "/Patient?"+btCrit("ic")); n != 1 {
		t.Fatalf("%d Patients with the identifier, want 1", n)
	}

	for range 2 {
		e.create("Patient", btPatient("Twin", "twin"))
	}
	unchanged := btUnchanged(t, e)
	for _, tc := range []struct {
		name, header string
		status       int
	}{
		{"criteria matching two resources are 412", btCrit("twin"), 412},
		{"an unknown parameter is 400", "nonsense=1", 400},
		{"a result parameter is 400", btCrit("twin") + "&_sort=family", 400},
		{"criteria that are not a query are 400", "%zz", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, create(tc.header), tc.status, "")
			unchanged(t)
		})
	}
}

// TestConditionalUpdate: PUT Type?criteria creates without a match,
// updates the one match, and is 412 with several.
func TestConditionalUpdate(t *testing.T) {
	e := newEnv(t)
	path := "/Patient?" + btCrit("pu")
	first := e.put(path, btPatient("First", "pu"))
	e2eWantStatus(t, first, http.StatusCreated)
	e2eWantVersion(t, first, 1)
	id, _ := first.JSON(t)["id"].(string)
	if !e2eUUID.MatchString(id) {
		t.Fatalf("created id %q is not server-assigned", id)
	}

	t.Run("one match is updated in place", func(t *testing.T) {
		r := e.put(path, btPatient("Second", "pu"))
		e2eWantStatus(t, r, http.StatusOK)
		e2eWantVersion(t, r, 2)
		if got := r.JSON(t)["id"]; got != id {
			t.Fatalf("id %v, want %s", got, id)
		}
		if loc := r.Header.Get("Location"); !strings.HasSuffix(loc, "/Patient/"+id+"/_history/2") {
			t.Fatalf("Location %q", loc)
		}
	})
	t.Run("a body id other than the match is 400", func(t *testing.T) {
		wantOutcome(t, e.put(path, `{"resourceType":"Patient","id":"someone-else"}`), http.StatusBadRequest, "Patient.id")
		if n := btTotal(t, e, "/Patient/"+id+"/_history"); n != 2 {
			t.Fatalf("%d versions, want 2", n)
		}
	})
	t.Run("an invalid body is 422 and changes nothing", func(t *testing.T) {
		wantOutcome(t, e.put(path, `{"resourceType":"Patient","gender":"yes"}`), http.StatusUnprocessableEntity, "Patient.gender")
		if n := btTotal(t, e, "/Patient/"+id+"/_history"); n != 2 {
			t.Fatalf("%d versions, want 2", n)
		}
	})
	t.Run("stale If-Match is 412", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPut, Path: path, Body: btPatient("Third", "pu"), Header: map[string]string{"If-Match": `W/"1"`}})
		wantOutcome(t, r, http.StatusPreconditionFailed, "")
	})

	for range 2 {
		e.create("Patient", btPatient("Twin", "twin"))
	}
	unchanged := btUnchanged(t, e)
	t.Run("two matches are 412 and change nothing", func(t *testing.T) {
		wantOutcome(t, e.put("/Patient?"+btCrit("twin"), btPatient("Twin", "twin")), http.StatusPreconditionFailed, "")
		unchanged(t)
	})
	if n := btTotal(t, e, "/Patient?"+btCrit("pu")); n != 1 {
		t.Fatalf("%d Patients with the identifier, want 1", n)
	}
}

// TestConditionalDelete: DELETE Type?criteria deletes the one match, is
// 204 without one and 412 with several.
func TestConditionalDelete(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", btPatient("Gone", "pd"))
	r := e.do(request{Method: http.MethodDelete, Path: "/Patient?" + btCrit("pd")})
	e2eWantStatus(t, r, http.StatusNoContent)
	if r.Header.Get("ETag") != `W/"2"` {
		t.Fatalf("ETag %q, want the deletion's W/\"2\"", r.Header.Get("ETag"))
	}
	wantOutcome(t, e.get("/Patient/"+id), http.StatusGone, "")

	for range 2 {
		e.create("Patient", btPatient("Twin", "twin"))
	}
	unchanged := btUnchanged(t, e)
	for _, tc := range []struct {
		name, query string
		status      int
	}{
		{"the deleted match is not matched again (204)", btCrit("pd"), 204},
		{"no match is 204", btCrit("never-there"), 204},
		{"two matches are 412", btCrit("twin"), 412},
		{"an unknown parameter is 400", "nonsense=1", 400},
	} {
		t.Run(tc.name+" and changes nothing", func(t *testing.T) {
			r := e.do(request{Method: http.MethodDelete, Path: "/Patient?" + tc.query})
			if tc.status >= 400 {
				wantOutcome(t, r, tc.status, "")
			} else {
				e2eWantStatus(t, r, tc.status)
			}
			unchanged(t)
		})
	}
}

// TestPatchWithJSONPatch: PATCH Type/id and Type?criteria with a JSON Patch
// make a new version; a failed patch stores nothing.
func TestPatchWithJSONPatch(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true,"identifier":[{"system":"`+btSys+`","value":"jp"}],"name":[{"family":"Before"}]}`)
	patch := func(path, body string, header map[string]string) *response {
		if header == nil {
			header = btJSONPatch
		}
		return e.do(request{Method: http.MethodPatch, Path: path, Body: body, Header: header})
	}
	r := patch("/Patient/"+id, `[{"op":"replace","path":"/name/0/family","value":"After"},{"op":"remove","path":"/active"}]`, nil)
	e2eWantStatus(t, r, http.StatusOK)
	e2eWantVersion(t, r, 2)
	if p := r.JSON(t); btFamily(t, p) != "After" || p["active"] != nil {
		t.Fatalf("patched %s", r.Body)
	}
	if loc := r.Header.Get("Location"); !strings.HasSuffix(loc, "/Patient/"+id+"/_history/2") {
		t.Fatalf("Location %q", loc)
	}
	t.Run("history keeps both versions", func(t *testing.T) {
		if n := btTotal(t, e, "/Patient/"+id+"/_history"); n != 2 {
			t.Fatalf("%d versions, want 2", n)
		}
		if f := btFamily(t, btRead(t, e, "Patient/"+id+"/_history/1")); f != "Before" {
			t.Fatalf("version 1 family %q", f)
		}
		if f := btFamily(t, btRead(t, e, "Patient/"+id)); f != "After" {
			t.Fatalf("current family %q", f)
		}
	})

	e.create("Patient", btPatient("Twin", "twin"))
	e.create("Patient", btPatient("Twin", "twin"))
	deleted := e.create("Patient", btPatient("Deleted", ""))
	e2eWantStatus(t, e.do(request{Method: http.MethodDelete, Path: "/Patient/" + deleted}), http.StatusNoContent)
	unchanged := btUnchanged(t, e)
	for _, tc := range []struct {
		name, path, body string
		header           map[string]string
		status           int
		expr             string
	}{
		{"a result that is not a valid Patient is 422", "/Patient/" + id, `[{"op":"add","path":"/gender","value":"yes"}]`, nil, 422, "Patient.gender"},
		{"a failing test op is 422", "/Patient/" + id, `[{"op":"test","path":"/name/0/family","value":"Before"},{"op":"replace","path":"/name/0/family","value":"X"}]`, nil, 422, ""},
		{"a path that does not exist is 400", "/Patient/" + id, `[{"op":"replace","path":"/birthDate","value":"2000-01-01"}]`, nil, 400, ""},
		{"a FHIR JSON body is 415", "/Patient/" + id, `{"resourceType":"Patient","id":"` + id + `"}`, map[string]string{}, 415, ""},
		{"a text/plain body is 415", "/Patient/" + id, `[]`, map[string]string{"Content-Type": "text/plain"}, 415, ""},
		{"a missing resource is 404", "/Patient/no-such-patient", `[{"op":"add","path":"/active","value":true}]`, nil, 404, ""},
		{"a deleted resource is 410", "/Patient/" + deleted, `[{"op":"add","path":"/active","value":true}]`, nil, 410, ""},
		{"a stale If-Match is 412", "/Patient/" + id, `[{"op":"add","path":"/active","value":true}]`, map[string]string{"Content-Type": "application/json-patch+json", "If-Match": `W/"1"`}, 412, ""},
		{"criteria matching two resources are 412", "/Patient?" + btCrit("twin"), `[{"op":"add","path":"/active","value":true}]`, nil, 412, ""},
		{"criteria matching nothing are 404", "/Patient?" + btCrit("nobody"), `[{"op":"add","path":"/active","value":true}]`, nil, 404, ""},
	} {
		t.Run(tc.name+" and changes nothing", func(t *testing.T) {
			wantOutcome(t, patch(tc.path, tc.body, tc.header), tc.status, tc.expr)
			unchanged(t)
			if f := btFamily(t, btRead(t, e, "Patient/"+id)); f != "After" {
				t.Fatalf("family %q", f)
			}
		})
	}

	t.Run("PATCH Type?criteria patches the match", func(t *testing.T) {
		r := patch("/Patient?"+btCrit("jp"), `[{"op":"test","path":"/name/0/family","value":"After"},{"op":"add","path":"/gender","value":"female"}]`,
			map[string]string{"Content-Type": "application/json-patch+json", "If-Match": `W/"2"`})
		e2eWantStatus(t, r, http.StatusOK)
		e2eWantVersion(t, r, 3)
		if p := r.JSON(t); p["id"] != id || p["gender"] != "female" {
			t.Fatalf("patched %s", r.Body)
		}
	})

	t.Run("decimals keep their text", func(t *testing.T) {
		oid := e.create("Observation", `{"resourceType":"Observation","status":"preliminary","code":{"text":"weight"},"valueQuantity":{"value":1.50,"unit":"kg"},"component":[{"code":{"text":"a"},"valueQuantity":{"value":1e2}},{"code":{"text":"b"},"valueQuantity":{"value":0.10}}]}`)
		r := patch("/Observation/"+oid, `[{"op":"replace","path":"/status","value":"final"},{"op":"add","path":"/component/1/valueQuantity/unit","value":"mg"},{"op":"add","path":"/referenceRange","value":[{"low":{"value":2.500}}]}]`, nil)
		e2eWantStatus(t, r, http.StatusOK)
		for _, body := range [][]byte{r.Body, e.get("/Observation/" + oid).Body} {
			for _, want := range []string{`"status":"final"`, `"valueQuantity":{"value":1.50,"unit":"kg"}`, `"value":1e2`, `"value":0.10,"unit":"mg"`, `"value":2.500`} {
				if !bytes.Contains(body, []byte(want)) {
					t.Fatalf("patched Observation %s lacks %s", body, want)
				}
			}
		}
	})
}

// btConcurrently runs f(0) … f(n-1) at once and waits for them.
func btConcurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

// TestConcurrentConditionalCreatesMakeOneResource: many conditional creates
// (and conditional updates) with the same criteria at once create exactly
// one resource.
func TestConcurrentConditionalCreatesMakeOneResource(t *testing.T) {
	const n = 25
	e := newEnv(t)
	fromBody := func(t *testing.T, r *response) (int, string) {
		if r.Status != http.StatusCreated && r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		id, _ := r.JSON(t)["id"].(string)
		return r.Status, "Patient/" + id
	}
	cases := []struct {
		name string
		send func(i int, v string) *response
		// created tells the status of the Patient's creation from a response.
		created func(t *testing.T, r *response) (status int, ref string)
		// versions is how many versions the one Patient has afterwards.
		versions int
	}{
		{"PUT with criteria",
			func(i int, v string) *response {
				return e.put("/Patient?"+btCrit(v), btPatient(fmt.Sprint("Racer", i), v))
			},
			fromBody, n},
		{"POST with If-None-Exist",
			func(i int, v string) *response {
				return e.do(request{Method: http.MethodPost, Path: "/Patient", Body: btPatient(fmt.Sprint("Racer", i), v), Header: map[string]string{"If-None-Exist": btCrit(v)}})
			},
			fromBody, 1},
		{"transaction entries with ifNoneExist",
			func(i int, v string) *response {
				const urn = "urn:uuid:3c9f2e7a-6b1d-4f8e-9a2c-0000000000aa"
				return e.btSend(btBundle("transaction",
					btOp("POST", "Patient", btPatient(fmt.Sprint("Racer", i), v)).full(urn).ifNoneExist(btCrit(v)),
					btOp("POST", "Observation", btObservation(fmt.Sprint("race-", v, i), urn))), nil)
			},
			func(t *testing.T, r *response) (int, string) {
				b := btDecode(t, r, "transaction-response", 2)
				return b.Entry[0].status(t), b.Entry[0].ref(t)
			}, 1},
		{"batch entries with ifNoneExist",
			func(i int, v string) *response {
				return e.btSend(btBundle("batch",
					btOp("POST", "Patient", btPatient(fmt.Sprint("Racer", i), v)).ifNoneExist(btCrit(v)),
					btOp("POST", "Patient", btPatient(fmt.Sprint("Twin", i), v)).ifNoneExist(btCrit(v))), nil)
			},
			func(t *testing.T, r *response) (int, string) {
				b := btDecode(t, r, "batch-response", 2)
				if b.Entry[1].status(t) != http.StatusOK || b.Entry[1].ref(t) != b.Entry[0].ref(t) {
					t.Fatalf("the second entry answered %d %s, want 200 and the first entry's %s", b.Entry[1].status(t), b.Entry[1].ref(t), b.Entry[0].ref(t))
				}
				return b.Entry[0].status(t), b.Entry[0].ref(t)
			}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			responses := make([]*response, n)
			btConcurrently(n, func(i int) { responses[i] = tc.send(i, v) })
			refs := map[string]int{}
			created := 0
			for _, r := range responses {
				status, ref := tc.created(t, r)
				refs[ref]++
				if status == http.StatusCreated {
					created++
				}
			}
			if created != 1 || len(refs) != 1 {
				t.Fatalf("%d creates answered 201, ids %v: want one 201 and one id", created, refs)
			}
			if m := btTotal(t, e, "/Patient?"+btCrit(v)); m != 1 {
				t.Fatalf("%d Patients with the identifier, want 1", m)
			}
			for ref := range refs {
				if m := btTotal(t, e, "/"+ref+"/_history"); m != tc.versions {
					t.Fatalf("%s has %d versions, want %d", ref, m, tc.versions)
				}
				if strings.HasPrefix(tc.name, "transaction") {
					if m := btTotal(t, e, "/Observation?subject="+ref); m != n {
						t.Fatalf("%d Observations refer to %s, want %d", m, ref, n)
					}
				}
			}
		})
	}
}

// TestConcurrentTransactionsOnOnePatient: transactions that each update one
// Patient and create an Observation either commit whole (200) or fail whole
// (409); the Patient's versions have no gaps and only the committed
// Observations exist.
func TestConcurrentTransactionsOnOnePatient(t *testing.T) {
	const n = 25
	e := newEnv(t)
	e2eWantStatus(t, e.put("/Patient/racer", `{"resourceType":"Patient","id":"racer","name":[{"family":"Start"}]}`), http.StatusCreated)
	// Each writer tries up to four times; its attempt k of writer i names
	// the Patient Racer-i-k and codes the Observation race-i-k.
	var mu sync.Mutex
	var attempts []*response
	committed := map[string]bool{}
	btConcurrently(n, func(i int) {
		for k := range 4 {
			key := fmt.Sprintf("%d-%d", i, k)
			r := e.btSend(btBundle("transaction",
				btOp("PUT", "Patient/racer", `{"resourceType":"Patient","id":"racer","name":[{"family":"Racer-`+key+`"}]}`),
				btOp("POST", "Observation", btObservation("race-"+key, "Patient/racer"))), nil)
			mu.Lock()
			attempts = append(attempts, r)
			if r.Status == http.StatusOK {
				committed[key] = true
			}
			mu.Unlock()
			if r.Status == http.StatusOK {
				return
			}
		}
	})
	for _, r := range attempts {
		switch r.Status {
		case http.StatusOK:
			btWantStatuses(t, btDecode(t, r, "transaction-response", 2), 200, 201)
		case http.StatusConflict:
			wantOutcome(t, r, http.StatusConflict, "")
		default:
			t.Fatalf("status %d, want 200 or 409: %s", r.Status, r.Body)
		}
	}
	if len(committed) == 0 {
		t.Fatal("no transaction committed")
	}
	t.Logf("%d of %d transactions committed", len(committed), len(attempts))

	t.Run("the Patient's versions are 1..n without gaps", func(t *testing.T) {
		var vids []int
		families := map[string]bool{}
		for _, page := range e.histPages("/Patient/racer/_history?_count=100") {
			for _, en := range page.Entry {
				v, err := strconv.Atoi(en.Resource["meta"].(map[string]any)["versionId"].(string))
				if err != nil {
					t.Fatal(err)
				}
				vids = append(vids, v)
				families[btFamily(t, en.Resource)] = true
			}
		}
		sort.Ints(vids)
		if len(vids) != len(committed)+1 {
			t.Fatalf("%d versions, want %d (1 + the committed transactions)", len(vids), len(committed)+1)
		}
		for i, v := range vids {
			if v != i+1 {
				t.Fatalf("versions %v have a gap or a duplicate", vids)
			}
		}
		for key := range committed {
			if !families["Racer-"+key] {
				t.Fatalf("the version of committed transaction %s is missing from history", key)
			}
		}
		cur := btRead(t, e, "Patient/racer")
		if cur["meta"].(map[string]any)["versionId"] != fmt.Sprint(len(vids)) {
			t.Fatalf("current version %v, want %d", cur["meta"], len(vids))
		}
	})
	t.Run("exactly the committed transactions' Observations exist", func(t *testing.T) {
		if m := btTotal(t, e, "/Observation"); m != len(committed) {
			t.Fatalf("%d Observations, want %d", m, len(committed))
		}
		if m := btTotal(t, e, "/Observation/_history"); m != len(committed) {
			t.Fatalf("%d Observation versions in history, want %d", m, len(committed))
		}
		if m := btTotal(t, e, "/_history"); m != 1+2*len(committed) {
			t.Fatalf("%d versions in the system history, want %d", m, 1+2*len(committed))
		}
		r := e.get("/Observation?_count=100")
		e2eWantStatus(t, r, http.StatusOK)
		var set struct {
			Entry []struct {
				Resource struct {
					Code struct{ Text string }
				}
			}
		}
		if err := json.Unmarshal(r.Body, &set); err != nil {
			t.Fatal(err)
		}
		for _, en := range set.Entry {
			if key := strings.TrimPrefix(en.Resource.Code.Text, "race-"); !committed[key] {
				t.Fatalf("Observation %s of a failed transaction exists", en.Resource.Code.Text)
			}
		}
	})
}

// TestBatchConditionalWritesSeeEarlierEntries: a batch looks its
// conditions up together, yet each entry sees what the entries before it
// wrote, exactly as if it had searched on its own.
func TestBatchConditionalWritesSeeEarlierEntries(t *testing.T) {
	e := newEnv(t)
	old := e.create("Patient", btPatient("Old", "hint-old"))
	entries := []btEntry{
		btOp("POST", "Patient", btPatient("First", "hint-x")).ifNoneExist(btCrit("hint-x")),
		btOp("POST", "Patient", btPatient("Second", "hint-x")).ifNoneExist(btCrit("hint-x")),
		btOp("PUT", "Patient?"+btCrit("hint-y"), btPatient("ByUpdate", "hint-y")),
		btOp("POST", "Patient", btPatient("AfterUpdate", "hint-y")).ifNoneExist(btCrit("hint-y")),
		btOp("POST", "Patient", btPatient("Again", "hint-old")).ifNoneExist(btCrit("hint-old")),
		btOp("PUT", "Patient?"+btCrit("hint-old"), `{"resourceType":"Patient","id":"`+old+`","identifier":[{"system":"`+btSys+`","value":"hint-moved"}]}`),
		btOp("POST", "Patient", btPatient("Fresh", "hint-old")).ifNoneExist(btCrit("hint-old")),
		btOp("POST", "Patient", btPatient("Moved", "hint-moved")).ifNoneExist(btCrit("hint-moved")),
	}
	b := btDecode(t, e.btSend(btBundle("batch", entries...), nil), "batch-response", len(entries))
	btWantStatuses(t, b, 201, 200, 201, 200, 200, 200, 201, 200)
	same := func(i, j int) {
		t.Helper()
		if b.Entry[i].ref(t) != b.Entry[j].ref(t) {
			t.Fatalf("entry %d answered %s, want entry %d's %s", j, b.Entry[j].ref(t), i, b.Entry[i].ref(t))
		}
	}
	same(0, 1)
	same(2, 3)
	same(4, 5)
	same(5, 7)
	if b.Entry[4].ref(t) != "Patient/"+old || b.Entry[6].ref(t) == "Patient/"+old {
		t.Fatalf("entries 4 and 6 answered %s and %s; want the old Patient, then a new one", b.Entry[4].ref(t), b.Entry[6].ref(t))
	}
	for v, want := range map[string]int{"hint-x": 1, "hint-y": 1, "hint-old": 1, "hint-moved": 1} {
		if n := btTotal(t, e, "/Patient?"+btCrit(v)); n != want {
			t.Fatalf("%d Patients with %s, want %d", n, v, want)
		}
	}
}
