package console

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// changesShown is how many latest changes the home page lists.
const changesShown = 15

// change is one version in the latest changes.
type change struct {
	Type        string    `json:"type"`
	ID          string    `json:"id"`
	Version     int       `json:"version"`
	Method      string    `json:"method"`
	Deleted     bool      `json:"deleted,omitempty"`
	LastUpdated time.Time `json:"lastUpdated"`
}

// noisyTypes are left out of the latest changes: with the audit trail on,
// every request (the console's own included) writes an AuditEvent, which
// would push every other change off the list.
var noisyTypes = map[string]bool{"AuditEvent": true}

// serveChanges lists the latest versions across the types the caller may
// read in full, newest first: the type histories of the types that hold
// resources, merged.
func (c *Console) serveChanges(w http.ResponseWriter, r *http.Request, sess Session) {
	out, err := c.changes(r.Context(), sess)
	if err != nil {
		c.opts.Logger.Error("console latest changes", zap.String("tenant", sess.Tenant), zap.Error(err))
		writeAPIError(w, http.StatusServiceUnavailable, "the database did not answer the history")
		return
	}
	writeAPIJSON(w, map[string]any{"changes": out, "hidden": sortedKeys(noisyTypes)})
}

func (c *Console) changes(ctx context.Context, sess Session) ([]change, error) {
	out := []change{}
	if c.opts.Registry == nil {
		return out, nil
	}
	scopes := auth.ParseScopes(sess.Principal.Scopes)
	var candidates []string
	for _, t := range fhirschema.ResourceTypes() {
		if !noisyTypes[t] && auth.Decide(scopes, sess.Principal.Patient, t, auth.Read) == auth.Full &&
			auth.Decide(scopes, sess.Principal.Patient, t, auth.Search) == auth.Full {
			candidates = append(candidates, t)
		}
	}
	var mu sync.Mutex
	err := parallel(len(candidates), func(i int) error {
		typ := candidates[i]
		if n, err := c.countType(ctx, sess.Tenant, typ, nil); err != nil || n == 0 {
			return err
		}
		page, err := c.opts.Store.History(ctx, sess.Tenant, store.HistoryQuery{Type: typ, Count: changesShown})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, v := range page.Entries {
			out = append(out, change{Type: v.Type, ID: v.ID, Version: v.VersionID, Method: v.Method, Deleted: v.Deleted, LastUpdated: v.LastUpdated.UTC()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b change) int {
		if d := b.LastUpdated.Compare(a.LastUpdated); d != 0 {
			return d
		}
		return b.Version - a.Version
	})
	return out[:min(len(out), changesShown)], nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
