package subscription

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"fhirstore/search"
	"fhirstore/store"
)

// maxReplay bounds the events one $events answer carries.
const maxReplay = 100

// badInput is a refusal of an operation's input (400) at expr.
func badInput(expr, format string, args ...any) error {
	return &store.InvalidError{Syntax: true, Issues: []store.Issue{{Severity: "error", Code: "invalid", Diagnostics: fmt.Sprintf(format, args...), Expression: expr}}}
}

// topicSpec reads a subscription and checks that it is topic-based.
func (e *Engine) topicSpec(ctx context.Context, tenant, id string) (*spec, error) {
	r, err := e.st.Read(ctx, tenant, "Subscription", id)
	if err != nil {
		return nil, err
	}
	sp, _ := e.check.parse(ctx, tenant, r.JSON)
	if sp == nil || sp.topic == nil {
		return nil, &store.InvalidError{Issues: []store.Issue{{Severity: "error", Code: "not-supported",
			Diagnostics: fmt.Sprintf("Subscription/%s is not topic-based: its criteria is a search", id), Expression: "Subscription.criteria"}}}
	}
	sp.id, sp.version = r.ID, r.VersionID
	return sp, nil
}

// Status is the $status operation: a searchset Bundle with the
// SubscriptionStatus (query-status) of each subscription (no ids: of each
// of the tenant's topic-based subscriptions that is not off).
func (e *Engine) Status(ctx context.Context, tenant string, ids []string) (map[string]any, error) {
	if len(ids) == 0 {
		var err error
		if ids, err = e.topicSubIDs(ctx, tenant); err != nil {
			return nil, err
		}
	}
	var entries []any
	for _, id := range ids {
		sp, err := e.topicSpec(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		since, err := e.lastEvent(ctx, e.tenant(tenant), id)
		if err != nil {
			return nil, err
		}
		p := e.statusParams(tenant, sp, NoteQueryStatus, sp.status, since, nil, "")
		entries = append(entries, map[string]any{"fullUrl": "urn:uuid:" + p["id"].(string), "resource": p, "search": map[string]any{"mode": "match"}})
	}
	return map[string]any{"resourceType": "Bundle", "type": "searchset", "total": len(entries), "entry": entries}, nil
}

// topicSubIDs lists the tenant's topic-based subscriptions that are not off.
func (e *Engine) topicSubIDs(ctx context.Context, tenant string) ([]string, error) {
	q, err := e.cfg.Registry.Parse("Subscription", url.Values{"status": {"requested,active,error"}, "_count": {"100"}}, search.ParseOptions{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for {
		page, err := e.st.Search(ctx, tenant, q)
		if err != nil {
			return nil, fmt.Errorf("list subscriptions: %w", err)
		}
		for _, r := range page.Entries {
			var d document
			if json.Unmarshal(r.JSON, &d) == nil && isTopicCriteria(d.Criteria) {
				ids = append(ids, r.ID)
			}
		}
		if page.Next == "" {
			return ids, nil
		}
		q.Cursor = page.Next
	}
}

// Events is the $events operation: the subscription's recorded events
// from since to until (0: from the first, to the last; at most 100) as a
// query-event Bundle with the given payload content ("": the
// subscription's own).
func (e *Engine) Events(ctx context.Context, tenant, id string, since, until int64, content string) (map[string]any, error) {
	sp, err := e.topicSpec(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	switch content {
	case "":
		content = sp.topic.content
	case ContentEmpty, ContentIDOnly, ContentFull:
	default:
		return nil, badInput("content", "content %q is not one of empty, id-only, full-resource", content)
	}
	if since < 0 || until < 0 || (until > 0 && until < since) {
		return nil, badInput("eventsSinceNumber", "the event range %d to %d is empty", since, until)
	}
	last, err := e.lastEvent(ctx, e.tenant(tenant), id)
	if err != nil {
		return nil, err
	}
	if since == 0 {
		since = 1
	}
	events, err := e.st.TopicEvents(ctx, tenant, id, since, until, maxReplay)
	if err != nil {
		return nil, err
	}
	return e.notification(ctx, tenant, sp, NoteQueryEvent, sp.status, last, events, content)
}

// BindingToken is the $get-ws-binding-token operation: a short-lived token
// that binds a websocket to the tenant's websocket subscriptions ids.
func (e *Engine) BindingToken(ctx context.Context, tenant string, ids []string, websocketURL string) (map[string]any, error) {
	if len(ids) == 0 {
		return nil, badInput("id", "name the subscriptions: Subscription/[id]/$get-ws-binding-token or Subscription/$get-ws-binding-token?id=…")
	}
	for _, id := range ids {
		sp, err := e.topicSpec(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		if sp.topic.channel != Websocket {
			return nil, &store.InvalidError{Issues: []store.Issue{{Severity: "error", Code: "not-supported",
				Diagnostics: fmt.Sprintf("Subscription/%s has channel type %s, not websocket", id, sp.topic.channel), Expression: "Subscription.channel.type"}}}
		}
	}
	token, exp := e.hub.issue(tenant, ids)
	params := []any{param("token", "String", token), param("expiration", "DateTime", exp.UTC().Format(time.RFC3339))}
	for _, id := range ids {
		params = append(params, param("subscription", "String", id))
	}
	params = append(params, param("websocket-url", "Url", websocketURL))
	return map[string]any{"resourceType": "Parameters", "parameter": params}, nil
}

// TopicCanonicals lists the canonicals of the tenant's usable topics (not
// retired), for the CapabilityStatement.
func (e *Engine) TopicCanonicals(ctx context.Context, tenant string) ([]string, error) {
	list, err := e.topics.List(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range list {
		if t.Status != TopicRetired {
			out = append(out, t.URL)
		}
	}
	return out, nil
}

// TopicResources lists the resource types a notification of the topic
// canonical may carry: those its triggers watch, those of its
// notification shapes and those their includes and revincludes reach;
// found is false for a topic the tenant does not have.
func (e *Engine) TopicResources(ctx context.Context, tenant, canonical string) (types []string, found bool, err error) {
	t, err := e.topics.Find(ctx, tenant, canonical)
	if err != nil || t == nil {
		return nil, false, err
	}
	return t.resourceTypes(e.cfg.Registry), true, nil
}
