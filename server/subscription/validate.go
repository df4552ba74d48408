package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/store"
)

// Channel types and payloads the server supports.
const (
	RestHook    = "rest-hook"
	PayloadJSON = "application/fhir+json"
	PayloadXML  = "application/fhir+xml"
)

// Statuses of a Subscription.
const (
	StatusRequested = "requested"
	StatusActive    = "active"
	StatusError     = "error"
	StatusOff       = "off"
)

// document is the part of a Subscription resource the engine reads.
type document struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Criteria string `json:"criteria"`
	End      string `json:"end"`
	Channel  struct {
		Type     string   `json:"type"`
		Endpoint string   `json:"endpoint"`
		Payload  string   `json:"payload"`
		Header   []string `json:"header"`
	} `json:"channel"`
}

// spec is a checked subscription, ready to match and deliver.
type spec struct {
	id       string
	version  int
	status   string
	typ      string
	query    *search.Query
	endpoint string
	payload  string
	headers  http.Header
	end      time.Time // zero: no end
	topic    *topicSub // nil: a criteria-based subscription
}

// matchable tells whether the engine can match changes for the
// subscription: it has a search, or a topic.
func (s *spec) matchable() bool { return s.query != nil || s.topic != nil }

// deliverable tells whether changes are queued for the subscription:
// active ones send them, those in error keep them until resumed.
func (s *spec) deliverable(now time.Time) bool {
	return (s.status == StatusActive || s.status == StatusError) && !s.ended(now)
}

func (s *spec) ended(now time.Time) bool { return !s.end.IsZero() && !now.Before(s.end) }

// checker validates Subscriptions.
type checker struct {
	reg    *search.Registry
	allow  *AllowList
	topics *Topics // nil: topics are looked up when the engine activates
}

// issue is one problem of a Subscription at a FHIRPath location.
func issue(expr, format string, args ...any) store.Issue {
	return store.Issue{Severity: "error", Code: "value", Diagnostics: fmt.Sprintf(format, args...), Expression: "Subscription." + expr}
}

// parse reads a Subscription's JSON and checks it when its status asks
// for delivery (requested or active); issues say what is wrong.
func (c *checker) parse(ctx context.Context, tenant string, body []byte) (*spec, []store.Issue) {
	var d document
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, []store.Issue{issue("", "not a Subscription: %v", err)}
	}
	if isTopicCriteria(d.Criteria) {
		return c.parseTopicSub(ctx, tenant, body, &d)
	}
	sp := &spec{id: d.ID, status: d.Status, endpoint: d.Channel.Endpoint, headers: http.Header{}}
	var issues []store.Issue
	add := func(is ...store.Issue) { issues = append(issues, is...) }
	typ, q, err := c.criteria(d.Criteria)
	if err != nil {
		add(issue("criteria", "%v", err))
	}
	sp.typ, sp.query = typ, q
	if d.Channel.Type != RestHook {
		add(issue("channel.type", "channel type %q is not supported; the supported channel type is %s", d.Channel.Type, RestHook))
	}
	if err := c.allow.Check(d.Channel.Endpoint); err != nil {
		add(issue("channel.endpoint", "%v", err))
	}
	if sp.payload, err = payload(d.Channel.Payload); err != nil {
		add(issue("channel.payload", "%v", err))
	}
	for i, h := range d.Channel.Header {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || !validHeaderName(name) {
			add(issue(fmt.Sprintf("channel.header[%d]", i), "header %q is not of the form Name: value", h))
			continue
		}
		sp.headers.Add(name, strings.TrimSpace(value))
	}
	if d.End != "" {
		if sp.end, err = parseInstant(d.End); err != nil {
			add(issue("end", "%v", err))
		}
	}
	if d.Status != StatusRequested && d.Status != StatusActive {
		return sp, nil // not asking for delivery: stored as it is
	}
	return sp, issues
}

// criteria parses Type?query as a strict search of a known type.
func (c *checker) criteria(s string) (string, *search.Query, error) {
	typ, query, _ := strings.Cut(s, "?")
	if typ == "" {
		return "", nil, errors.New("criteria must be a search: Type?parameters")
	}
	if !fhirschema.IsResourceType(typ) {
		return "", nil, fmt.Errorf("criteria %q: %q is not a resource type", s, typ)
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, fmt.Errorf("criteria %q: %v", s, err)
	}
	for name := range values {
		code, _, _ := strings.Cut(name, ":")
		if strings.HasPrefix(code, "_include") || strings.HasPrefix(code, "_revinclude") || code == "_sort" || code == "_count" || code == "_summary" || code == "_elements" {
			return "", nil, fmt.Errorf("criteria %q: %s selects nothing; use search parameters only", s, name)
		}
	}
	q, err := c.reg.Parse(typ, values, search.ParseOptions{Strict: true})
	if err != nil {
		return "", nil, fmt.Errorf("criteria %q: %v", s, err)
	}
	return typ, q, nil
}

func payload(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(p)
	if err == nil && (mt == PayloadJSON || mt == PayloadXML) {
		return mt, nil
	}
	return "", fmt.Errorf("payload %q is not supported; leave it out (notify only) or use %s or %s", p, PayloadJSON, PayloadXML)
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 126 || r <= 32 || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return true
}

func parseInstant(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("end %q is not a FHIR instant", s)
}

// Validator checks every Subscription written whose status asks for
// delivery (criteria, channel type, endpoint against allow, payload,
// headers) on top of next, which checks every resource.
func Validator(reg *search.Registry, allow *AllowList, next store.Validator) store.Validator {
	return TopicValidator(reg, allow, nil, next)
}

// TopicValidator is Validator that also checks SubscriptionTopics stored
// as Basic resources and looks up in topics the topic each topic-based
// Subscription names (nil topics: built-in and stored topics are looked
// up when the subscription is activated instead).
func TopicValidator(reg *search.Registry, allow *AllowList, topics *Topics, next store.Validator) store.Validator {
	c := &checker{reg: reg, allow: allow, topics: topics}
	return func(ctx context.Context, in store.Validation) ([]store.Issue, error) {
		var warnings []store.Issue
		if next != nil {
			var err error
			if warnings, err = next(ctx, in); err != nil {
				return nil, err
			}
		}
		if in.Type == "Basic" {
			return warnings, c.checkTopic(ctx, in)
		}
		if in.Type != "Subscription" {
			return warnings, nil
		}
		if sp, issues := c.parse(ctx, in.Tenant, in.Body); len(issues) > 0 {
			return nil, &store.InvalidError{Syntax: sp == nil || sp.topic == nil, Issues: issues}
		}
		return warnings, nil
	}
}
