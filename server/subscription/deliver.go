package subscription

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema/fhirxml"
	"fhirstore/store"
)

// worker sends one subscription's queue, one notification at a time and
// oldest first, so that each resource's changes arrive in order; a
// failing endpoint holds up only its own subscription.
type worker struct {
	e      *Engine
	tenant string
	id     string
	wake   chan struct{}
	topic  bool // sends a topic-based subscription's events
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// queueRead bounds the notifications read at once.
const queueRead = 50

func (w *worker) run() {
	defer w.e.wg.Done()
	if w.topic {
		w.runTopic()
		return
	}
	ctx := w.e.ctx
	for {
		sp := w.e.running(w)
		if sp == nil {
			return
		}
		notes, err := w.e.st.Notifications(ctx, w.tenant, w.id, queueRead)
		if err != nil && ctx.Err() == nil {
			w.e.log.Warn("read notification queue", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
		}
		if err != nil || len(notes) == 0 {
			// The matcher pokes the worker when it queues something; the
			// long nap only covers queues filled by another process.
			nap := w.e.cfg.Reload
			if err != nil {
				nap = w.e.cfg.Poll
			}
			if !w.sleep(nap) {
				return
			}
			continue
		}
		var sent []string
		for i, n := range notes {
			if i > 0 {
				if sp = w.e.running(w); sp == nil {
					break
				}
			}
			if !w.deliver(ctx, sp, n) {
				break
			}
			sent = append(sent, n.Key)
		}
		// One delete for the whole run: a crash before it sends them
		// again, which at-least-once allows.
		if err := w.e.st.NotificationsSent(context.WithoutCancel(ctx), w.tenant, sent); err != nil {
			w.e.log.Warn("clear delivered notifications", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
			if !w.sleep(w.e.cfg.Poll) {
				return
			}
		}
	}
}

// sleep waits for d, a poke or the end of the engine; false at the end.
func (w *worker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.e.ctx.Done():
		return false
	case <-w.wake:
	case <-t.C:
	}
	return true
}

// running returns the subscription a worker serves while it is active;
// otherwise the worker is taken off and nil returned (under the lock, so
// that a subscription activated again gets a new worker).
func (e *Engine) running(w *worker) *spec {
	if e.ctx.Err() != nil {
		return nil
	}
	now := e.cfg.Now()
	e.mu.Lock()
	t := e.tenants[w.tenant]
	sp := t.subs[w.id]
	if sp != nil && sp.status == StatusActive && !sp.ended(now) && t.held.Load() && t.workers[w.id] == w && w.topic == (sp.topic != nil) {
		e.mu.Unlock()
		return sp
	}
	if t.workers[w.id] == w {
		delete(t.workers, w.id)
	}
	e.mu.Unlock()
	if sp != nil && sp.ended(now) { // end stops delivery: nothing more goes out
		if err := e.st.DropNotifications(e.ctx, w.tenant, w.id); err != nil {
			e.log.Warn("drop notifications of an ended subscription", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.Error(err))
		}
	}
	return nil
}

// deliver sends n, waiting for its retry time first; it reports whether n
// went out. A failure schedules the next attempt with exponential backoff;
// the last allowed one puts the subscription in error.
func (w *worker) deliver(ctx context.Context, sp *spec, n *store.Notification) bool {
	e := w.e
	if n.Attempts >= e.cfg.Attempts {
		n.Attempts = 0 // the subscription was resumed after an error
	}
	if wait := n.Next.Sub(e.cfg.Now()); wait > 0 {
		if !w.sleep(wait) || e.cfg.Now().Before(n.Next) {
			return false // woken early: look again
		}
	}
	err := e.send(ctx, w.tenant, sp, n)
	if err == nil {
		e.stats.sent(w.tenant, n.At)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, store.ErrNotFound) {
		// The version was undone after it was queued (an operator
		// abandoned its transaction): there is nothing to announce, and
		// waiting for it would hold up the whole queue.
		e.log.Warn("notification dropped: its version no longer exists", zap.String("tenant", w.tenant),
			zap.String("subscription", w.id), zap.String("key", n.Key), zap.Error(err))
		return true
	}
	e.stats.failed(w.tenant)
	n.Attempts++
	n.Error = err.Error()
	n.Next = e.cfg.Now().Add(e.backoff(n.Attempts))
	if n.Attempts >= e.cfg.Attempts {
		n.Next = e.cfg.Now()
	}
	if err := e.st.NotificationFailed(ctx, w.tenant, n); err != nil {
		e.log.Warn("record failed notification", zap.String("tenant", w.tenant), zap.String("key", n.Key), zap.Error(err))
	}
	e.log.Info("notification failed", zap.String("tenant", w.tenant), zap.String("subscription", w.id), zap.String("key", n.Key), zap.Int("attempt", n.Attempts), zap.Error(err))
	if n.Attempts >= e.cfg.Attempts {
		_ = e.setError(ctx, w.tenant, sp, fmt.Sprintf("delivery of %s/%s/_history/%d failed %d times; last failure: %v", n.Type, n.ID, n.VID, n.Attempts, err))
	}
	return false
}

// backoff is the wait after the given number of failed attempts.
func (e *Engine) backoff(attempts int) time.Duration {
	d := e.cfg.Backoff
	for i := 1; i < attempts && d < e.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, e.cfg.MaxBackoff)
}

// send makes one delivery attempt: an empty POST to the endpoint without a
// payload; with one, PUT [endpoint]/[type]/[id] with the version (DELETE
// for a deletion). Any 2xx answer is success.
func (e *Engine) send(ctx context.Context, tenantName string, sp *spec, n *store.Notification) error {
	method, target := http.MethodPost, sp.endpoint
	var body []byte
	if sp.payload != "" {
		target = strings.TrimRight(sp.endpoint, "/") + "/" + n.Type + "/" + n.ID
		method = http.MethodDelete
		if n.Method != "DELETE" {
			method = http.MethodPut
			var err error
			if body, err = e.payload(ctx, tenantName, sp, n); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notification request: %w", err)
	}
	for k, v := range sp.headers {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", sp.payload)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s: the endpoint answered %s", method, target, resp.Status)
	}
	return nil
}

// payload is the version as stored, in the subscription's format.
func (e *Engine) payload(ctx context.Context, tenantName string, sp *spec, n *store.Notification) ([]byte, error) {
	r, err := e.st.VRead(ctx, tenantName, n.Type, n.ID, strconv.Itoa(n.VID))
	if err != nil {
		return nil, fmt.Errorf("read %s/%s/_history/%d: %w", n.Type, n.ID, n.VID, err)
	}
	if sp.payload != PayloadXML {
		return r.JSON, nil
	}
	x, err := fhirxml.FromJSON(r.JSON, fhirxml.WriteOptions{})
	if err != nil {
		return nil, fmt.Errorf("render %s/%s as XML: %w", n.Type, n.ID, err)
	}
	return x, nil
}
