package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"fhirstore/store"
	"fhirstore/store/engine"
)

// provenance is a Provenance with n targets.
func provenance(n int) []byte {
	targets := make([]string, n)
	for i := range targets {
		targets[i] = fmt.Sprintf(`{"reference":"Patient/p%05d"}`, i)
	}
	return []byte(`{"resourceType":"Provenance","target":[` + strings.Join(targets, ",") + `],"recorded":"2024-01-01T00:00:00Z","agent":[{"who":{"reference":"Practitioner/x"}}]}`)
}

// patientWithGivens is a Patient whose name has n given names of size bytes.
func patientWithGivens(n, size int) []byte {
	givens := make([]string, n)
	for i := range givens {
		givens[i] = fmt.Sprintf("%q", fmt.Sprintf("g%07d", i)+strings.Repeat("x", size-8))
	}
	return []byte(`{"resourceType":"Patient","name":[{"family":"Big","given":[` + strings.Join(givens, ",") + `]}]}`)
}

func TestWritesOverEngineLimitsFailWhole(t *testing.T) {
	ctx := context.Background()
	wholeArrays := &engine.Limits{MaxDocumentBytes: 16 * engine.MiB, MaxIndexKeyBytes: 1000, WholeArrayKeys: true, Source: "FerretDB 1.x (on PostgreSQL)"}
	docOnly := &engine.Limits{MaxDocumentBytes: 16 * engine.MiB, Source: "the embedded engine"}
	perValue := &engine.Limits{MaxDocumentBytes: 16 * engine.MiB, MaxIndexKeyBytes: 1000, Source: "MongoDB"}
	tests := []struct {
		name    string
		limits  *engine.Limits // nil: the engine's own
		typ     string
		body    []byte
		refused string // "" when the write must succeed
	}{
		// 6 MiB of given names are indexed twice (name, given and their
		// exact forms): the row with its index passes 16 MiB.
		{"document with its index over 16 MiB", nil, "Patient", patientWithGivens(6000, 1024), "stores documents of at most 16 MiB"},
		{"document with its index under 16 MiB", docOnly, "Patient", patientWithGivens(1000, 1024), ""},
		{"whole array of targets over the key limit", wholeArrays, "Provenance", provenance(100), "FerretDB 1.x (on PostgreSQL) takes an index key (all the values of one indexed path together) of at most 1000 bytes"},
		{"whole array of targets under the key limit", wholeArrays, "Provenance", provenance(5), ""},
		{"many targets, each one key", perValue, "Provenance", provenance(100), ""},
		{"one value over the per-value key limit", perValue, "Patient", patientWithGivens(1, 1200), "MongoDB takes an index key of at most 1000 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := db.Options()
			opts.Validate = nil // the sizes, not the validator, are under test
			opts.Limits = tc.limits
			st := db.Open(t, opts)
			tenant := db.Tenant(t, st)
			if _, _, err := st.Update(ctx, tenant, "Patient", "seed", []byte(`{"resourceType":"Patient","id":"seed"}`), store.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, write := range writesOf(st, tenant, tc.typ, tc.body) {
				err := write.do(ctx)
				if tc.refused == "" {
					if err != nil {
						t.Fatalf("%s: %v", write.name, err)
					}
					continue
				}
				var inv *store.InvalidError
				if !errors.As(err, &inv) || inv.Syntax || inv.Issues[0].Code != "too-long" || !strings.Contains(inv.Error(), tc.refused) || !strings.Contains(inv.Error(), tc.typ+"/") {
					t.Fatalf("%s: want a too-long refusal naming %s and %q, got %v", write.name, tc.typ, tc.refused, err)
				}
			}
			if tc.refused == "" {
				return
			}
			page, err := st.History(ctx, tenant, store.HistoryQuery{Count: 10})
			if err != nil {
				t.Fatal(err)
			}
			if page.Total != 1 {
				t.Fatalf("history holds %d versions after refused writes, want only the seed's", page.Total)
			}
			if seed, err := st.Read(ctx, tenant, "Patient", "seed"); err != nil || seed.VersionID != 1 {
				t.Fatalf("seed after refused writes: %v, %+v", err, seed)
			}
		})
	}
}

// write is one way of storing a resource.
type write struct {
	name string
	do   func(context.Context) error
}

// writesOf stores body by create, by update (of the Patient "seed" when
// typ is Patient), in a transaction after a small Patient, and in a batch.
func writesOf(st *store.Store, tenant, typ string, body []byte) []write {
	small := []byte(`{"resourceType":"Patient","name":[{"family":"Small"}]}`)
	withID := []byte(strings.Replace(string(body), `{"resourceType":"`+typ+`"`, `{"resourceType":"`+typ+`","id":"seed"`, 1))
	return []write{
		{"create", func(ctx context.Context) error {
			_, err := st.Create(ctx, tenant, typ, body, store.WriteOptions{})
			return err
		}},
		{"update", func(ctx context.Context) error {
			_, _, err := st.Update(ctx, tenant, typ, "seed", withID, store.WriteOptions{})
			return err
		}},
		{"transaction", func(ctx context.Context) error {
			_, err := st.Transaction(ctx, tenant, []store.Op{{Method: "POST", Type: "Patient", Body: small}, {Method: "POST", Type: typ, Body: body}})
			var oe *store.OpError
			if err != nil && (!errors.As(err, &oe) || oe.Index != 1) {
				return fmt.Errorf("want the failure of entry 1: %w", err)
			}
			return err
		}},
		{"batch", func(ctx context.Context) error {
			_, errs := st.Batch(ctx, tenant, []store.Op{{Method: "POST", Type: typ, Body: body}})
			return errs[0]
		}},
	}
}
