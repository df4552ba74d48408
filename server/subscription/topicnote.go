package subscription

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"fhirstore/search"
	"fhirstore/store"
)

// Notification types of the SubscriptionStatus.
const (
	NoteHandshake   = "handshake"
	NoteHeartbeat   = "heartbeat"
	NoteEvent       = "event-notification"
	NoteQueryStatus = "query-status"
	NoteQueryEvent  = "query-event"
)

// profileStatus is the profile of the R4 SubscriptionStatus Parameters.
const profileStatus = backportSD + "backport-subscription-status-r4"

// base is the tenant's FHIR base with a trailing slash ("" when unknown:
// references are relative).
func (e *Engine) base(tenant string) string {
	if e.cfg.BaseURL == nil {
		return ""
	}
	b := e.cfg.BaseURL(tenant)
	if b != "" && b[len(b)-1] != '/' {
		b += "/"
	}
	return b
}

// param is one Parameters.parameter.
func param(name, valueType string, value any) map[string]any {
	return map[string]any{"name": name, "value" + valueType: value}
}

// statusParams is the SubscriptionStatus of a subscription as R4
// Parameters; events are its notification-event parts.
func (e *Engine) statusParams(tenant string, sp *spec, kind, status string, since int64, events []map[string]any, reason string) map[string]any {
	params := []any{
		param("subscription", "Reference", map[string]any{"reference": e.base(tenant) + "Subscription/" + sp.id}),
		param("topic", "Canonical", sp.topic.url),
		param("status", "Code", status),
		param("type", "Code", kind),
		param("events-since-subscription-start", "String", strconv.FormatInt(since, 10)),
	}
	for _, ev := range events {
		params = append(params, ev)
	}
	if reason != "" {
		params = append(params, param("error", "CodeableConcept", map[string]any{"text": reason}))
	}
	return map[string]any{"resourceType": "Parameters", "id": uuid.NewString(), "meta": map[string]any{"profile": []string{profileStatus}}, "parameter": params}
}

// bundleEntry is one entry of a notification Bundle.
type bundleEntry = map[string]any

// notification builds a notification Bundle (history) of kind for the
// events in the given payload content: the SubscriptionStatus first, then
// each focus and its notificationShape resources.
func (e *Engine) notification(ctx context.Context, tenant string, sp *spec, kind, status string, since int64, events []*store.TopicEvent, content string) (map[string]any, error) {
	var parts []map[string]any
	var entries []bundleEntry
	seen := map[string]bool{}
	for _, ev := range events {
		part := []any{
			param("event-number", "String", strconv.FormatInt(ev.Number, 10)),
			param("timestamp", "Instant", ev.At.UTC().Format(time.RFC3339Nano)),
		}
		if content != ContentEmpty {
			ref := e.base(tenant) + ev.Type + "/" + ev.ID
			part = append(part, param("focus", "Reference", map[string]any{"reference": ref}))
			focus, err := e.focusEntry(ctx, tenant, ev, content)
			if err != nil {
				return nil, err
			}
			entries = append(entries, focus)
			more, err := e.shapeEntries(ctx, tenant, sp, ev, content, seen)
			if err != nil {
				return nil, err
			}
			for _, m := range more {
				part = append(part, param("additional-context", "Reference", map[string]any{"reference": m["fullUrl"]}))
				entries = append(entries, m)
			}
		}
		parts = append(parts, map[string]any{"name": "notification-event", "part": part})
	}
	head := bundleEntry{"fullUrl": "urn:uuid:" + uuid.NewString(), "resource": e.statusParams(tenant, sp, kind, status, since, parts, ""),
		"request": map[string]any{"method": "GET", "url": "Subscription/" + sp.id + "/$status"}, "response": map[string]any{"status": "200"}}
	return map[string]any{"resourceType": "Bundle", "id": uuid.NewString(), "type": "history", "timestamp": e.cfg.Now().UTC().Format(time.RFC3339Nano),
		"entry": append([]bundleEntry{head}, entries...)}, nil
}

// focusEntry is the entry of an event's focus: the version itself for
// full-resource (a deletion has none), its address only for id-only.
func (e *Engine) focusEntry(ctx context.Context, tenant string, ev *store.TopicEvent, content string) (bundleEntry, error) {
	method, status := "PUT", "200"
	switch ev.Method {
	case "POST":
		method, status = "POST", "201"
	case "DELETE":
		method, status = "DELETE", "204"
	}
	if ev.VID == 1 && method == "PUT" {
		status = "201"
	}
	entry := bundleEntry{"fullUrl": e.base(tenant) + ev.Type + "/" + ev.ID, "request": map[string]any{"method": method, "url": ev.Type + "/" + ev.ID},
		"response": map[string]any{"status": status, "etag": `W/"` + strconv.Itoa(ev.VID) + `"`}}
	if content != ContentFull || method == "DELETE" {
		return entry, nil
	}
	r, err := e.st.VRead(ctx, tenant, ev.Type, ev.ID, strconv.Itoa(ev.VID))
	if err != nil {
		return nil, err
	}
	entry["resource"] = json.RawMessage(r.JSON)
	return entry, nil
}

// shapeEntries are the resources the topic's notificationShape adds to a
// focus (its includes and revIncludes, as they are now), each once.
func (e *Engine) shapeEntries(ctx context.Context, tenant string, sp *spec, ev *store.TopicEvent, content string, seen map[string]bool) ([]bundleEntry, error) {
	if sp.topic.topic == nil || ev.Method == "DELETE" {
		return nil, nil
	}
	sh := sp.topic.topic.shape(ev.Type)
	if sh == nil || len(sh.Include)+len(sh.RevInclude) == 0 {
		return nil, nil
	}
	q, err := e.cfg.Registry.Parse(ev.Type, url.Values{"_id": {ev.ID}, "_include": sh.Include, "_revinclude": sh.RevInclude}, search.ParseOptions{})
	if err != nil {
		return nil, nil // a shape the search cannot run adds nothing
	}
	page, err := e.st.Search(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	var out []bundleEntry
	for _, r := range page.Included {
		key := r.Type + "/" + r.ID
		if seen[key] {
			continue
		}
		seen[key] = true
		entry := bundleEntry{"fullUrl": e.base(tenant) + key, "request": map[string]any{"method": "GET", "url": key}, "response": map[string]any{"status": "200"}}
		if content == ContentFull {
			entry["resource"] = json.RawMessage(r.JSON)
		}
		out = append(out, entry)
	}
	return out, nil
}
