package subscription_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fhirstore/search"
	"fhirstore/server/subscription"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

// The crash test runs this test binary as a child that writes matching
// Observations until it is killed; these variables tell the child where.
const (
	crashDirEnv      = "FHIRSTORE_SUBS_CRASH_DIR"
	crashRunEnv      = "FHIRSTORE_SUBS_CRASH_RUN"
	crashEndpointEnv = "FHIRSTORE_SUBS_CRASH_ENDPOINT"
	// crashTrialsEnv sets how many times the child is killed (default 3).
	crashTrialsEnv = "FHIRSTORE_SUBS_CRASH_TRIALS"
	crashTenant    = "crash"
	crashCode      = "crash-1"
)

// crashStore opens the store and subscription engine a server would run
// on the crash test's database files.
func crashStore(t testing.TB, dir, run string, lease time.Duration) (*store.Store, *subscription.Engine, func()) {
	t.Helper()
	ctx := context.Background()
	d, err := storetest.StartAt(ctx, dir, run)
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := subscription.ParseAllowList("")
	opts := d.Options()
	opts.Validate = subscription.Validator(d.Registry(), allow, opts.Validate)
	opts.LockLease = lease
	st, err := d.OpenStore(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureTenant(ctx, crashTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecoverTenant(ctx, crashTenant, 0); err != nil { // as a server start does
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Store, cfg.Registry, cfg.Endpoints, cfg.Attempts, cfg.Poll = st, d.Registry(), allow, 1_000_000, 50*time.Millisecond
	cfg.Exclusive = true // the embedded database of one process at a time, as fhirstore serve runs it
	eng, err := subscription.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st, eng, func() { eng.Close(); _ = st.Close(ctx); d.Close() }
}

// TestSubscriptionCrashChild is the child of
// TestNotificationsSurviveSIGKILL: it subscribes (once), then writes
// Observations that match, alone and in transactions, until it is killed.
func TestSubscriptionCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child of TestNotificationsSurviveSIGKILL")
	}
	ctx := context.Background()
	st, _, _ := crashStore(t, dir, os.Getenv(crashRunEnv), 2*time.Minute)
	reg := db.Registry()
	if subs := crashSearch(t, st, reg, "Subscription", "status=requested,active"); len(subs) == 0 {
		body := subscriptionJSON("Observation?code="+crashCode, os.Getenv(crashEndpointEnv), subscription.PayloadJSON)
		if _, err := st.Create(ctx, crashTenant, "Subscription", []byte(body), store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for len(crashSearch(t, st, reg, "Subscription", "status=active")) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("ready")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // updates of four ledger resources: many versions each
		defer wg.Done()
		for i := 0; ; i++ {
			id := fmt.Sprintf("L%d", i%4)
			body := fmt.Sprintf(`{"resourceType":"Observation","id":"%s","status":"final","code":{"coding":[{"code":"%s"}]},"valueInteger":%d}`, id, crashCode, i)
			_, _, _ = st.Update(ctx, crashTenant, "Observation", id, []byte(body), store.WriteOptions{})
		}
	}()
	go func() { // transactions of two creates and a ledger update
		defer wg.Done()
		for i := 0; ; i++ {
			obs := []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"code":"` + crashCode + `"}]}}`)
			id := fmt.Sprintf("L%d", (i+2)%4)
			upd := fmt.Sprintf(`{"resourceType":"Observation","id":"%s","status":"final","code":{"coding":[{"code":"%s"}]},"valueInteger":%d}`, id, crashCode, -i)
			_, _ = st.Transaction(ctx, crashTenant, []store.Op{{Method: "POST", Type: "Observation", Body: obs}, {Method: "POST", Type: "Observation", Body: obs},
				{Method: "PUT", Type: "Observation", ID: id, Body: []byte(upd)}})
		}
	}()
	wg.Wait()
}

// crashSearch returns every current resource of typ matching query.
func crashSearch(t testing.TB, st *store.Store, reg *search.Registry, typ, query string) []*store.Resource {
	t.Helper()
	values, _ := url.ParseQuery(query + "&_count=100")
	q, err := reg.Parse(typ, values, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return storetest.SearchAll(t, st, crashTenant, q)
}

// TestNotificationsSurviveSIGKILL kills a process that writes resources a
// subscription matches at random moments, several times, then lets a last
// engine deliver what is pending: every committed version must have been
// delivered, and each resource's versions in order.
func TestNotificationsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts processes; skipped with -short")
	}
	trials := 3
	if v := os.Getenv(crashTrialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q is not a positive number", crashTrialsEnv, v)
		}
		trials = n
	}
	rcv := newReceiver(t)
	dir, run := t.TempDir(), fmt.Sprintf("subcrash%d_", time.Now().UnixNano()%1_000_000_000)
	for range trials {
		killSubscriptionChild(t, dir, run, rcv.url("/hook"), time.Duration(200+rand.IntN(1000))*time.Millisecond)
	}
	st, _, stop := crashStore(t, dir, run, time.Second)
	defer stop()
	awaitDrained(t, st, crashTenant, 2*time.Minute)
	checkCrashDeliveries(t, crashSearch(t, st, db.Registry(), "Observation", "code="+crashCode), rcv.deliveries())
}

// checkCrashDeliveries checks that every version of every resource was
// delivered, and in order: each resource's versions arrive for the first
// time in version order, and a delivery that goes back in version repeats
// one already made (the replay of what a killed sender had sent but not
// yet cleared from its queue).
func checkCrashDeliveries(t *testing.T, current []*store.Resource, got []delivery) {
	t.Helper()
	last := map[string]int{} // highest version delivered so far, per resource
	seen := map[string]bool{}
	for _, d := range got {
		var r struct {
			ID   string `json:"id"`
			Meta struct {
				VersionID string `json:"versionId"`
			} `json:"meta"`
		}
		if err := json.Unmarshal([]byte(d.Body), &r); err != nil {
			t.Fatalf("delivery body: %q", d.Body)
		}
		vid, _ := strconv.Atoi(r.Meta.VersionID)
		key := r.ID + "/" + r.Meta.VersionID
		if vid < last[r.ID] && !seen[key] {
			t.Errorf("%s: version %d delivered for the first time after version %d", r.ID, vid, last[r.ID])
		}
		last[r.ID] = max(last[r.ID], vid)
		seen[key] = true
	}
	versions, missing := 0, []string{}
	for _, res := range current {
		for v := 1; v <= res.VersionID; v++ {
			versions++
			if key := res.ID + "/" + strconv.Itoa(v); !seen[key] {
				missing = append(missing, key)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d committed versions never delivered, e.g. %s", len(missing), versions, strings.Join(missing[:min(5, len(missing))], " "))
	}
	t.Logf("%d committed versions of %d resources, %d deliveries (%d repeated after a kill)", versions, len(current), len(got), len(got)-len(seen))
}

// killSubscriptionChild starts the child, lets it write for delay once it
// is ready and kills it with SIGKILL.
func killSubscriptionChild(t *testing.T, dir, run, endpoint string, delay time.Duration) {
	t.Helper()
	storetest.KillChild(t, "TestSubscriptionCrashChild", []string{crashDirEnv + "=" + dir, crashRunEnv + "=" + run, crashEndpointEnv + "=" + endpoint}, delay)
}
