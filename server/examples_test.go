package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exampleDir holds the official R4 examples (hl7.fhir.r4.examples 4.0.1),
// relative to this package's directory.
const exampleDir = "../testdata/fhir/examples"

// exampleMinFiles guards against a fixture directory that lost files.
const exampleMinFiles = 720

// exampleGroups is the number of parallel groups (one tenant each) the
// examples are spread over.
const exampleGroups = 4

// exampleShortStride thins the examples with -short (the race detector's
// run): every eighth file, still spread over the parallel groups.
const exampleShortStride = 8

// knownInvalidExamples lists official examples that break the R4 rules
// (testdata/fhir/known-invalid.json): the server must reject them with 422.
func knownInvalidExamples(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../testdata/fhir/known-invalid.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestExamplesRoundTrip stores every official example with PUT (POST when it
// has no id) and reads it back: the stored document must equal the original
// in every value, every number's text and every key's position. Only the
// server-managed meta.versionId and meta.lastUpdated (and an id or meta the
// server added) may differ.
func TestExamplesRoundTrip(t *testing.T) {
	start := time.Now()
	entries, err := os.ReadDir(exampleDir)
	if err != nil {
		t.Fatalf("read examples: %v", err)
	}
	var files []string
	for _, de := range entries {
		if !de.IsDir() && strings.HasSuffix(de.Name(), ".json") {
			files = append(files, de.Name())
		}
	}
	sort.Strings(files)
	if len(files) < exampleMinFiles {
		t.Fatalf("%d example files in %s, want at least %d", len(files), exampleDir, exampleMinFiles)
	}
	exampleExclusions := knownInvalidExamples(t)
	for name := range exampleExclusions {
		if !slices.Contains(files, name) {
			t.Errorf("excluded example %s does not exist", name)
		}
	}
	if testing.Short() {
		var some []string
		for i := 0; i < len(files); i += exampleShortStride {
			some = append(some, files[i])
		}
		files = some
	}
	t.Cleanup(func() { t.Logf("%d examples in %s", len(files), time.Since(start).Round(time.Millisecond)) })
	for g := range exampleGroups {
		t.Run(fmt.Sprintf("group%d", g), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			for i := g; i < len(files); i += exampleGroups {
				name := files[i]
				t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
					sub := *e // same server and tenant; failures go to this subtest
					sub.t = t
					if why, ok := exampleExclusions[name]; ok {
						rejectExample(t, &sub, filepath.Join(exampleDir, name), why)
						return
					}
					roundTripExample(t, &sub, filepath.Join(exampleDir, name))
				})
			}
		})
	}
}

// rejectExample checks that an invalid example is refused with 422 and an
// issue, and that nothing of it is stored.
func rejectExample(t *testing.T, e *env, path, why string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := exDecode(t, raw).(map[string]any)
	typ, _ := orig["resourceType"].(string)
	id, _ := orig["id"].(string)
	wantOutcome(t, e.put("/"+typ+"/"+id, string(raw)), http.StatusUnprocessableEntity, typ+".")
	if r := e.get("/" + typ + "/" + id); r.Status != http.StatusNotFound {
		t.Fatalf("rejected example (%s) is readable: %d", why, r.Status)
	}
}

func roundTripExample(t *testing.T, e *env, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, ok := exDecode(t, raw).(map[string]any)
	if !ok {
		t.Fatalf("%s is not a JSON object", path)
	}
	typ, _ := orig["resourceType"].(string)
	id, hasID := orig["id"].(string)
	var w *response
	if hasID {
		w = e.put("/"+typ+"/"+id, string(raw))
	} else {
		w = e.post("/"+typ, string(raw))
	}
	if w.Status != http.StatusCreated {
		t.Fatalf("write %s/%s: status %d, want 201: %s", typ, id, w.Status, w.Body)
	}
	if !hasID {
		id, _ = w.JSON(t)["id"].(string)
	}
	r := e.get("/" + typ + "/" + id)
	if r.Status != http.StatusOK {
		t.Fatalf("read %s/%s: status %d: %s", typ, id, r.Status, r.Body)
	}
	if !bytes.Equal(w.Body, r.Body) {
		t.Errorf("the write's representation differs from the read:\nwrite: %.300s\nread:  %.300s", w.Body, r.Body)
	}
	got, ok := exDecode(t, r.Body).(map[string]any)
	if !ok {
		t.Fatalf("read %s/%s is not a JSON object: %.200s", typ, id, r.Body)
	}
	if m, _ := got["meta"].(map[string]any); m == nil || m["versionId"] != "1" || m["lastUpdated"] == nil {
		t.Errorf("read has meta %v, want versionId 1 and lastUpdated", got["meta"])
	}

	// What the server may change: meta.versionId, meta.lastUpdated, and an
	// id or meta it had to add.
	_, origMeta := orig["meta"]
	ignore := map[string]bool{"meta.versionId": true, "meta.lastUpdated": true}
	for _, doc := range []map[string]any{orig, got} {
		if m, ok := doc["meta"].(map[string]any); ok {
			delete(m, "versionId")
			delete(m, "lastUpdated")
		}
	}
	if m, ok := got["meta"].(map[string]any); ok && len(m) == 0 && !origMeta {
		delete(got, "meta")
		ignore["meta"] = true
	}
	if !hasID {
		delete(got, "id")
		ignore["id"] = true
	}
	if !reflect.DeepEqual(orig, got) {
		t.Fatalf("%s/%s differs after the round trip: %s", typ, id, exFirstDiff(orig, got, typ))
	}

	origKeys, err := exOrderedKeys(raw, ignore)
	if err != nil {
		t.Fatal(err)
	}
	gotKeys, err := exOrderedKeys(r.Body, ignore)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(origKeys) || i < len(gotKeys); i++ {
		var o, g string
		if i < len(origKeys) {
			o = origKeys[i]
		}
		if i < len(gotKeys) {
			g = gotKeys[i]
		}
		if o != g {
			t.Fatalf("%s/%s key order differs at key #%d: original %q, read %q", typ, id, i, o, g)
		}
	}
}

// exDecode parses JSON keeping numbers as their text.
func exDecode(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, data)
	}
	return v
}

// exOrderedKeys lists the path of every object key in document order, such
// as "meta", "meta.profile", "name[0].given". Paths in ignore are left out.
func exOrderedKeys(data []byte, ignore map[string]bool) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var keys []string
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil // scalar
		}
		switch d {
		case '{':
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				child := k.(string)
				if path != "" {
					child = path + "." + child
				}
				if !ignore[child] {
					keys = append(keys, child)
				}
				if err := walk(child); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(path + "[" + strconv.Itoa(i) + "]"); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("unexpected %v at %s", d, path)
		}
		_, err = dec.Token() // closing delimiter
		return err
	}
	if err := walk(""); err != nil {
		return nil, fmt.Errorf("walk keys: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the document")
	}
	return keys, nil
}

// exFirstDiff describes the first place two decoded documents differ.
func exFirstDiff(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: original %s, read %s", path, exShort(want), exShort(got))
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !wok:
				return fmt.Sprintf("%s.%s: added by the server: %s", path, k, exShort(gv))
			case !gok:
				return fmt.Sprintf("%s.%s: missing from the read (was %s)", path, k, exShort(wv))
			case !reflect.DeepEqual(wv, gv):
				return exFirstDiff(wv, gv, path+"."+k)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: original %s, read %s", path, exShort(want), exShort(got))
		}
		for i := range w {
			if !reflect.DeepEqual(w[i], g[i]) {
				return exFirstDiff(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	return fmt.Sprintf("%s: original %s, read %s", path, exShort(want), exShort(got))
}

func exShort(v any) string {
	b, _ := json.Marshal(v)
	s := fmt.Sprintf("%T %s", v, b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
