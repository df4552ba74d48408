package subscription

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"fhirstore/store"
)

// activate answers a requested subscription: active when it checks out,
// error (with the reason) otherwise.
func (e *Engine) activate(ctx context.Context, tenantName string, r *store.Resource, sp *spec, issues []store.Issue) error {
	status, reason := StatusActive, ""
	if sp == nil || !sp.matchable() || len(issues) > 0 {
		status, reason = StatusError, "the subscription cannot be read"
		if len(issues) > 0 {
			reason = issues[0].Diagnostics
		}
	} else {
		if wait := e.announce(tenantName, r); wait > 0 {
			return nil // activated once every server records its changes
		}
		if sp.topic != nil && sp.topic.channel == RestHook {
			e.handshake(tenantName, r, sp) // activated (or not) when the endpoint answered
			return nil
		}
		// Known as active before a client can read it so: writes that
		// follow the client's read of the active status are announced.
		sp.id, sp.version, sp.status = r.ID, r.VersionID+1, StatusActive
		e.put(tenantName, sp)
	}
	written, err := e.setStatus(ctx, tenantName, r, status, reason)
	if err != nil || written == nil {
		return err
	}
	return e.update(ctx, tenantName, written)
}

// announce tells how long activating requested version r must wait: on a
// database other servers share, they record only the changes of the
// subscriptions they know, and they read them every Poll, so r turns
// active two Polls after this engine first saw it (the matcher reads the
// subscriptions again then). An engine that owns its database activates
// at once.
func (e *Engine) announce(tenantName string, r *store.Resource) time.Duration {
	if e.cfg.Exclusive {
		return 0
	}
	t := e.tenant(tenantName)
	key := r.ID + "/" + strconv.Itoa(r.VersionID)
	now := time.Now()
	e.mu.Lock()
	first, seen := t.requested[key]
	if !seen {
		first = now
		t.requested[key] = now
	}
	e.mu.Unlock()
	wait := first.Add(2 * e.cfg.Poll).Sub(now)
	if wait <= 0 {
		e.mu.Lock()
		delete(t.requested, key)
		e.mu.Unlock()
		return 0
	}
	if !seen {
		time.AfterFunc(wait+10*time.Millisecond, func() { // past the wait when it runs
			t.reloadNow.Store(true)
			e.Recorded(tenantName)
		})
	}
	return wait
}

// setError puts a subscription in error with reason, unless it changed
// since sp was read.
func (e *Engine) setError(ctx context.Context, tenantName string, sp *spec, reason string) error {
	r, err := e.st.VRead(ctx, tenantName, "Subscription", sp.id, strconv.Itoa(sp.version))
	if err != nil {
		return nil // deleted: the deletion is on its way through the outbox
	}
	written, err := e.setStatus(ctx, tenantName, r, StatusError, reason)
	if err != nil || written == nil {
		return err
	}
	return e.update(ctx, tenantName, written)
}

// errNotCurrent: the version to change is committed but its current row
// is not written yet (a writer between its two inserts).
var errNotCurrent = errors.New("the subscription's current version is not readable yet")

// setStatus writes the next version of r with status and error set (the
// error element removed when reason is empty). It writes nothing and
// returns nil when a newer version than r exists.
func (e *Engine) setStatus(ctx context.Context, tenantName string, r *store.Resource, status, reason string) (*store.Resource, error) {
	body, err := setMembers(r.JSON, map[string]any{"status": status, "error": reason})
	if err != nil {
		return nil, err
	}
	vid := r.VersionID
	written, _, err := e.st.Update(ctx, tenantName, "Subscription", r.ID, body, store.WriteOptions{IfMatch: &vid})
	if errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrConflict) {
		cur, rerr := e.st.Read(ctx, tenantName, "Subscription", r.ID)
		if (rerr == nil || errors.Is(rerr, store.ErrGone)) && cur != nil && cur.VersionID > r.VersionID {
			return nil, nil // changed since: the change is on its way through the outbox
		}
		return nil, fmt.Errorf("set status of Subscription/%s: %w", r.ID, errNotCurrent)
	}
	if err != nil {
		return nil, err
	}
	e.log.Info("subscription status", zap.String("tenant", tenantName), zap.String("id", r.ID), zap.String("status", status), zap.String("error", reason))
	return written, nil
}

// setMembers sets top-level members of a JSON object, keeping the order of
// the others; new ones go last, and an empty string removes a member.
func setMembers(body []byte, set map[string]any) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("subscription is not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	done := map[string]bool{}
	member := func(k string, v []byte) {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	put := func(k string) error {
		done[k] = true
		if s, ok := set[k].(string); ok && s == "" {
			return nil
		}
		v, err := json.Marshal(set[k])
		if err == nil {
			member(k, v)
		}
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read subscription: %w", err)
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("read subscription: %w", err)
		}
		if _, ok := set[k]; ok {
			if err := put(k); err != nil {
				return nil, err
			}
			continue
		}
		member(k, raw)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !done[k] {
			if err := put(k); err != nil {
				return nil, err
			}
		}
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
