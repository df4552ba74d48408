package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"fhirstore/store"
)

// TestClientRegistry: clients belong to an existing tenant, are listed per
// tenant and can be deleted; ids are unique.
func TestClientRegistry(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	a, b := db.Tenant(t, st), db.Tenant(t, st)
	id := "c-" + rand.Text()
	if err := st.CreateClient(ctx, store.Client{ID: id, Tenant: a, Name: "billing", Scopes: []string{"system/*.read"}, SecretHash: "$argon2id$x"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateClient(ctx, store.Client{ID: "k-" + rand.Text(), Tenant: b, Scopes: []string{"system/*.*"}, JWKSURL: "https://keys.example.test/jwks"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    store.Client
		want error
	}{
		{"a second client with the same id is a conflict", store.Client{ID: id, Tenant: a, Scopes: []string{"x"}, SecretHash: "h"}, store.ErrConflict},
		{"a client of a tenant that does not exist is refused", store.Client{ID: "c-" + rand.Text(), Tenant: "no-such-tenant", Scopes: []string{"x"}, SecretHash: "h"}, store.ErrTenantNotFound},
	} {
		if err := st.CreateClient(ctx, tc.c); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := st.CreateClient(ctx, store.Client{ID: "c-" + rand.Text(), Tenant: a, Scopes: []string{"x"}}); err == nil {
		t.Error("a client without secret or keys was created")
	}
	got, err := st.Client(ctx, id)
	if err != nil || got.Tenant != a || got.Name != "billing" || got.SecretHash != "$argon2id$x" || len(got.Scopes) != 1 {
		t.Fatalf("client %+v, %v", got, err)
	}
	list, err := st.ListClients(ctx, a)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("clients of %s: %+v, %v", a, list, err)
	}
	if err := st.DeleteClient(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client(ctx, id); !errors.Is(err, store.ErrClientNotFound) {
		t.Fatalf("deleted client: %v", err)
	}
	if err := st.DeleteClient(ctx, id); !errors.Is(err, store.ErrClientNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := st.DeleteTenantClients(ctx, b); err != nil {
		t.Fatal(err)
	}
	if list, err := st.ListClients(ctx, b); err != nil || len(list) != 0 {
		t.Fatalf("clients of %s after deleting them all: %+v, %v", b, list, err)
	}
}

// TestClientAssertionIsUsedOnce: a jti is accepted once per client, also
// when two servers see it at the same moment.
func TestClientAssertionIsUsedOnce(t *testing.T) {
	ctx := context.Background()
	st1, st2 := db.Open(t, db.Options()), db.Open(t, db.Options())
	jti, exp := rand.Text(), time.Now().Add(5*time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		st := st1
		if i%2 == 1 {
			st = st2
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = st.UseAssertion(ctx, "client-a", jti, exp) }()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrReplayed):
			t.Fatalf("use assertion: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("the jti was accepted %d times, want once", ok)
	}
	if err := st1.UseAssertion(ctx, "client-b", jti, exp); err != nil {
		t.Fatalf("the same jti of another client: %v", err)
	}
}

// TestSigningKeyIsCreatedOnceForAllInstances: servers starting together on
// an empty database end up with one and the same key.
func TestSigningKeyIsCreatedOnceForAllInstances(t *testing.T) {
	ctx := context.Background()
	opts := db.Options()
	opts.DatabasePrefix += "keys" + rand.Text()[:6] + "_" // a system database of its own, without a key yet
	var wg sync.WaitGroup
	keys := make([][]byte, 6)
	errs := make([]error, len(keys))
	for i := range keys {
		st := db.Open(t, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = st.SigningKey(ctx, func() ([]byte, error) { return []byte(rand.Text()), nil })
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("instance %d has key %q, instance 0 %q", i, keys[i], keys[0])
		}
	}
	again, err := db.Open(t, opts).SigningKey(ctx, func() ([]byte, error) { return nil, errors.New("must not generate again") })
	if err != nil || !bytes.Equal(again, keys[0]) {
		t.Fatalf("after a restart: %q, %v", again, err)
	}
}

// TestDeletingATenantDeletesItsClients: a tenant created again under the
// same name starts without the clients of the old one.
func TestDeletingATenantDeletesItsClients(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	name := db.Tenant(t, st)
	id := "c-" + rand.Text()
	if err := st.CreateClient(ctx, store.Client{ID: id, Tenant: name, Scopes: []string{"system/*.read"}, SecretHash: "$argon2id$x"}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteTenant(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client(ctx, id); !errors.Is(err, store.ErrClientNotFound) {
		t.Fatalf("the old tenant's client survived: %v", err)
	}
}
