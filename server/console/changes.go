package console

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

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

// systemPage is how many versions of the system history the fast path of
// the latest changes reads.
const systemPage = 100

// serveChanges answers the home page's latest changes: from one page of
// the system history when it holds enough of them, else merged from the
// type histories.
func (c *Console) serveChanges(w http.ResponseWriter, r *http.Request, sess Session) {
	out, ok, err := c.recentChanges(r.Context(), sess)
	if err == nil && !ok {
		var types []typeInfo
		if types, err = c.typeInfos(r.Context(), sess); err == nil {
			out, err = c.latestChanges(r.Context(), sess, types)
		}
	}
	if err != nil {
		c.opts.Logger.Error("console latest changes", zap.String("tenant", sess.Tenant), zap.Error(err))
		writeAPIError(w, http.StatusServiceUnavailable, "the database did not answer the history")
		return
	}
	writeAPIJSON(w, map[string]any{"changes": out, "hidden": sortedKeys(noisyTypes)})
}

// recentChanges reads the newest page of the system history, for a caller
// who may read every type; ok is false when it holds too few changes once
// the noisy types are left out (and more history remains).
func (c *Console) recentChanges(ctx context.Context, sess Session) (out []change, ok bool, err error) {
	scopes := auth.ParseScopes(sess.Principal.Scopes)
	if auth.Decide(scopes, sess.Principal.Patient, "*", auth.Read) != auth.Full {
		return nil, false, nil
	}
	page, err := c.opts.Store.History(ctx, sess.Tenant, store.HistoryQuery{Count: systemPage})
	if err != nil {
		return nil, false, err
	}
	out = []change{}
	for _, v := range page.Entries {
		if noisyTypes[v.Type] {
			continue
		}
		out = append(out, change{Type: v.Type, ID: v.ID, Version: v.VersionID, Method: v.Method, Deleted: v.Deleted, LastUpdated: v.LastUpdated.UTC()})
		if len(out) == changesShown {
			return out, true, nil
		}
	}
	return out, !page.HasNext, nil
}

// latestChanges lists the newest versions of the types that hold
// resources (counted ones, with a count above zero) and that the caller
// may read in full, newest first: their type histories, merged.
func (c *Console) latestChanges(ctx context.Context, sess Session, types []typeInfo) ([]change, error) {
	scopes := auth.ParseScopes(sess.Principal.Scopes)
	var present []string
	for _, t := range types {
		if t.Count != nil && *t.Count > 0 && !noisyTypes[t.Type] && auth.Decide(scopes, sess.Principal.Patient, t.Type, auth.Read) == auth.Full {
			present = append(present, t.Type)
		}
	}
	out := []change{}
	var mu sync.Mutex
	err := parallel(len(present), func(i int) error {
		page, err := c.opts.Store.History(ctx, sess.Tenant, store.HistoryQuery{Type: present[i], Count: changesShown})
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
