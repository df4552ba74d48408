package subscription

import (
	"context"

	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store"
)

// match turns a tenant's outbox into notification queues whenever it is
// woken, until the engine closes.
func (e *Engine) match(t *tenant) {
	defer e.wg.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.wake:
		}
		held := e.claim(e.ctx, t)
		if !held {
			e.reload(e.ctx, t, e.cfg.Poll)
			continue // another server dispatches this tenant
		}
		e.reload(e.ctx, t, e.cfg.Reload)
		for e.ctx.Err() == nil {
			n, err := e.matchBatch(e.ctx, t)
			if err != nil {
				if e.ctx.Err() == nil {
					e.log.Warn("match changes against subscriptions", zap.String("tenant", t.name), zap.Error(err))
				}
				break // tried again at the next wake-up or poll
			}
			if n == 0 {
				break
			}
		}
	}
}

// matchBatch handles one batch of ready changes: Subscription changes
// update the engine, every change is matched against the deliverable
// subscriptions of its type, the notifications are queued and the changes
// leave the outbox, in that order, so that a crash repeats work and never
// loses it. It returns how many changes it handled.
func (e *Engine) matchBatch(ctx context.Context, t *tenant) (int, error) {
	changes, err := e.st.Changes(ctx, t.name, batchSize)
	if err != nil || len(changes) == 0 {
		return 0, err
	}
	byType := map[string][]*store.Change{}
	var types []string
	keys := make([]string, 0, len(changes))
	topicsChanged := false
	for _, c := range changes {
		keys = append(keys, c.Key)
		typ := c.Resource.Type
		if typ == "Subscription" {
			if err := e.observe(ctx, t.name, c.Resource); err != nil {
				return 0, err
			}
		}
		topicsChanged = topicsChanged || isTopicChange(c)
		if byType[typ] == nil {
			types = append(types, typ)
		}
		byType[typ] = append(byType[typ], c)
	}
	if topicsChanged { // subscriptions to a topic retired or changed are checked again
		e.topics.forget(t.name)
		if err := e.load(ctx, t.name); err != nil {
			return 0, err
		}
	}
	events, err := e.matchTopics(ctx, t, changes)
	if err != nil {
		return 0, err
	}
	var notes []*store.Notification
	woken := map[string]bool{}
	for _, ev := range events {
		woken[ev.Subscription] = true
	}
	for _, typ := range types {
		subs := e.deliverable(t, typ)
		if len(subs) == 0 {
			continue
		}
		queries := make([]*search.Query, len(subs))
		for i, s := range subs {
			queries[i] = s.query
		}
		matched, err := e.st.MatchChanges(ctx, t.name, typ, queries, byType[typ])
		if err != nil {
			return 0, err
		}
		for i, s := range subs {
			for _, c := range byType[typ] {
				if matched[i][c.Key] {
					notes = append(notes, notification(s.id, c))
					woken[s.id] = true
				}
			}
		}
	}
	if err := e.st.QueueNotifications(ctx, t.name, notes, keys); err != nil {
		return 0, err
	}
	e.stats.queued(t.name, len(notes))
	e.log.Debug("matched changes", zap.String("tenant", t.name), zap.Int("changes", len(changes)), zap.Int("notifications", len(notes)))
	var gone []string
	e.mu.RLock()
	for _, id := range t.byAge(woken) { // the oldest subscriptions hear of a change first
		if w := t.workers[id]; w != nil {
			w.poke()
		}
		if t.subs[id] == nil {
			gone = append(gone, id)
		}
	}
	e.mu.RUnlock()
	for _, id := range gone { // deleted or turned off while this batch was matched
		if err := e.st.DropNotifications(ctx, t.name, id); err != nil {
			return 0, err
		}
	}
	return len(changes), nil
}

// notification is the queue entry of change c for subscription sub.
func notification(sub string, c *store.Change) *store.Notification {
	r := c.Resource
	return &store.Notification{Key: store.NotificationKey(sub, c.Key), Subscription: sub, Type: r.Type, ID: r.ID, VID: r.VersionID,
		Method: r.Method, At: r.LastUpdated}
}
