package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/server/auth"
)

// TopicService serves topic-based subscriptions (the Subscriptions R5
// Backport IG): their operations, their topics and the websocket channel.
type TopicService interface {
	// Status is $status of the subscriptions ids.
	Status(ctx context.Context, tenant string, ids []string) (map[string]any, error)
	// Events is $events of subscription id.
	Events(ctx context.Context, tenant, id string, since, until int64, content string) (map[string]any, error)
	// BindingToken is $get-ws-binding-token of the subscriptions ids.
	BindingToken(ctx context.Context, tenant string, ids []string, websocketURL string) (map[string]any, error)
	// TopicCanonicals lists the tenant's topics.
	TopicCanonicals(ctx context.Context, tenant string) ([]string, error)
	// TopicResources lists the resource types a notification of a topic
	// may carry (found is false for a topic the tenant does not have).
	TopicResources(ctx context.Context, tenant, canonical string) (types []string, found bool, err error)
	// ServeWebsocket serves a websocket connection of tenant.
	ServeWebsocket(w http.ResponseWriter, r *http.Request, tenant string)
}

// SubscriptionSocketPath is where the websocket channel is served.
const SubscriptionSocketPath = "/fhir-ws/subscriptions"

// subscriptionOps are the operations of topic-based subscriptions.
var subscriptionOps = map[string]bool{"$status": true, "$events": true, "$get-ws-binding-token": true}

// subscriptionOpRoutes serve them by GET or POST.
var subscriptionOpRoutes = map[string]route{http.MethodGet: subscriptionOpRoute, http.MethodPost: subscriptionOpRoute}

// subscriptionOpRoute serves Subscription/$status, Subscription/[id]/$status,
// Subscription/[id]/$events and $get-ws-binding-token: read access to
// Subscription is needed, and nothing is written.
func subscriptionOpRoute(s *Server, c *gin.Context, segs []string) {
	op := segs[len(segs)-1]
	switch {
	case s.cfg.Topics == nil:
		s.notSupported(c, "topic-based subscriptions are not served")
		return
	case segs[0] != "Subscription":
		s.abort(c, fail(http.StatusNotFound, "not-supported", op+" is an operation on Subscription, not "+segs[0], ""))
		return
	case op == "$events" && len(segs) != 3:
		s.abort(c, fail(http.StatusNotFound, "not-supported", "$events is an operation on one Subscription: Subscription/[id]/$events", ""))
		return
	}
	if _, err := s.permit(c, "Subscription", auth.Read); err != nil {
		s.abort(c, err)
		return
	}
	params, err := s.opParameters(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	ids := params["id"]
	if len(segs) == 3 {
		ids = []string{segs[1]}
	}
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	var out map[string]any
	switch op {
	case "$status":
		out, err = s.cfg.Topics.Status(ctx, tenant, ids)
	case "$events":
		var since, until int64
		if since, err = eventNumber(params, "eventsSinceNumber"); err == nil {
			if until, err = eventNumber(params, "eventsUntilNumber"); err == nil {
				out, err = s.cfg.Topics.Events(ctx, tenant, ids[0], since, until, first(params["content"]))
			}
		}
	case "$get-ws-binding-token":
		out, err = s.cfg.Topics.BindingToken(ctx, tenant, ids, socketURL(c))
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, out)
}

// opParameters reads an operation's parameters from the query and, for a
// POST, from a Parameters body (simple values only); repeated and
// comma-separated values are split.
func (s *Server) opParameters(c *gin.Context) (map[string][]string, error) {
	out := map[string][]string{}
	for k, vs := range c.Request.URL.Query() {
		for _, v := range vs {
			out[k] = append(out[k], strings.Split(v, ",")...)
		}
	}
	if c.Request.Method != http.MethodPost || c.Request.ContentLength == 0 {
		return out, nil
	}
	body, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	var p struct {
		ResourceType string `json:"resourceType"`
		Parameter    []map[string]any
	}
	if err := json.Unmarshal(body, &p); err != nil || p.ResourceType != "Parameters" {
		return nil, fail(http.StatusBadRequest, "invalid", "the body must be a Parameters resource", "Parameters")
	}
	for _, prm := range p.Parameter {
		name, _ := prm["name"].(string)
		for k, v := range prm {
			if strings.HasPrefix(k, "value") {
				switch x := v.(type) {
				case string:
					out[name] = append(out[name], x)
				case float64:
					out[name] = append(out[name], strconv.FormatFloat(x, 'f', -1, 64))
				}
			}
		}
	}
	return out, nil
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// eventNumber reads an event number parameter (0 when absent).
func eventNumber(params map[string][]string, name string) (int64, error) {
	v := first(params[name])
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fail(http.StatusBadRequest, "invalid", name+" must be a non-negative integer, not "+quote(v), name)
	}
	return n, nil
}

// socketURL is the websocket channel's address on the host the client used.
func socketURL(c *gin.Context) string {
	scheme := "ws"
	if c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https") {
		scheme = "wss"
	}
	return scheme + "://" + c.Request.Host + SubscriptionSocketPath
}

// subscriptionSocket serves the websocket channel; the binding token sent
// over it authorizes, so no bearer token is asked for.
func (s *Server) subscriptionSocket(c *gin.Context) {
	s.cfg.Topics.ServeWebsocket(c.Writer, c.Request, c.GetString(tenantKey))
	c.Abort()
}

// topicCanonicalExt lists a topic in the CapabilityStatement.
const topicCanonicalExt = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/capabilitystatement-subscriptiontopic-canonical"

// addTopicCapabilities lists the tenant's topics on Subscription, with the
// topic operations.
func (s *Server) addTopicCapabilities(ctx context.Context, cs map[string]any, tenant string) {
	if s.cfg.Topics == nil {
		return
	}
	urls, err := s.cfg.Topics.TopicCanonicals(ctx, tenant)
	if err != nil {
		s.log.Warn("list the tenant's topics for the CapabilityStatement", zap.String("tenant", tenant), zap.Error(err))
	}
	for _, r := range cs["rest"].([]map[string]any)[0]["resource"].([]map[string]any) {
		if r["type"] != "Subscription" {
			continue
		}
		var exts []any
		for _, u := range urls {
			exts = append(exts, map[string]any{"url": topicCanonicalExt, "valueCanonical": u})
		}
		r["extension"] = exts
		r["supportedProfile"] = append(asList(r["supportedProfile"]), "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription")
		ops, _ := r["operation"].([]map[string]string)
		r["operation"] = append(ops[:len(ops):len(ops)],
			map[string]string{"name": "status", "definition": "http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status"},
			map[string]string{"name": "events", "definition": "http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events"},
			map[string]string{"name": "get-ws-binding-token", "definition": "http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-get-ws-binding-token"})
	}
}

func asList(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out
	}
	return nil
}
