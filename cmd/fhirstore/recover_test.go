package main

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/engine/sqlite"
)

// openDataDirStore opens the embedded database of dir as the server does,
// with fault as Options.Fault, and closes it when the test ends.
func openDataDirStore(t *testing.T, dir string, fault func(string) error) *store.Store {
	t.Helper()
	ctx := context.Background()
	registry, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := sqlite.Open(ctx, filepath.Join(dir, sqliteDir), sqlite.Options{WordPaths: search.WordListFields(), SharedField: store.SharedField})
	if err != nil {
		t.Fatal(err)
	}
	opts := storeOptions{registry: registry, recoveryAttempts: 1}.store(zap.NewNop())
	opts.Fault = fault
	st, err := store.Open(ctx, eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

// quarantinedDataDir makes a data dir whose tenant demo holds a committed
// transaction the database refused to apply, quarantined: it updated
// Patient/held (family Before → After) and created an Observation.
func quarantinedDataDir(t *testing.T) (dir, observation string) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	st := openDataDirStore(t, dir, func(point string) error {
		if point == store.FaultPutCurrent || point == store.FaultRollForward {
			return errors.New("index row size 3016 exceeds btree version 4 maximum 2704")
		}
		return nil
	})
	if err := st.EnsureTenant(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Update(ctx, "demo", "Patient", "held", []byte(`{"resourceType":"Patient","id":"held","name":[{"family":"Before"}]}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := st.Transaction(ctx, "demo", []store.Op{
		{Method: "PUT", Type: "Patient", ID: "held", Body: []byte(`{"resourceType":"Patient","id":"held","name":[{"family":"After"}]}`)},
		{Method: "POST", Type: "Observation", Body: []byte(`{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/held"}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, q := st.HeldTransactions(); q != 1 {
		t.Fatalf("%d transactions quarantined, want 1", q)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir, res[1].Resource.ID
}

var txnIDPattern = regexp.MustCompile(`(?m)^([0-9a-f-]{36})  tenant demo  quarantined`)

// TestRecoverCommand: a server starts on a data dir with a quarantined
// transaction and answers 500 for its resources; recover --list shows it
// beside the running server; --retry and --abandon wait for the server to
// stop, then apply or undo it.
func TestRecoverCommand(t *testing.T) {
	for _, action := range []string{"--retry", "--abandon"} {
		t.Run(action, func(t *testing.T) {
			dir, obs := quarantinedDataDir(t)
			s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
			tok, host := tokenFor(t, dir, "demo"), "demo.localhost:"+s.port
			if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/held"), host, tok, ""); r.status != http.StatusInternalServerError ||
				!strings.Contains(string(r.body), "OperationOutcome") || !strings.Contains(string(r.body), "fhirstore recover") {
				t.Fatalf("read of a quarantined resource: %d %s", r.status, r.body)
			}
			if r := call(t, http.MethodGet, s.url("/healthz"), "", "", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"quarantined":1`) {
				t.Fatalf("healthz: %d %s", r.status, r.body)
			}
			list := mustRun(t, "recover", "--list", "--data-dir", dir)
			m := txnIDPattern.FindStringSubmatch(list)
			if m == nil || !strings.Contains(list, "Patient/held") || !strings.Contains(list, "Observation/"+obs) || !strings.Contains(list, "2704") {
				t.Fatalf("recover --list:\n%s", list)
			}
			txn := m[1]
			wantFail(t, "stop it before --retry or --abandon", "recover", action, txn, "--data-dir", dir)
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			wantFail(t, "not found", "recover", action, "no-such-transaction", "--data-dir", dir)
			out := mustRun(t, "recover", action, txn, "--data-dir", dir)
			if !strings.Contains(out, txn) || !strings.Contains(out, "Patient/held") {
				t.Fatalf("recover %s: %q", action, out)
			}
			if out := mustRun(t, "recover", "--data-dir", dir); !strings.Contains(out, "no unfinished transactions") {
				t.Fatalf("recover (list) after %s: %q", action, out)
			}
			st := openDataDirStore(t, dir, nil)
			p, err := st.Read(context.Background(), "demo", "Patient", "held")
			if err != nil {
				t.Fatal(err)
			}
			_, obsErr := st.Read(context.Background(), "demo", "Observation", obs)
			want := map[string]string{"--retry": "After", "--abandon": "Before"}[action]
			if !strings.Contains(string(p.JSON), want) || (obsErr == nil) != (action == "--retry") {
				t.Fatalf("after %s: Patient %s, Observation: %v", action, p.JSON, obsErr)
			}
		})
	}
	t.Run("usage", func(t *testing.T) {
		dir := t.TempDir()
		wantFail(t, "one of --list, --retry or --abandon", "recover", "--retry", "a", "--abandon", "b", "--data-dir", dir)
		wantFail(t, "takes no arguments", "recover", "extra", "--data-dir", dir)
		if out := mustRun(t, "recover", "--data-dir", dir); !strings.Contains(out, "no unfinished transactions") {
			t.Fatalf("recover on an empty data dir: %q", out)
		}
	})
}
