package main

// Data dirs of fhirstore before its indexed engine (FerretDB's files in
// <data-dir>/db): they are still served as before, and `fhirstore migrate`
// moves them into the indexed engine with everything a client sees intact.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/engine/mongodb"
	"fhirstore/store/ferretdb"
	"fhirstore/store/schemacheck"
)

// legacyDataDir makes a data dir as fhirstore made it before its indexed
// engine: FerretDB's files in <dir>/db, written by fill (when not nil)
// through a store opened as that version's server opened it.
func legacyDataDir(t *testing.T, fill func(ctx context.Context, st *store.Store)) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	srv, err := ferretdb.Start(ctx, filepath.Join(dir, legacyDir), nil)
	if err != nil {
		t.Fatalf("start FerretDB: %v", err)
	}
	defer stopFerret(srv)
	if fill == nil {
		return dir
	}
	validator, err := fhirschema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	registry, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	opts := storeOptions{validate: schemacheck.Validator(validator), registry: registry, eagerIndexTypes: specTypes}.store(zap.NewNop())
	opts.Exclusive = true
	eng, err := mongodb.Open(srv.URI(), mongodb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, eng, opts)
	if err != nil {
		t.Fatalf("open a store on FerretDB: %v", err)
	}
	defer func() { _ = st.Close(ctx) }()
	fill(ctx, st)
	return dir
}

// legacyData is what fillLegacy wrote.
type legacyData struct {
	// versions lists every resource ("Type/id") with its number of versions.
	versions map[string]int
	// deleted are the resources whose last version is a deletion.
	deleted map[string]bool
	// latest is the JSON the store returned for each resource's last write.
	latest map[string][]byte
	// txnPatient and txnObservation were created by one transaction, the
	// Observation referring to the Patient by its fullUrl.
	txnPatient, txnObservation string
	// p2 was created with a server-assigned id.
	p2 string
	// clientID and secret are an OAuth client of tenant acme.
	clientID, secret string
}

// fillLegacy writes tenant acme: resources with several versions (updates
// and a delete), a transaction, and an OAuth client.
func fillLegacy(t *testing.T, d *legacyData) func(ctx context.Context, st *store.Store) {
	return func(ctx context.Context, st *store.Store) {
		t.Helper()
		*d = legacyData{versions: map[string]int{}, deleted: map[string]bool{}, latest: map[string][]byte{}}
		if err := st.CreateTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		wrote := func(res *store.Resource, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			ref := res.Type + "/" + res.ID
			d.versions[ref]++
			d.deleted[ref] = res.Deleted
			d.latest[ref] = res.JSON
		}
		put := func(typ, id, body string) {
			t.Helper()
			res, _, err := st.Update(ctx, "acme", typ, id, []byte(body), store.WriteOptions{})
			wrote(res, err)
		}
		put("Patient", "p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"Legacy-One","given":["Ann"]}]}`)
		put("Patient", "p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"Legacy-One","given":["Anna"]}]}`)
		put("Patient", "p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"Legacy-One","given":["Anna"]}],"birthDate":"1970-01-01"}`)

		created, err := st.Create(ctx, "acme", "Patient", []byte(`{"resourceType":"Patient","name":[{"family":"Legacy-Two"}]}`), store.WriteOptions{})
		wrote(created, err)
		d.p2 = created.ID
		put("Patient", d.p2, `{"resourceType":"Patient","id":"`+d.p2+`","name":[{"family":"Legacy-Two"}],"active":true}`)

		obs := func(id, status string) string {
			return `{"resourceType":"Observation","id":"` + id + `","status":"` + status + `","code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},` +
				`"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":72,"unit":"/min"}}`
		}
		put("Observation", "o1", obs("o1", "preliminary"))
		put("Observation", "o1", obs("o1", "final"))
		put("Observation", "o2", obs("o2", "final"))
		deleted, err := st.Delete(ctx, "acme", "Observation", "o2", store.WriteOptions{})
		wrote(deleted, err)

		const patientURL = "urn:uuid:3f1e7c52-9a0b-4c1d-8e2f-000000000001"
		results, err := st.Transaction(ctx, "acme", []store.Op{
			{Method: "POST", Type: "Patient", FullURL: patientURL, Body: []byte(`{"resourceType":"Patient","name":[{"family":"Legacy-Txn"}]}`)},
			{Method: "POST", Type: "Observation", Body: []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"subject":{"reference":"` + patientURL + `"}}`)},
			{Method: "PUT", Type: "Patient", ID: "p1", Body: []byte(`{"resourceType":"Patient","id":"p1","name":[{"family":"Legacy-One","given":["Anna","Maria"]}],"birthDate":"1970-01-01"}`)},
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		for _, r := range results {
			wrote(r.Resource, nil)
		}
		d.txnPatient, d.txnObservation = results[0].Resource.ID, results[1].Resource.ID

		d.secret = auth.NewClientSecret()
		hash, err := auth.HashSecret(d.secret)
		if err != nil {
			t.Fatal(err)
		}
		d.clientID = "legacy-client"
		if err := st.CreateClient(ctx, store.Client{ID: d.clientID, Tenant: "acme", Name: "reporting", Scopes: []string{"system/*.read"}, SecretHash: hash}); err != nil {
			t.Fatal(err)
		}
	}
}

// view is what a client of tenant acme sees of the paths: status, the
// version headers and the body, with the server's own address taken out.
func view(t *testing.T, s *testServer, tok string, paths []string) map[string]string {
	t.Helper()
	host := "acme.localhost:" + s.port
	out := map[string]string{}
	for _, p := range paths {
		r := call(t, http.MethodGet, s.url("/fhir/r4/"+p), host, tok, "")
		body := strings.ReplaceAll(string(r.body), host, "acme.localhost:PORT")
		var m map[string]any
		if json.Unmarshal([]byte(body), &m) == nil && m["resourceType"] == "Bundle" {
			delete(m, "id") // each Bundle is made for its request
			delete(m, "meta")
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			body = string(b)
		}
		out[p] = fmt.Sprintf("%d ETag=%s Last-Modified=%s\n%s", r.status, r.header.Get("ETag"), r.header.Get("Last-Modified"), body)
	}
	return out
}

// bundleOf parses the body of a view entry that must be a 200 Bundle.
func bundleOf(t *testing.T, v map[string]string, path string) []map[string]any {
	t.Helper()
	head, body, _ := strings.Cut(v[path], "\n")
	if !strings.HasPrefix(head, "200 ") {
		t.Fatalf("GET %s: %s", path, v[path])
	}
	var b struct {
		Entry []map[string]any `json:"entry"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return b.Entry
}

// matchIDs lists the Type/id of a search Bundle's matches, in order.
func matchIDs(t *testing.T, v map[string]string, path string) []string {
	t.Helper()
	var ids []string
	for _, e := range bundleOf(t, v, path) {
		if mode, _ := e["search"].(map[string]any)["mode"].(string); mode != "" && mode != "match" {
			continue
		}
		res, _ := e["resource"].(map[string]any)
		ids = append(ids, fmt.Sprint(res["resourceType"], "/", res["id"]))
	}
	return ids
}

// historyVersions lists the versionIds of a history Bundle's entries, in order.
func historyVersions(t *testing.T, v map[string]string, path string) []string {
	t.Helper()
	var vids []string
	for _, e := range bundleOf(t, v, path) {
		if res, ok := e["resource"].(map[string]any); ok {
			vids = append(vids, fmt.Sprint(res["meta"].(map[string]any)["versionId"]))
			continue
		}
		// A deletion has no resource: its version is in the response's etag.
		etag, _ := e["response"].(map[string]any)["etag"].(string)
		vids = append(vids, strings.TrimSuffix(strings.TrimPrefix(etag, `W/"`), `"`)+" deleted")
	}
	return vids
}

var migratedLine = regexp.MustCompile(`^migrated (\d+) documents from (\S+) to (\S+); `)

// TestMigrateMovesALegacyDataDirIntoTheIndexedEngine: a data dir of
// fhirstore before its indexed engine is served as before until `fhirstore
// migrate` moves it; afterwards the indexed engine serves every version of
// every resource, the searches and the OAuth clients as they were.
func TestMigrateMovesALegacyDataDirIntoTheIndexedEngine(t *testing.T) {
	var d legacyData
	dir := legacyDataDir(t, fillLegacy(t, &d))
	tok := tokenFor(t, dir, "acme")

	var paths []string
	for ref, n := range d.versions {
		paths = append(paths, ref, ref+"/_history")
		for v := 1; v <= n; v++ {
			paths = append(paths, ref+"/_history/"+strconv.Itoa(v))
		}
	}
	searches := map[string][]string{
		"Patient?family=Legacy-One":                                             {"Patient/p1"},
		"Patient?family=Legacy&_sort=family,_id":                                {"Patient/p1", "Patient/" + d.p2, "Patient/" + d.txnPatient},
		"Patient?birthdate=1970-01-01":                                          {"Patient/p1"},
		"Patient?given=Maria":                                                   {"Patient/p1"},
		"Patient?active=true":                                                   {"Patient/" + d.p2},
		"Patient?_id=p1," + d.p2:                                                {"Patient/p1", "Patient/" + d.p2},
		"Observation?subject=Patient/p1":                                        {"Observation/o1"},
		"Observation?code=http://loinc.org|8867-4":                              {"Observation/o1"},
		"Observation?status=final&_sort=_id":                                    sortedRefs("Observation/o1", "Observation/"+d.txnObservation),
		"Observation?subject=Patient/" + d.txnPatient:                           {"Observation/" + d.txnObservation},
		"Observation?_id=" + d.txnObservation + "&_include=Observation:subject": {"Observation/" + d.txnObservation},
	}
	for q := range searches {
		paths = append(paths, q)
	}
	paths = append(paths, "Patient/_history?_count=100", "Observation/_history?_count=100", "_history?_count=100")
	slices.Sort(paths)

	// Before: served through FerretDB, as that version served it.
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--audit=false")
	if !strings.Contains(s.stderr.String(), `"engine":"ferretdb"`) {
		t.Fatalf("a legacy data dir is not served through FerretDB:\n%s", s.stderr)
	}
	wantFail(t, "stop it before migrating", "migrate", "--data-dir", dir)
	before := view(t, s, tok, paths)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	// Nor while any other fhirstore process holds the data dir (a command
	// running FerretDB on the files, a server not yet announced).
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantFail(t, "stop it before migrating", "migrate", "--data-dir", dir)
	lock.unlock()
	wantAbsent(t, dir, sqliteDir, sqliteDir+".migrating")

	out, errOut, err := runCmd(t, "migrate", "--data-dir", dir)
	if err != nil {
		t.Fatalf("migrate: %v\nstderr:\n%s", err, errOut)
	}
	m := migratedLine.FindStringSubmatch(out)
	if m == nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("migrate printed %q, want one line: migrated N documents from DIR/db to DIR/sqlite; ...", out)
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 || m[2] != filepath.Join(dir, legacyDir) || m[3] != filepath.Join(dir, sqliteDir) {
		t.Fatalf("migrate printed %q", out)
	}
	wantPresent(t, dir, sqliteDir, legacyDir) // the old files stay until the user removes them
	wantAbsent(t, dir, sqliteDir+".migrating", embeddedURIFile)
	if dataDirLocked(t, dir) {
		t.Fatal("migrate left the data dir locked")
	}

	// After: the indexed engine serves the same.
	s = startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--audit=false")
	if log := s.stderr.String(); !strings.Contains(log, `"engine":"sqlite"`) || strings.Contains(log, "fhirstore migrate") {
		t.Fatalf("a migrated data dir is not served by the indexed engine without warning:\n%s", log)
	}
	after := view(t, s, tok, paths)
	for _, p := range paths {
		if before[p] != after[p] {
			t.Errorf("GET %s differs after the migration\nbefore: %s\nafter:  %s", p, before[p], after[p])
		}
	}

	// And what was served is what was written.
	for ref, n := range d.versions {
		want := make([]string, 0, n)
		for v := n; v >= 1; v-- {
			want = append(want, strconv.Itoa(v))
		}
		if d.deleted[ref] {
			want[0] += " deleted"
		}
		if got := historyVersions(t, after, ref+"/_history"); !slices.Equal(got, want) {
			t.Errorf("%s/_history: versions %q, want %q", ref, got, want)
		}
		head, body, _ := strings.Cut(after[ref], "\n")
		if d.deleted[ref] {
			if !strings.HasPrefix(head, "410 ") {
				t.Errorf("GET %s of a deleted resource: %s, want 410", ref, head)
			}
			continue
		}
		if !strings.HasPrefix(head, "200 ETag=W/\""+strconv.Itoa(n)+"\"") {
			t.Errorf("GET %s: %s, want 200 and version %d", ref, head, n)
		}
		var got, written any
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("GET %s: %v", ref, err)
		}
		if err := json.Unmarshal(d.latest[ref], &written); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, written) {
			t.Errorf("GET %s: %s\nwant what the store wrote: %s", ref, body, d.latest[ref])
		}
	}
	for q, want := range searches {
		if got := matchIDs(t, after, q); !slices.Equal(sortedRefs(got...), sortedRefs(want...)) {
			t.Errorf("GET %s: matches %q, want %q", q, got, want)
		}
	}
	if got := matchIDs(t, after, "Patient?family=Legacy&_sort=family,_id"); !slices.Equal(got, searches["Patient?family=Legacy&_sort=family,_id"]) {
		t.Errorf("sorted search: %q", got)
	}
	if got := len(bundleOf(t, after, "_history?_count=100")); got != sum(d.versions) {
		t.Errorf("tenant history: %d entries, want every version written: %d", got, sum(d.versions))
	}

	// The OAuth client moved too, its secret with it.
	if list := mustRun(t, "client", "list", "--tenant", "acme", "--data-dir", dir); !strings.Contains(list, d.clientID+"\tacme\treporting\tsystem/*.read\tsecret") {
		t.Fatalf("client list after the migration: %q", list)
	}
	if status, _ := requestToken(t, s, "acme", d.clientID, d.secret, "system/*.read"); status != http.StatusOK {
		t.Fatalf("token of the migrated client: %d", status)
	}
	if got := tenantList(t, dir); strings.Join(got, ",") != "acme,demo" {
		t.Fatalf("tenants after the migration: %q, want acme, demo", got)
	}

	// The data dir is the new engine's now: nothing left to migrate.
	wantFail(t, "no database of the previous embedded engine", "migrate", "--data-dir", dir)
}

func sortedRefs(refs ...string) []string { return slices.Sorted(slices.Values(refs)) }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestMigrateRefusesADataDirWithNothingToMigrate: migrate names the
// problem, and changes nothing, where there are no legacy files.
func TestMigrateRefusesADataDirWithNothingToMigrate(t *testing.T) {
	empty := t.TempDir()
	indexed := t.TempDir()
	mustRun(t, "tenant", "create", "acme", "--data-dir", indexed)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, dir := range []string{empty, indexed, missing} {
		wantFail(t, "holds no database of the previous embedded engine to migrate", "migrate", "--data-dir", dir)
	}
	wantAbsent(t, empty, sqliteDir, "server.lock")
	wantAbsent(t, filepath.Dir(missing), "missing")
	if got := tenantList(t, indexed); strings.Join(got, ",") != "acme" {
		t.Fatalf("tenants after a refused migrate: %q, want acme", got)
	}
	wantFail(t, "takes no arguments", "migrate", "--data-dir", empty, "extra")
}

// TestServeOnALegacyDataDirKeepsServingItThroughFerretDB: before it is
// migrated, a legacy data dir is served as that version served it, with a
// warning that names the fix: FerretDB announced in embedded-db.uri, tenant
// and client commands reaching it there, a second server refused.
func TestServeOnALegacyDataDirKeepsServingItThroughFerretDB(t *testing.T) {
	var d legacyData
	dir := legacyDataDir(t, fillLegacy(t, &d))
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	log := s.stderr.String()
	if !regexp.MustCompile(`"level":"warn".*previous embedded engine.*fhirstore migrate`).MatchString(log) {
		t.Fatalf("no warning naming fhirstore migrate:\n%s", log)
	}
	if !strings.Contains(log, `"engine":"ferretdb"`) {
		t.Fatalf("listening line does not name FerretDB:\n%s", log)
	}
	tok := tokenFor(t, dir, "acme")
	if got := readFamily(t, s, "acme.localhost:"+s.port, tok, "p1"); got != "Legacy-One" {
		t.Fatalf("Patient/p1 on the legacy data dir: family %q", got)
	}
	wantPresent(t, dir, embeddedURIFile)
	wantAbsent(t, dir, sqliteDir) // serving does not migrate
	if !dataDirLocked(t, dir) {   // which keeps migrate off the files it writes
		t.Fatal("a legacy server does not hold its data dir's lock")
	}

	wantFail(t, "is in use by a running fhirstore", "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	wantFail(t, "without --direct", "load", "--direct", "--data-dir", dir, writeTemp(t, "p.ndjson", ndjsonPatients("d1")))
	wantFail(t, "stop it before migrating", "migrate", "--data-dir", dir)

	// One-shot commands go through the server's database.
	mustRun(t, "tenant", "create", "clinic", "--data-dir", dir)
	createPatient(t, s, "clinic.localhost:"+s.port, tokenFor(t, dir, "clinic"), "Legacy-Clinic")
	if list := mustRun(t, "client", "list", "--tenant", "acme", "--data-dir", dir); !strings.Contains(list, d.clientID+"\tacme") {
		t.Fatalf("client list on a legacy data dir: %q", list)
	}
	id, secret := createClient(t, "--tenant", "clinic", "--scope", "system/*.read", "--data-dir", dir)
	if status, _ := requestToken(t, s, "clinic", id, secret, "system/*.read"); status != http.StatusOK {
		t.Fatalf("token of a client created next to a legacy server: %d", status)
	}

	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	wantAbsent(t, dir, embeddedURIFile, sqliteDir)
	if dataDirLocked(t, dir) {
		t.Fatal("a stopped legacy server left its data dir locked")
	}
	// Without a server, one-shot commands run FerretDB themselves.
	if got := tenantList(t, dir); strings.Join(got, ",") != "acme,clinic,demo" {
		t.Fatalf("tenants of the stopped legacy data dir: %q", got)
	}
	wantAbsent(t, dir, sqliteDir)
}

// writeTemp writes text into a file of a fresh temporary directory.
func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
