package subscription

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema/fhirxml"
	"fhirstore/store"
)

// runTopic sends a topic-based subscription's events in number order,
// up to max-count in a notification, from the durable cursor on; when
// there is nothing to send for a heartbeat period it sends a heartbeat.
// A failing rest-hook endpoint is retried with backoff, and the last
// allowed attempt puts the subscription in error; its events wait.
func (w *worker) runTopic() {
	e, ctx := w.e, w.e.ctx
	t := e.tenant(w.tenant)
	cursor, lastSent := int64(-1), time.Now()
	attempts, gapSeen := 0, false
	var retryAt time.Time
	for {
		sp := e.running(w)
		if sp == nil {
			return
		}
		var events []*store.TopicEvent
		var err error
		if cursor < 0 {
			cursor, err = e.st.TopicCursor(ctx, w.tenant, w.id)
		}
		if err == nil && cursor >= 0 {
			var ok bool
			if events, ok = t.events.take(w.id, cursor, sp.topic.maxCount); !ok {
				events, err = e.st.TopicEvents(ctx, w.tenant, w.id, cursor+1, 0, sp.topic.maxCount)
				if len(events) == sp.topic.maxCount {
					t.events.overflowed(w.id) // the log may hold more than one read took
				}
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("read topic events", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
			}
			cursor = -1
			if !w.sleep(e.cfg.Poll) {
				return
			}
			continue
		}
		events = contiguous(events, cursor)
		if len(events) > 0 && events[0].Number != cursor+1 && !gapSeen {
			gapSeen = true // an event being recorded: look again shortly
			if !w.sleep(e.cfg.Poll / 4) {
				return
			}
			continue
		}
		gapSeen = false
		if len(events) == 0 {
			if !w.idle(ctx, sp, &lastSent) {
				return
			}
			continue
		}
		if wait := time.Until(retryAt); wait > 0 {
			if !w.sleep(wait) {
				return
			}
			continue
		}
		last := events[len(events)-1].Number
		if err := e.sendTopic(ctx, w.tenant, sp, NoteEvent, sp.status, last, events); err != nil {
			if ctx.Err() != nil {
				return
			}
			attempts++
			retryAt = time.Now().Add(e.backoff(attempts))
			e.stats.failed(w.tenant)
			e.log.Info("topic notification failed", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Int64("event", events[0].Number), zap.Int("attempt", attempts), zap.Error(err))
			if attempts >= e.cfg.Attempts {
				attempts, retryAt = 0, time.Time{}
				_ = e.setError(ctx, w.tenant, sp, fmt.Sprintf("delivery of event %d failed %d times; last failure: %v", events[0].Number, e.cfg.Attempts, err))
			}
			continue
		}
		attempts, lastSent = 0, time.Now()
		for _, ev := range events {
			e.stats.sent(w.tenant, ev.At)
		}
		if err := e.st.SetTopicCursor(context.WithoutCancel(ctx), w.tenant, w.id, last); err != nil {
			e.log.Warn("record topic cursor", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
			cursor = -1 // read again: a resend is allowed, a skip is not
			continue
		}
		keep := int64(e.cfg.KeepEvents)
		if step := min(100, keep); last > keep && last/step != cursor/step { // now and then
			if err := e.st.PruneTopicEvents(context.WithoutCancel(ctx), w.tenant, w.id, last-keep); err != nil {
				e.log.Warn("prune topic events", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
			}
		}
		cursor = last
	}
}

// contiguous keeps the events that follow each other without a gap.
func contiguous(events []*store.TopicEvent, cursor int64) []*store.TopicEvent {
	for i := 1; i < len(events); i++ {
		if events[i].Number != events[i-1].Number+1 {
			return events[:i]
		}
	}
	return events
}

// idle waits for the next poke, sending a heartbeat when one is due; it
// reports false when the engine stops.
func (w *worker) idle(ctx context.Context, sp *spec, lastSent *time.Time) bool {
	e := w.e
	nap := e.cfg.Reload
	if hb := sp.topic.heartbeat; hb > 0 {
		if due := hb - time.Since(*lastSent); due > 0 {
			nap = min(nap, due)
		} else {
			since, err := e.lastEvent(ctx, e.tenant(w.tenant), w.id)
			if err == nil {
				err = e.sendTopic(ctx, w.tenant, sp, NoteHeartbeat, sp.status, since, nil)
			}
			if err != nil && ctx.Err() == nil {
				e.log.Info("heartbeat failed", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
			}
			*lastSent = time.Now()
			return true
		}
	}
	return w.sleep(nap)
}

// handshake sends a requested rest-hook subscription its handshake on a
// goroutine of its own and then sets it active, or in error when the
// endpoint did not accept it after every attempt.
func (e *Engine) handshake(tenantName string, r *store.Resource, sp *spec) {
	key := tenantName + "/" + r.ID + "/" + fmt.Sprint(r.VersionID)
	if _, busy := e.handshakes.LoadOrStore(key, true); busy {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.handshakes.Delete(key)
		ctx := e.ctx
		sp.id, sp.version = r.ID, r.VersionID
		err := e.sendHandshake(ctx, tenantName, sp)
		if ctx.Err() != nil {
			return
		}
		status, reason := StatusActive, ""
		if err != nil {
			status, reason = StatusError, "the handshake failed: "+err.Error()
		} else {
			next := *sp
			next.version, next.status = r.VersionID+1, StatusActive
			e.put(tenantName, &next)
		}
		written, err := e.setStatus(ctx, tenantName, r, status, reason)
		if err != nil {
			e.log.Warn("set subscription status after its handshake", zap.String("tenant", tenantName), zap.String("id", r.ID), zap.Error(err))
			return
		}
		if written != nil {
			if err := e.update(ctx, tenantName, written); err != nil {
				e.log.Warn("take in subscription status", zap.String("tenant", tenantName), zap.String("id", r.ID), zap.Error(err))
			}
		}
	}()
}

// sendHandshake sends a handshake, tried as often as a notification
// (Config.Attempts, with the same backoff) before it counts as failed.
func (e *Engine) sendHandshake(ctx context.Context, tenantName string, sp *spec) error {
	for attempt := 1; ; attempt++ {
		since, err := e.lastEvent(ctx, e.tenant(tenantName), sp.id)
		if err == nil {
			err = e.sendTopic(ctx, tenantName, sp, NoteHandshake, StatusRequested, since, nil)
		}
		if err == nil || attempt >= e.cfg.Attempts || ctx.Err() != nil {
			return err
		}
		e.log.Info("handshake failed", zap.String("tenant", tenantName), zap.String("subscription", sp.id), zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.backoff(attempt)):
		}
	}
}

// sendTopic sends one notification of kind with the events: a POST of
// the Bundle to a rest-hook endpoint (any 2xx is success), a message to
// every websocket bound to the subscription.
func (e *Engine) sendTopic(ctx context.Context, tenantName string, sp *spec, kind, status string, since int64, events []*store.TopicEvent) error {
	if sp.topic.channel == Websocket && !e.hub.listened(tenantName, sp.id) {
		return nil // nobody listens: the events stay in the log for $events
	}
	b, err := e.notification(ctx, tenantName, sp, kind, status, since, events, sp.topic.content)
	if err != nil {
		return err
	}
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	if sp.topic.channel == Websocket {
		e.hub.deliver(tenantName, sp.id, body)
		return nil
	}
	if sp.payload == PayloadXML {
		if body, err = fhirxml.FromJSON(body, fhirxml.WriteOptions{}); err != nil {
			return fmt.Errorf("render notification as XML: %w", err)
		}
	}
	timeout := e.cfg.Timeout
	if t := sp.topic.timeout; t > 0 && t < timeout {
		timeout = t
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sp.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notification request: %w", err)
	}
	for k, v := range sp.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", sp.payload)
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", sp.endpoint, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s: the endpoint answered %s", sp.endpoint, resp.Status)
	}
	return nil
}
