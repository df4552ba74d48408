package subscription

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"fhirstore/search"
	"fhirstore/store"
)

// Channel types, payload contents and extensions of topic-based
// subscriptions (the Subscriptions R5 Backport IG).
const (
	Websocket         = "websocket"
	ContentEmpty      = "empty"
	ContentIDOnly     = "id-only"
	ContentFull       = "full-resource"
	extFilterCriteria = backportSD + "backport-filter-criteria"
	extHeartbeat      = backportSD + "backport-heartbeat-period"
	extTimeout        = backportSD + "backport-timeout"
	extMaxCount       = backportSD + "backport-max-count"
	extContent        = backportSD + "backport-payload-content"
	// ProfileSubscription is the profile of a topic-based Subscription.
	ProfileSubscription = backportSD + "backport-subscription"
)

// topicSub is what a topic-based subscription adds to its spec.
type topicSub struct {
	url       string
	topic     *Topic // nil when the checker could not look it up
	channel   string
	content   string
	heartbeat time.Duration
	timeout   time.Duration
	maxCount  int
	// filters are the subscription's filters by resource type, filterQ
	// their searches; interest is the search a change of a type must be
	// able to match to be recorded (absent: every change of the type).
	filters  map[string]url.Values
	filterQ  map[string]*search.Query
	interest map[string]*search.Query
}

// topicDocument is the part of a topic-based Subscription the engine reads.
type topicDocument struct {
	Meta struct {
		Profile []string `json:"profile"`
	} `json:"meta"`
	Criteria  string `json:"criteria"`
	CriteriaX struct {
		Extension []extension `json:"extension"`
	} `json:"_criteria"`
	Channel struct {
		Extension []extension `json:"extension"`
		PayloadX  struct {
			Extension []extension `json:"extension"`
		} `json:"_payload"`
	} `json:"channel"`
}

// isTopicCriteria tells whether a Subscription's criteria names a topic
// (a canonical URL) rather than a search (Type?parameters).
func isTopicCriteria(criteria string) bool {
	typ, _, _ := strings.Cut(criteria, "?")
	return strings.Contains(typ, "://") || strings.HasPrefix(typ, "urn:")
}

// parseTopicSub checks a topic-based Subscription: its topic, filters,
// channel, payload content and the backport extensions.
func (c *checker) parseTopicSub(ctx context.Context, tenant string, body []byte, d *document) (*spec, []store.Issue) {
	var td topicDocument
	if err := json.Unmarshal(body, &td); err != nil {
		return nil, []store.Issue{issue("", "not a Subscription: %v", err)}
	}
	ts := &topicSub{url: d.Criteria, channel: d.Channel.Type, content: ContentEmpty, maxCount: 1, filters: map[string]url.Values{}}
	sp := &spec{id: d.ID, status: d.Status, endpoint: d.Channel.Endpoint, headers: http.Header{}, topic: ts}
	var issues []store.Issue
	add := func(is ...store.Issue) { issues = append(issues, is...) }
	if c.topics != nil {
		topic, err := c.topics.Find(ctx, tenant, d.Criteria)
		switch {
		case err != nil:
			add(issue("criteria", "the topic %s cannot be looked up: %v", d.Criteria, err))
		case topic == nil:
			add(issue("criteria", "the topic %s is not known to this server; the topics are listed in the CapabilityStatement", d.Criteria))
		case topic.Status == TopicRetired:
			add(issue("criteria", "the topic %s is retired", d.Criteria))
		default:
			ts.topic = topic
		}
	}
	add(ts.parseFilters(c.reg, td.CriteriaX.Extension)...)
	switch d.Channel.Type {
	case RestHook:
		if err := c.allow.Check(d.Channel.Endpoint); err != nil {
			add(issue("channel.endpoint", "%v", err))
		}
	case Websocket:
	default:
		add(issue("channel.type", "channel type %q is not supported for topic-based subscriptions; the supported channel types are %s and %s", d.Channel.Type, RestHook, Websocket))
	}
	var err error
	if sp.payload, err = payload(d.Channel.Payload); err != nil || sp.payload == "" || (ts.channel == Websocket && sp.payload != PayloadJSON) {
		add(issue("channel.payload", "payload %q is not supported; use %s (or %s on a rest-hook)", d.Channel.Payload, PayloadJSON, PayloadXML))
	}
	add(ts.parseChannelExtensions(td.Channel.Extension, td.Channel.PayloadX.Extension)...)
	add(c.headers(sp, d.Channel.Header)...)
	if d.End != "" {
		if sp.end, err = parseInstant(d.End); err != nil {
			add(issue("end", "%v", err))
		}
	}
	ts.compile(c.reg)
	if d.Status != StatusRequested && d.Status != StatusActive {
		return sp, nil
	}
	return sp, issues
}

// parseFilters reads the backport-filter-criteria extensions: each a
// search ([Type?]parameters) on parameters the topic's canFilterBy allows.
func (ts *topicSub) parseFilters(reg *search.Registry, exts []extension) []store.Issue {
	var issues []store.Issue
	for i, x := range exts {
		if x.URL != extFilterCriteria {
			continue
		}
		at := fmt.Sprintf("criteria.extension[%d].value", i)
		v, _ := x.str()
		typ, query, found := strings.Cut(v, "?")
		if !found {
			typ, query = "", v
		}
		if typ == "" && ts.topic != nil && len(ts.topic.Triggers) == 1 {
			typ = ts.topic.Triggers[0].Resource
		}
		if typ == "" {
			issues = append(issues, issue(at, "filter %q must name its resource type (Type?parameter=value)", v))
			continue
		}
		values, err := url.ParseQuery(query)
		if err != nil || len(values) == 0 {
			issues = append(issues, issue(at, "filter %q is not a search: Type?parameter=value", v))
			continue
		}
		if ts.topic != nil {
			if bad := ts.unfilterable(typ, values); bad != "" {
				issues = append(issues, issue(at, "filter %q: the topic %s does not allow filtering %s by %s (see its canFilterBy)", v, ts.url, typ, bad))
				continue
			}
		}
		if _, err := criteriaQuery(reg, typ, query); err != nil {
			issues = append(issues, issue(at, "filter %q: %v", v, err))
			continue
		}
		if ts.filters[typ] == nil {
			ts.filters[typ] = url.Values{}
		}
		for k, vs := range values {
			ts.filters[typ][k] = append(ts.filters[typ][k], vs...)
		}
	}
	return issues
}

// unfilterable names the first parameter of values the topic does not let
// subscribers filter typ by ("" when it allows them all).
func (ts *topicSub) unfilterable(typ string, values url.Values) string {
	if ts.topic.trigger(typ) == nil {
		return typ + " (it has no trigger for that type)"
	}
	for name := range values {
		code, _, _ := strings.Cut(name, ":")
		if !ts.topic.canFilter(typ, code) {
			return code
		}
	}
	return ""
}

func (ts *topicSub) parseChannelExtensions(channel, payload []extension) []store.Issue {
	var issues []store.Issue
	for i, x := range channel {
		at := fmt.Sprintf("channel.extension[%d].value", i)
		switch x.URL {
		case extHeartbeat, extTimeout:
			if x.ValueUnsigned == nil || *x.ValueUnsigned < 0 {
				issues = append(issues, issue(at, "%s takes a valueUnsignedInt (seconds)", x.URL))
				continue
			}
			d := time.Duration(*x.ValueUnsigned) * time.Second
			if x.URL == extHeartbeat {
				ts.heartbeat = d
			} else {
				ts.timeout = d
			}
		case extMaxCount:
			if x.ValuePositive == nil || *x.ValuePositive < 1 {
				issues = append(issues, issue(at, "%s takes a valuePositiveInt", x.URL))
				continue
			}
			ts.maxCount = int(min(*x.ValuePositive, 1000))
		}
	}
	for i, x := range payload {
		if x.URL != extContent {
			continue
		}
		v, _ := x.str()
		if v != ContentEmpty && v != ContentIDOnly && v != ContentFull {
			issues = append(issues, issue(fmt.Sprintf("channel.payload.extension[%d].value", i), "payload content %q is not one of empty, id-only, full-resource", v))
			continue
		}
		ts.content = v
	}
	return issues
}

// headers reads the channel's headers into sp.
func (c *checker) headers(sp *spec, headers []string) []store.Issue {
	var issues []store.Issue
	for i, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || !validHeaderName(name) {
			issues = append(issues, issue(fmt.Sprintf("channel.header[%d]", i), "header %q is not of the form Name: value", h))
			continue
		}
		sp.headers.Add(name, strings.TrimSpace(value))
	}
	return issues
}

// compile prepares the filter searches and the interest of each trigger
// type: the current criteria with the filters when every event needs
// both, the filters alone otherwise.
func (ts *topicSub) compile(reg *search.Registry) {
	ts.filterQ, ts.interest = map[string]*search.Query{}, map[string]*search.Query{}
	for typ, values := range ts.filters {
		if q, err := reg.Parse(typ, values, search.ParseOptions{}); err == nil {
			ts.filterQ[typ] = q
		}
	}
	if ts.topic == nil {
		return
	}
	for _, tr := range ts.topic.Triggers {
		values := maps.Clone(ts.filters[tr.Resource])
		if values == nil {
			values = url.Values{}
		}
		if tr.Current != nil && (tr.RequireBoth || tr.Previous == nil) {
			for k, vs := range tr.Current {
				values[k] = append(values[k], vs...)
			}
		}
		if len(values) == 0 {
			continue
		}
		if q, err := reg.Parse(tr.Resource, values, search.ParseOptions{}); err == nil {
			ts.interest[tr.Resource] = q
		}
	}
}

// interestIn is the search changes of typ must be able to match to be
// recorded for the subscription; wanted is false when the topic has no
// trigger on typ, and q nil when every change of typ is.
func (ts *topicSub) interestIn(typ string) (q *search.Query, wanted bool) {
	if ts.topic == nil || ts.topic.trigger(typ) == nil {
		return nil, false
	}
	return ts.interest[typ], true
}
