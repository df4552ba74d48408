package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRefusesResourcesThatBreakInvariants: a direct load checks the
// core invariants like every other write: the line that breaks one is
// reported with the key and not stored, the others load.
func TestLoadRefusesResourcesThatBreakInvariants(t *testing.T) {
	dataDir := t.TempDir()
	file := filepath.Join(t.TempDir(), "mixed.ndjson")
	writeFile(t, file, ndjsonPatients("inv1")+`{"resourceType":"Patient","id":"inv2","contact":[{"gender":"male"}]}`+"\n"+ndjsonPatients("inv3"))
	out, _, err := runLoad(t, "--direct=true", "--data-dir", dataDir, "--tenant", "demo", "--batch-size", "1", file)
	if err == nil {
		t.Fatalf("a load with a broken invariant succeeded:\n%s", out)
	}
	sum := parseSummary(t, out)
	if why := sum.failures["mixed.ndjson"]; !strings.HasPrefix(why, "line 2: 422") || !strings.Contains(why, "pat-1") {
		t.Fatalf("mixed.ndjson: %q, want line 2, 422 and pat-1\n%s", why, out)
	}
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	host, tok := "127.0.0.1:"+s.port, tokenFor(t, dataDir, "demo")
	for _, id := range []string{"inv1", "inv3"} {
		if got := readFamily(t, s, host, tok, id); got != "Nd-"+id {
			t.Fatalf("Patient/%s: family %q", id, got)
		}
	}
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/inv2"), host, tok, ""); r.status != http.StatusNotFound {
		t.Fatalf("the refused Patient/inv2 is readable: %d", r.status)
	}
}
