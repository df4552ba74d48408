package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// btSynthea is a Synthea Bundle as the test reads and posts it.
type btSynthea struct {
	Type  string           `json:"type"`
	Entry []btSyntheaEntry `json:"entry"`
}

type btSyntheaEntry struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource"`
	Request  btRequest       `json:"request"`
}

// criteria is the conditional reference naming what a conditional create
// creates (Type?criteria), "" for a plain create.
func (en btSyntheaEntry) criteria() string {
	if en.Request.IfNoneExist == "" {
		return ""
	}
	return en.Request.URL + "?" + en.Request.IfNoneExist
}

func btReadSynthea(t *testing.T, name string) *btSynthea {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(synDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var b btSynthea
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &b
}

func (b *btSynthea) body() string {
	raw, err := json.Marshal(map[string]any{"resourceType": "Bundle", "type": b.Type, "entry": b.Entry})
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// btShortEntries is how much of the patient's transaction -short posts:
// its first encounters with what they record.
const btShortEntries = 150

// keepFirst keeps the first n entries whose urn:uuid references all name
// entries kept before them, so that the transaction stays whole.
func (b *btSynthea) keepFirst(n int) {
	kept := map[string]bool{}
	var out []btSyntheaEntry
	for _, en := range b.Entry {
		if len(out) == n {
			break
		}
		whole := true
		for _, m := range btURNReferences.FindAllSubmatch(en.Resource, -1) {
			whole = whole && kept[string(m[1])]
		}
		if whole {
			out = append(out, en)
			kept[en.FullURL] = true
		}
	}
	b.Entry = out
}

// btURNReferences are the urn:uuid references of a Bundle entry.
var btURNReferences = regexp.MustCompile(`"reference"\s*:\s*"(urn:uuid:[^"]+)"`)

// btKeepReferred keeps the entries of batches that refers names (Type?criteria),
// and those that the kept ones name in turn.
func btKeepReferred(batches map[string]*btSynthea, refers map[string]bool) {
	want := maps.Clone(refers)
	for grew := true; grew; {
		grew = false
		for _, b := range batches {
			for _, en := range b.Entry {
				if !want[en.criteria()] {
					continue
				}
				for _, m := range btConditionalReferences.FindAllSubmatch(en.Resource, -1) {
					if !want[string(m[1])] {
						want[string(m[1])], grew = true, true
					}
				}
			}
		}
	}
	for _, b := range batches {
		b.Entry = slices.DeleteFunc(b.Entry, func(en btSyntheaEntry) bool { return !want[en.criteria()] })
	}
}

// btConditionalReferences are the Type?criteria references of a Bundle.
var btConditionalReferences = regexp.MustCompile(`"reference"\s*:\s*"([A-Z][A-Za-z]+\?[^"]+)"`)

// TestSyntheaBundlesLoad posts Synthea's batches of Organizations,
// Locations and Practitioners and patients' transactions, then reads every
// stored resource back: it is the posted resource with its urn:uuid and
// conditional references replaced by the Type/id of what they name.
// Every file of testdata/synthea is posted whole; with -short (the race
// detector's run) only the first btShortEntries entries of the smallest
// patient, and of the Organizations, Locations and Practitioners those the
// patient refers to.
func TestSyntheaBundlesLoad(t *testing.T) {
	e := newEnv(t)
	patients := append([]string{synPatientFile}, synOtherPatientFiles...)
	if testing.Short() {
		patients = patients[:1]
	}
	refers := map[string]bool{}
	for _, name := range patients {
		raw, err := os.ReadFile(filepath.Join(synDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range btConditionalReferences.FindAllSubmatch(raw, -1) {
			refers[string(m[1])] = true
		}
	}
	// resolved maps the fullUrls and the conditional references (Type?criteria) to Type/id.
	resolved := map[string]string{}
	load := func(t *testing.T, name string, in *btSynthea, want int) *btReply {
		t.Helper()
		start := time.Now()
		b := btDecode(t, e.btSend(in.body(), nil), in.Type+"-response", len(in.Entry))
		t.Logf("%s: %d entries in %v", name, len(in.Entry), time.Since(start).Round(time.Millisecond))
		for i, en := range b.Entry {
			if got := en.status(t); got != want {
				t.Fatalf("%s entry %d: status %q, want %d: %s", name, i, en.Response.Status, want, en.Response.Outcome)
			}
			ref := en.ref(t)
			if typ := in.Entry[i].Request.URL; !strings.HasPrefix(ref, typ+"/") {
				t.Fatalf("%s entry %d: POST %s stored as %s", name, i, typ, ref)
			}
			if c := in.Entry[i].criteria(); c != "" {
				resolved[c] = ref
			}
			resolved[in.Entry[i].FullURL] = ref
		}
		return b
	}
	batchFiles := []string{"hospitalInformation.json", "practitionerInformation.json"}
	batches := map[string]*btSynthea{}
	for _, name := range batchFiles {
		batches[name] = btReadSynthea(t, name)
	}
	if testing.Short() {
		btKeepReferred(batches, refers)
	}
	for _, name := range batchFiles {
		t.Run(name+" is a batch of conditional creates", func(t *testing.T) { load(t, name, batches[name], 201) })
	}
	t.Run("every conditional reference of the patients names a stored resource", func(t *testing.T) {
		for c := range refers {
			if resolved[c] == "" {
				t.Errorf("nothing stored for %s", c)
			}
		}
	})
	t.Run("posting the conditional creates again creates nothing", func(t *testing.T) {
		before := btTotal(t, e, "/_history")
		in := batches["hospitalInformation.json"]
		b := load(t, "hospitalInformation.json", in, 200)
		for i, en := range b.Entry {
			if want := resolved[in.Entry[i].criteria()]; en.ref(t) != want {
				t.Fatalf("entry %d matched %s, want %s", i, en.ref(t), want)
			}
		}
		if n := btTotal(t, e, "/_history"); n != before {
			t.Fatalf("history grew from %d to %d", before, n)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	for n, name := range patients {
		t.Run(name, func(t *testing.T) {
			in := btReadSynthea(t, name)
			if in.Type != "transaction" {
				t.Fatalf("type %q, want transaction", in.Type)
			}
			if testing.Short() {
				in.keepFirst(btShortEntries)
			}
			b := load(t, name, in, 201)
			var patient string
			counts := map[string]int{}
			for i, en := range in.Entry {
				typ := en.Request.URL
				counts[typ]++
				if typ == "Patient" {
					patient = b.Entry[i].ref(t)
				}
			}

			// Every resource of the first patient is read back; of the others
			// (for time) the Patient, the Encounters and every tenth entry.
			sample := func(i int) bool {
				typ := in.Entry[i].Request.URL
				return n == 0 || typ == "Patient" || typ == "Encounter" || i%10 == 0
			}
			t.Run("every stored resource is the posted one with its references resolved", func(t *testing.T) {
				kinds := map[string]int{}
				targets, read := map[string]bool{}, map[string]bool{}
				for i, en := range in.Entry {
					if !sample(i) {
						continue
					}
					ref := b.Entry[i].ref(t)
					read[ref] = true
					posted, stored := synDecode(t, en.Resource), synDecode(t, e.get("/"+ref).Body)
					for _, k := range []string{"id", "meta"} {
						delete(posted, k)
						delete(stored, k)
					}
					btCompareSynthea(t, ref, posted, stored, "", func(posted, stored string) {
						want := posted
						switch {
						case strings.HasPrefix(posted, "urn:uuid:"):
							kinds["urn:uuid"]++
							want = resolved[posted]
						case strings.Contains(posted, "?"):
							kinds[posted[:strings.Index(posted, "?")]]++
							want = resolved[posted]
						}
						if want == "" {
							t.Fatalf("%s: reference %s names nothing the bundles stored", ref, posted)
						}
						if stored != want {
							t.Fatalf("%s: reference %s stored as %s, want %s", ref, posted, stored, want)
						}
						if !strings.HasPrefix(stored, "#") {
							targets[stored] = true
						}
					})
				}
				t.Logf("references resolved: %v", kinds)
				for _, k := range []string{"urn:uuid", "Practitioner", "Organization", "Location"} {
					if kinds[k] == 0 {
						t.Errorf("no %s reference was resolved", k)
					}
				}
				for ref := range targets {
					if read[ref] {
						continue
					}
					if r := e.get("/" + ref); r.Status != http.StatusOK {
						t.Fatalf("reference target %s: %d", ref, r.Status)
					}
				}
			})

			t.Run("the patient's compartment holds the bundle's resources", func(t *testing.T) {
				for _, typ := range []string{"Encounter", "Observation", "Condition", "Procedure"} {
					if n := btTotal(t, e, "/"+typ+"?patient="+patient+"&_count=1"); n != counts[typ] {
						t.Errorf("%s?patient=%s: %d, want %d", typ, patient, n, counts[typ])
					}
				}
			})
		})
	}
}

// btCompareSynthea walks a posted and a stored resource together: they
// must be equal except for reference values, which it hands to ref; no
// stored reference, url or narrative keeps a urn:uuid.
func btCompareSynthea(t *testing.T, at string, posted, stored any, key string, ref func(posted, stored string)) {
	t.Helper()
	switch p := posted.(type) {
	case map[string]any:
		s, ok := stored.(map[string]any)
		if !ok || len(s) != len(p) {
			t.Fatalf("%s.%s: stored %v, posted %v", at, key, stored, posted)
		}
		for k, v := range p {
			btCompareSynthea(t, at+"."+k, v, s[k], k, ref)
		}
	case []any:
		s, ok := stored.([]any)
		if !ok || len(s) != len(p) {
			t.Fatalf("%s: stored %v, posted %v", at, stored, posted)
		}
		for i := range p {
			btCompareSynthea(t, fmt.Sprintf("%s[%d]", at, i), p[i], s[i], key, ref)
		}
	case string:
		s, ok := stored.(string)
		if !ok {
			t.Fatalf("%s: stored %v, posted %q", at, stored, p)
		}
		switch {
		case key == "reference":
			ref(p, s)
		case (key == "url" || key == "div") && strings.Contains(s, "urn:uuid:"):
			t.Fatalf("%s: stored %q still names a urn:uuid", at, s)
		case s != p:
			t.Fatalf("%s: stored %q, posted %q", at, s, p)
		}
	default:
		if fmt.Sprint(stored) != fmt.Sprint(posted) {
			t.Fatalf("%s: stored %v, posted %v", at, stored, posted)
		}
	}
}
