package subscription

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// SocketConfig tunes the websocket channel.
type SocketConfig struct {
	// TokenTTL is how long a binding token may be used to bind (default 5m).
	TokenTTL time.Duration
	// Queue is how many messages may wait for a connection; a client that
	// lets more pile up is disconnected (default 64).
	Queue int
	// WriteTimeout bounds the sending of one message; a client that does
	// not take it in that time is disconnected (default 10s).
	WriteTimeout time.Duration
}

// sameBinding tells whether a topic-based subscription still delivers
// what its websockets were bound to: same topic, channel, content and
// filters.
func sameBinding(a, b *topicSub) bool {
	return b != nil && a.url == b.url && a.channel == b.channel && a.content == b.content && reflect.DeepEqual(a.filters, b.filters)
}

// hub binds websocket connections to subscriptions and hands them their
// notifications.
type hub struct {
	e   *Engine
	cfg SocketConfig

	mu     sync.Mutex
	tokens map[string]*binding
	bound  map[string]map[*socket]bool // tenant/subscription -> connections
	all    map[*socket]bool
}

// binding is what a binding token allows: binding to its subscriptions
// in its tenant until it expires.
type binding struct {
	tenant  string
	subs    []string
	expires time.Time
}

// socket is one websocket connection.
type socket struct {
	conn   *websocket.Conn
	tenant string
	out    chan []byte
	ctx    context.Context
	cancel context.CancelFunc
	subs   map[string]bool // under hub.mu
}

func newHub(e *Engine, cfg SocketConfig) *hub {
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = 5 * time.Minute
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 64
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	return &hub{e: e, cfg: cfg, tokens: map[string]*binding{}, bound: map[string]map[*socket]bool{}, all: map[*socket]bool{}}
}

// issue makes a binding token for subs of tenant.
func (h *hub) issue(tenant string, subs []string) (string, time.Time) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for t, bd := range h.tokens { // expired ones go
		if now.After(bd.expires) {
			delete(h.tokens, t)
		}
	}
	exp := now.Add(h.cfg.TokenTTL)
	h.tokens[token] = &binding{tenant: tenant, subs: subs, expires: exp}
	return token, exp
}

// ServeWebsocket serves the websocket channel of tenant's topic-based
// subscriptions: the client binds with a token from
// $get-ws-binding-token, then receives each bound subscription's
// handshake, heartbeats and event notifications.
func (e *Engine) ServeWebsocket(w http.ResponseWriter, r *http.Request, tenant string) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // a binding token, not a cookie, authorizes
	if err != nil {
		return // Accept answered the client
	}
	conn.SetReadLimit(1 << 16)
	ctx, cancel := context.WithCancel(e.ctx)
	s := &socket{conn: conn, tenant: tenant, out: make(chan []byte, e.hub.cfg.Queue), ctx: ctx, cancel: cancel, subs: map[string]bool{}}
	if !e.hub.add(s) {
		cancel()
		conn.Close(websocket.StatusGoingAway, "the server is stopping")
		return
	}
	defer e.hub.drop(s)
	go e.hub.write(s)
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		e.hub.command(s, strings.TrimSpace(string(msg)))
	}
}

func (h *hub) add(s *socket) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.e.ctx.Err() != nil {
		return false
	}
	h.all[s] = true
	return true
}

// command handles one client message: bind-with-token (the JSON form
// {"type":"bind-with-token","payload":{"token":…}} or the text form
// "bind-with-token TOKEN") and ping.
func (h *hub) command(s *socket, msg string) {
	kind, token := msg, ""
	if strings.HasPrefix(msg, "{") {
		var m struct {
			Type    string `json:"type"`
			Payload struct {
				Token string `json:"token"`
			} `json:"payload"`
		}
		if json.Unmarshal([]byte(msg), &m) == nil {
			kind, token = m.Type, m.Payload.Token
		}
	} else if k, t, ok := strings.Cut(msg, " "); ok {
		kind, token = k, strings.TrimSpace(t)
	}
	switch kind {
	case "bind-with-token":
		h.bind(s, token)
	case "ping":
		h.enqueue(s, []byte(`{"type":"pong"}`))
	default:
		h.enqueue(s, outcome("not-supported", "unknown message; send bind-with-token TOKEN or ping"))
	}
}

// bind binds s to the subscriptions of token and sends each a handshake.
func (h *hub) bind(s *socket, token string) {
	h.mu.Lock()
	b := h.tokens[token]
	if b == nil || time.Now().After(b.expires) || b.tenant != s.tenant {
		h.mu.Unlock()
		h.enqueue(s, outcome("security", "the binding token is not valid (unknown, expired or for another tenant)"))
		return
	}
	for _, id := range b.subs {
		key := s.tenant + "/" + id
		if h.bound[key] == nil {
			h.bound[key] = map[*socket]bool{}
		}
		h.bound[key][s] = true
		s.subs[id] = true
	}
	h.mu.Unlock()
	for _, id := range b.subs {
		h.e.socketHandshake(s, id)
	}
}

// socketHandshake sends s the handshake of subscription id.
func (e *Engine) socketHandshake(s *socket, id string) {
	sp := e.specOf(s.tenant, id)
	if sp == nil || sp.topic == nil {
		e.hub.enqueue(s, outcome("not-found", "subscription "+id+" is not an active topic-based subscription"))
		return
	}
	since, err := e.lastEvent(s.ctx, e.tenant(s.tenant), id)
	if err != nil {
		return
	}
	b, err := e.notification(s.ctx, s.tenant, sp, NoteHandshake, sp.status, since, nil, sp.topic.content)
	if err != nil {
		return
	}
	if body, err := json.Marshal(b); err == nil {
		e.hub.enqueue(s, body)
	}
}

// specOf is the known state of a subscription (nil when unknown).
func (e *Engine) specOf(tenant, id string) *spec {
	t := e.tenant(tenant)
	e.mu.RLock()
	defer e.mu.RUnlock()
	return t.subs[id]
}

// listened tells whether a connection is bound to the subscription.
func (h *hub) listened(tenant, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bound[tenant+"/"+id]) > 0
}

// deliver hands a notification to every connection bound to the
// subscription.
func (h *hub) deliver(tenant, id string, body []byte) {
	h.mu.Lock()
	var to []*socket
	for s := range h.bound[tenant+"/"+id] {
		to = append(to, s)
	}
	h.mu.Unlock()
	for _, s := range to {
		h.enqueue(s, body)
	}
}

// enqueue queues a message for s; a client that let the queue fill up is
// disconnected rather than buffered without bound.
func (h *hub) enqueue(s *socket, body []byte) {
	select {
	case s.out <- body:
	default:
		h.e.log.Info("websocket client too slow: disconnected", zap.String("tenant", s.tenant))
		s.end("too slow: notifications piled up")
	}
}

// write sends s its queued messages, each within the write timeout.
func (h *hub) write(s *socket) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case msg := <-s.out:
			ctx, cancel := context.WithTimeout(s.ctx, h.cfg.WriteTimeout)
			err := s.conn.Write(ctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					h.e.log.Info("websocket write failed: disconnected", zap.String("tenant", s.tenant), zap.Error(err))
				}
				s.end("a notification could not be sent in time")
				return
			}
		}
	}
}

// end closes the connection with a reason, without waiting for the client.
func (s *socket) end(reason string) {
	go func() {
		_ = s.conn.Close(websocket.StatusPolicyViolation, reason)
		s.cancel()
	}()
}

// drop forgets a connection that ended.
func (h *hub) drop(s *socket) {
	s.cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.all, s)
	for id := range s.subs {
		delete(h.bound[s.tenant+"/"+id], s)
		if len(h.bound[s.tenant+"/"+id]) == 0 {
			delete(h.bound, s.tenant+"/"+id)
		}
	}
	s.conn.CloseNow()
}

// unbindAll unbinds a subscription that ended or was deleted; connections
// left with no subscription are closed.
func (h *hub) unbindAll(tenant, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := tenant + "/" + id
	for s := range h.bound[key] {
		delete(s.subs, id)
		if len(s.subs) == 0 {
			s.end("the subscription is no longer available")
		}
	}
	delete(h.bound, key)
}

// close ends every connection.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.all {
		s.cancel()
		s.conn.CloseNow()
	}
}

// outcome is an OperationOutcome message for a websocket client.
func outcome(code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"resourceType": "OperationOutcome", "issue": []any{map[string]any{"severity": "error", "code": code, "diagnostics": msg}}})
	return b
}
