package subscription

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"fhirstore/fhirschema/fhirpath"
	"fhirstore/search"
	"fhirstore/store"
)

// numbering holds the number of the last event of each topic-based
// subscription of a tenant, read from the event log the first time.
type numbering struct {
	mu   sync.Mutex
	last map[string]int64
	// pending are the events recorded since each worker last read the
	// log, handed over in memory (absent: the worker reads the log).
	pending map[string]*pendingEvents
}

// pendingEvents are a subscription's events not yet taken by its worker;
// overflow says some were left out (the log has them).
type pendingEvents struct {
	list     []*store.TopicEvent
	overflow bool
}

// maxPending bounds the events held in memory per subscription.
const maxPending = 1000

// pend hands recorded events to their workers.
func (n *numbering) pend(events []*store.TopicEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ev := range events {
		p := n.pending[ev.Subscription]
		switch {
		case p == nil: // its worker reads the log
		case len(p.list) >= maxPending:
			p.overflow = true
		default:
			p.list = append(p.list, ev)
		}
	}
}

// overflowed makes the worker of subscription id read the log next time.
func (n *numbering) overflowed(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.pending[id]; p != nil {
		p.overflow = true
	}
}

// take returns up to max events that follow cursor from memory; ok is
// false when the worker must read the log instead: the events recorded
// from now on are handed over in memory, and a read of the log that
// follows sees every one recorded before (unless it is cut at max, when
// the worker calls overflowed).
func (n *numbering) take(id string, cursor int64, max int) (events []*store.TopicEvent, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pending[id]
	if p == nil || p.overflow {
		n.pending[id] = &pendingEvents{}
		return nil, false
	}
	for len(p.list) > 0 && p.list[0].Number <= cursor {
		p.list = p.list[1:]
	}
	if len(p.list) == 0 {
		p.list = nil
		return nil, true
	}
	if p.list[0].Number != cursor+1 {
		n.pending[id] = &pendingEvents{}
		return nil, false
	}
	events = contiguous(p.list[:min(max, len(p.list))], cursor)
	return append([]*store.TopicEvent(nil), events...), true
}

// lastEvent is the number of a subscription's last recorded event.
func (e *Engine) lastEvent(ctx context.Context, t *tenant, id string) (int64, error) {
	t.events.mu.Lock()
	n, ok := t.events.last[id]
	t.events.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := e.st.LastTopicEvent(ctx, t.name, id)
	if err != nil {
		return 0, err
	}
	t.events.mu.Lock()
	defer t.events.mu.Unlock()
	if cur, ok := t.events.last[id]; ok {
		return cur, nil
	}
	t.events.last[id] = n
	return n, nil
}

// forgetTopicSub drops a removed subscription's numbering and event log.
func (e *Engine) forgetTopicSub(ctx context.Context, t *tenant, id string) {
	t.events.mu.Lock()
	delete(t.events.last, id)
	delete(t.events.pending, id)
	t.events.mu.Unlock()
	if err := e.st.DropTopicEvents(ctx, t.name, id); err != nil {
		e.log.Warn("drop topic events", zap.String("tenant", t.name), zap.String("subscription", id), zap.Error(err))
	}
	e.hub.unbindAll(t.name, id)
}

// isTopicChange tells whether a change is to a SubscriptionTopic.
func isTopicChange(c *store.Change) bool {
	if c.Resource.Type != "Basic" {
		return false
	}
	if c.Resource.Deleted {
		return c.Previous == nil || IsTopic(c.Previous.JSON)
	}
	return IsTopic(c.Resource.JSON)
}

// topicSubs lists the tenant's deliverable topic-based subscriptions
// whose topic is known, in id order.
func (e *Engine) topicSubs(t *tenant) []*spec {
	e.mu.RLock()
	defer e.mu.RUnlock()
	now := e.cfg.Now()
	var out []*spec
	for _, s := range t.subs {
		if s.topic != nil && s.topic.topic != nil && s.deliverable(now) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// matchTopics records the events the changes raise for the tenant's
// topic-based subscriptions, numbered per subscription in change order: a
// change matched again after a crash keeps the number it was given.
func (e *Engine) matchTopics(ctx context.Context, t *tenant, changes []*store.Change) ([]*store.TopicEvent, error) {
	subs := e.topicSubs(t)
	if len(subs) == 0 {
		return nil, nil
	}
	byType := map[string][]*store.Change{}
	for _, c := range changes {
		byType[c.Resource.Type] = append(byType[c.Resource.Type], c)
	}
	byTopic := map[*Topic][]*spec{}
	for _, sp := range subs {
		byTopic[sp.topic.topic] = append(byTopic[sp.topic.topic], sp)
	}
	hits := map[string]map[string]bool{} // subscription id -> change keys
	for topic, tsubs := range byTopic {
		for typ, cs := range byType {
			tr := topic.trigger(typ)
			if tr == nil {
				continue
			}
			var filters []*search.Query
			for _, sp := range tsubs {
				filters = append(filters, sp.topic.filterQ[typ])
			}
			passed, filtered, err := e.evalTrigger(ctx, t.name, tr, cs, filters)
			if err != nil {
				return nil, err
			}
			for i, sp := range tsubs {
				for _, c := range passed {
					if filtered[i] == nil || filtered[i][c.Key] {
						hit(hits, sp.id, c.Key)
					}
				}
			}
		}
	}
	if len(hits) == 0 {
		return nil, nil
	}
	return e.numberEvents(ctx, t, subs, changes, hits)
}

func hit(hits map[string]map[string]bool, sub, key string) {
	if hits[sub] == nil {
		hits[sub] = map[string]bool{}
	}
	hits[sub][key] = true
}

// numberEvents numbers and records the hits, in change order.
func (e *Engine) numberEvents(ctx context.Context, t *tenant, subs []*spec, changes []*store.Change, hits map[string]map[string]bool) ([]*store.TopicEvent, error) {
	var keys []string
	for _, c := range changes {
		for _, sp := range subs {
			if hits[sp.id][c.Key] {
				keys = append(keys, store.NotificationKey(sp.id, c.Key))
			}
		}
	}
	known, err := e.st.TopicEventsByKey(ctx, t.name, keys)
	if err != nil {
		return nil, err
	}
	next := map[string]int64{}
	var events []*store.TopicEvent
	for _, c := range changes {
		for _, sp := range subs {
			key := store.NotificationKey(sp.id, c.Key)
			if !hits[sp.id][c.Key] || known[key] != nil {
				continue
			}
			if _, ok := next[sp.id]; !ok {
				if next[sp.id], err = e.lastEvent(ctx, t, sp.id); err != nil {
					return nil, err
				}
			}
			next[sp.id]++
			r := c.Resource
			events = append(events, &store.TopicEvent{Key: key, Subscription: sp.id, Number: next[sp.id], Type: r.Type, ID: r.ID, VID: r.VersionID, Method: r.Method, At: r.LastUpdated})
		}
	}
	if err := e.st.RecordTopicEvents(ctx, t.name, events); err != nil {
		return nil, err
	}
	t.events.mu.Lock()
	for id, n := range next {
		t.events.last[id] = n
	}
	t.events.mu.Unlock()
	t.events.pend(events)
	e.stats.queued(t.name, len(events))
	return events, nil
}

// interaction names the kind of change: create, update or delete.
func interaction(r *store.Resource) string {
	switch {
	case r.Deleted:
		return "delete"
	case r.VersionID == 1 || r.Method == "POST":
		return "create"
	}
	return "update"
}

// evalTrigger returns the changes (all of the trigger's type) that raise
// an event by its interactions, query criteria and FHIRPath criteria, and
// which of them each of filters matches (nil for a nil filter): the
// current criteria and the filters are one pass over the changes.
func (e *Engine) evalTrigger(ctx context.Context, tenantName string, tr *Trigger, cs []*store.Change, filters []*search.Query) ([]*store.Change, []map[string]bool, error) {
	var cand []*store.Change
	for _, c := range cs {
		if len(tr.Interactions) == 0 || tr.Interactions[interaction(c.Resource)] {
			cand = append(cand, c)
		}
	}
	if len(cand) == 0 {
		return nil, nil, nil
	}
	prev, err := e.previousVersions(ctx, tenantName, tr, cand)
	if err != nil {
		return nil, nil, err
	}
	var queries []*search.Query
	if tr.Current != nil {
		q, err := e.cfg.Registry.Parse(tr.Resource, tr.Current, search.ParseOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("topic criteria on %s: %w", tr.Resource, err)
		}
		queries = append(queries, q)
	}
	at := make([]int, len(filters))
	for i, f := range filters {
		at[i] = -1
		if f != nil {
			at[i] = len(queries)
			queries = append(queries, f)
		}
	}
	matched := make([]map[string]bool, len(queries))
	if len(queries) > 0 {
		// A deletion is judged by the version it deleted, as a search would.
		if matched, err = e.st.MatchChanges(ctx, tenantName, tr.Resource, queries, cand); err != nil {
			return nil, nil, fmt.Errorf("match topic criteria and filters: %w", err)
		}
	}
	cur := map[string]bool{}
	if tr.Current != nil {
		cur = matched[0]
	}
	was, err := e.testPrevious(ctx, tenantName, tr, cand, prev)
	if err != nil {
		return nil, nil, err
	}
	var out []*store.Change
	for _, c := range cand {
		if tr.passes(c, cur, was) && tr.passesFHIRPath(ctx, c, prev[c.Key]) {
			out = append(out, c)
		}
	}
	filtered := make([]map[string]bool, len(filters))
	for i, j := range at {
		if j >= 0 {
			filtered[i] = matched[j]
		}
	}
	return out, filtered, nil
}

// passes combines the query criteria's results for c (absent criteria
// take no part; with both, requireBoth asks for both, else either).
func (tr *Trigger) passes(c *store.Change, cur, was map[string]bool) bool {
	kind := interaction(c.Resource)
	curOK := cur[c.Key]
	if kind == "delete" {
		curOK = tr.ResultForDelete == "test-passes"
	}
	wasOK := was[c.Key]
	if kind == "create" {
		wasOK = tr.ResultForCreate == "test-passes"
	}
	switch {
	case tr.Current == nil && tr.Previous == nil:
		return true
	case tr.Previous == nil:
		return curOK
	case tr.Current == nil:
		return wasOK
	case tr.RequireBoth:
		return curOK && wasOK
	}
	return curOK || wasOK
}

// previousVersions reads the version each update replaced, when the
// trigger's criteria look at it; a deletion's is on the change already.
func (e *Engine) previousVersions(ctx context.Context, tenantName string, tr *Trigger, cs []*store.Change) (map[string]*store.Resource, error) {
	out := map[string]*store.Resource{}
	if tr.Previous == nil && tr.FHIRPath == nil {
		return out, nil
	}
	for _, c := range cs {
		r := c.Resource
		switch {
		case r.Deleted:
			if c.Previous != nil {
				out[c.Key] = c.Previous
			}
		case r.VersionID > 1:
			p, err := e.st.VRead(ctx, tenantName, r.Type, r.ID, strconv.Itoa(r.VersionID-1))
			if errors.Is(err, store.ErrGone) || errors.Is(err, store.ErrNotFound) {
				continue // recreated after a deletion: nothing before it
			}
			if err != nil {
				return nil, fmt.Errorf("read the version before %s: %w", c.Key, err)
			}
			if !p.Deleted {
				out[c.Key] = p
			}
		}
	}
	return out, nil
}

// testPrevious runs the trigger's previous criteria on the versions
// before the changes; it returns the keys of the changes whose previous
// version matches.
func (e *Engine) testPrevious(ctx context.Context, tenantName string, tr *Trigger, cs []*store.Change, prev map[string]*store.Resource) (map[string]bool, error) {
	out := map[string]bool{}
	if tr.Previous == nil {
		return out, nil
	}
	q, err := e.cfg.Registry.Parse(tr.Resource, tr.Previous, search.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("topic criteria on %s: %w", tr.Resource, err)
	}
	var probe []*store.Change
	for _, c := range cs {
		if prev[c.Key] != nil {
			probe = append(probe, &store.Change{Key: c.Key, Resource: prev[c.Key]})
		}
	}
	if len(probe) == 0 {
		return out, nil
	}
	matched, err := e.st.MatchChanges(ctx, tenantName, tr.Resource, []*search.Query{q}, probe)
	if err != nil {
		return nil, fmt.Errorf("match topic criteria: %w", err)
	}
	return matched[0], nil
}

// passesFHIRPath evaluates the trigger's FHIRPath criteria with %current
// and %previous (empty for a creation and a deletion respectively).
func (tr *Trigger) passesFHIRPath(ctx context.Context, c *store.Change, prev *store.Resource) bool {
	if tr.FHIRPath == nil {
		return true
	}
	env := &fhirpath.Env{Vars: map[string][]fhirpath.Node{"current": nil, "previous": nil}}
	var focus []fhirpath.Node
	if !c.Resource.Deleted {
		if m := decodeResource(c.Resource.JSON); m != nil {
			env.Resource = m
			focus = []fhirpath.Node{fhirpath.ResourceNode(m)}
			env.Vars["current"] = focus
		}
	}
	if prev != nil {
		if m := decodeResource(prev.JSON); m != nil {
			env.Vars["previous"] = []fhirpath.Node{fhirpath.ResourceNode(m)}
			if env.Resource == nil {
				env.Resource = m
			}
		}
	}
	out, err := tr.FHIRPath.Eval(ctx, env, focus)
	if err != nil || len(out) != 1 {
		return false
	}
	b, ok := out[0].Value.(bool)
	return ok && b
}

func decodeResource(body []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}
