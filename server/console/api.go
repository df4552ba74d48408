package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server/auth"
)

// typeInfo is one resource type as the home page lists it.
type typeInfo struct {
	Type string `json:"type"`
	// Count is the number of current resources; nil when the caller's
	// scopes do not reach every resource of the type.
	Count *int64 `json:"count,omitempty"`
	// Access holds the SMART v2 letters (c r u d s) the caller may use.
	Access string `json:"access"`
}

// overview is the console's home page data.
type overview struct {
	Tenant   string     `json:"tenant"`
	Subject  string     `json:"subject,omitempty"`
	ClientID string     `json:"clientId,omitempty"`
	Patient  string     `json:"patient,omitempty"`
	Scopes   []string   `json:"scopes"`
	Types    []typeInfo `json:"types"`
	Server   facts      `json:"server"`
}

// facts are the server facts of the home page.
type facts struct {
	Version       string    `json:"version"`
	Engine        string    `json:"engine"`
	FHIRVersion   string    `json:"fhirVersion"`
	Started       time.Time `json:"started"`
	UptimeSeconds int64     `json:"uptimeSeconds"`
}

// interactions are the SMART v2 permissions, in their canonical order.
var interactions = []auth.Interaction{auth.Create, auth.Read, auth.Update, auth.Delete, auth.Search}

// countWorkers bounds the concurrent count queries of one overview.
const countWorkers = 4

// serveAPI answers the console's JSON API; the caller is authenticated.
func (c *Console) serveAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	name := strings.TrimPrefix(r.URL.Path, apiPrefix)
	// Expressions are evaluated over what the form sends; every other
	// endpoint only reads.
	method := http.MethodGet
	if name == "expressions" {
		method = http.MethodPost
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeAPIError(w, http.StatusMethodNotAllowed, "only "+method+" is allowed")
		return
	}
	sess, ok := c.opts.Session(r)
	if !ok {
		writeAPIError(w, http.StatusUnauthorized, "a bearer token is required")
		return
	}
	switch {
	case name == "overview":
		c.serveOverview(w, r, sess)
	case strings.HasPrefix(name, "references/"):
		c.serveReferences(w, strings.TrimPrefix(name, "references/"))
	case name == "expressions":
		c.serveExpressions(w, r)
	case name == "changes":
		c.serveChanges(w, r, sess)
	case strings.HasPrefix(name, "referrers/"):
		c.serveReferrers(w, r, sess, strings.TrimPrefix(name, "referrers/"))
	default:
		writeAPIError(w, http.StatusNotFound, "no such console endpoint")
	}
}

// serveOverview answers who the caller is, what each type holds and what
// the caller may do with it, and the server facts.
func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request, sess Session) {
	p := sess.Principal
	types, err := c.typeInfos(r.Context(), sess)
	if err != nil {
		c.opts.Logger.Error("console overview counts", zap.String("tenant", sess.Tenant), zap.Error(err))
		writeAPIError(w, http.StatusServiceUnavailable, "the database did not answer the counts")
		return
	}
	now := c.opts.Now()
	writeAPIJSON(w, overview{
		Tenant: sess.Tenant, Subject: p.Subject, ClientID: p.ClientID, Patient: p.Patient,
		Scopes: nonNil(p.Scopes), Types: types,
		Server: facts{
			Version: c.opts.Version, Engine: c.opts.Store.Engine(), FHIRVersion: fhirschema.FHIRVersion,
			Started: c.started.UTC(), UptimeSeconds: int64(now.Sub(c.started) / time.Second),
		},
	})
}

// typeInfos lists every type with what the caller may do with it and,
// where the caller may search all of it, its count.
func (c *Console) typeInfos(ctx context.Context, sess Session) ([]typeInfo, error) {
	p := sess.Principal
	scopes := auth.ParseScopes(p.Scopes)
	types := make([]typeInfo, 0, len(fhirschema.ResourceTypes()))
	for _, t := range fhirschema.ResourceTypes() {
		var letters []byte
		for _, i := range interactions {
			if auth.Decide(scopes, p.Patient, t, i) != auth.Denied {
				letters = append(letters, byte(i))
			}
		}
		types = append(types, typeInfo{Type: t, Access: string(letters)})
	}
	return types, c.count(ctx, sess.Tenant, scopes, p.Patient, types)
}

// count fills in the counts of the types whose every resource the caller
// may search: a patient-restricted token sees no tenant-wide numbers.
func (c *Console) count(ctx context.Context, tenant string, scopes []auth.Scope, patient string, types []typeInfo) error {
	if c.opts.Registry == nil {
		return nil
	}
	var idx []int
	for i, t := range types {
		if auth.Decide(scopes, patient, t.Type, auth.Search) == auth.Full {
			idx = append(idx, i)
		}
	}
	return parallel(len(idx), func(k int) error {
		n, err := c.countType(ctx, tenant, types[idx[k]].Type, nil)
		types[idx[k]].Count = &n
		return err
	})
}

// parallel runs fn(0..n-1), countWorkers at a time, and returns the first error.
func parallel(n int, fn func(i int) error) error {
	jobs := make(chan int)
	errs := make(chan error, countWorkers)
	var wg sync.WaitGroup
	for range countWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for i := range jobs {
				if first == nil {
					first = fn(i)
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// countType counts the current resources of a type that match where (all
// of them when where is nil).
func (c *Console) countType(ctx context.Context, tenant, typ string, where url.Values) (int64, error) {
	params := url.Values{"_summary": {"count"}}
	for k, v := range where {
		params[k] = v
	}
	q, err := c.opts.Registry.Parse(typ, params, search.ParseOptions{})
	if err != nil {
		return 0, err
	}
	page, err := c.opts.Store.Search(ctx, tenant, q)
	if err != nil {
		return 0, err
	}
	return page.Total, nil
}

// referrer is a count of the resources pointing at one resource through
// one reference parameter.
type referrer struct {
	Type  string `json:"type"`
	Param string `json:"param"`
	Count int64  `json:"count"`
}

// serveReferrers counts, per reference parameter, the resources that
// point at Type/id: the counts of a _revinclude, without the resources.
// Only source types the caller may search in full are counted.
func (c *Console) serveReferrers(w http.ResponseWriter, r *http.Request, sess Session, ref string) {
	typ, id, ok := strings.Cut(ref, "/")
	if !ok || !fhirschema.IsResourceType(typ) || id == "" || strings.Contains(id, "/") {
		writeAPIError(w, http.StatusNotFound, "give a reference as Type/id")
		return
	}
	out := []referrer{}
	if c.opts.Registry != nil {
		var err error
		if out, err = c.referrers(r.Context(), sess, typ, id); err != nil {
			c.opts.Logger.Error("console referrers", zap.String("tenant", sess.Tenant), zap.Error(err))
			writeAPIError(w, http.StatusServiceUnavailable, "the database did not answer the counts")
			return
		}
	}
	writeAPIJSON(w, map[string]any{"reference": typ + "/" + id, "referrers": out})
}

func (c *Console) referrers(ctx context.Context, sess Session, typ, id string) ([]referrer, error) {
	scopes := auth.ParseScopes(sess.Principal.Scopes)
	var out []referrer
	for _, src := range fhirschema.ResourceTypes() {
		if auth.Decide(scopes, sess.Principal.Patient, src, auth.Search) != auth.Full {
			continue
		}
		var params []string
		for _, p := range c.opts.Registry.Params(src) {
			if p.Type == "reference" && slices.Contains(p.Target, typ) {
				params = append(params, p.Code)
			}
		}
		if len(params) == 0 {
			continue
		}
		if n, err := c.countType(ctx, sess.Tenant, src, nil); err != nil || n == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		for _, p := range params {
			n, err := c.countType(ctx, sess.Tenant, src, url.Values{p: {typ + "/" + id}})
			if err != nil {
				return nil, err
			}
			if n > 0 {
				out = append(out, referrer{Type: src, Param: p, Count: n})
			}
		}
	}
	return out, nil
}

// serveReferences lists the reference parameters that can point at a type,
// as Type:param values for _revinclude.
func (c *Console) serveReferences(w http.ResponseWriter, target string) {
	if !fhirschema.IsResourceType(target) {
		writeAPIError(w, http.StatusNotFound, "unknown resource type")
		return
	}
	out := []string{}
	if c.opts.Registry != nil {
		for _, src := range fhirschema.ResourceTypes() {
			for _, p := range c.opts.Registry.Params(src) {
				if p.Type == "reference" && slices.Contains(p.Target, target) {
					out = append(out, src+":"+p.Code)
				}
			}
		}
	}
	writeAPIJSON(w, map[string]any{"type": target, "revinclude": out})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeAPIJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": msg})
}
