package subscription

import (
	"context"
	"embed"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fhirstore/search"
	"fhirstore/store"
)

//go:embed builtin/*.json
var builtinFS embed.FS

// Topics finds the SubscriptionTopics a tenant's subscriptions may name:
// the built-in ones, which every tenant has, and the tenant's own, stored
// as Basic resources.
type Topics struct {
	reg     *search.Registry
	builtin map[string]*Topic
	st      atomic.Pointer[store.Store]

	mu     sync.Mutex
	cached map[string]cachedTopics // by tenant
}

// cachedTopics is a tenant's stored topics as read at a moment.
type cachedTopics struct {
	list []*Topic
	at   time.Time
}

// topicsTTL is how long a tenant's stored topics are reused: a topic
// written is forgotten at once (by the validator before its commit, by
// the engine after), the TTL covers a read between the two.
const topicsTTL = 2 * time.Second

// NewTopics reads the built-in topics; it finds the stored ones once an
// Engine started with it (Config.Topics) runs.
func NewTopics(reg *search.Registry) (*Topics, error) {
	t := &Topics{reg: reg, builtin: map[string]*Topic{}, cached: map[string]cachedTopics{}}
	files, err := builtinFS.ReadDir("builtin")
	if err != nil {
		return nil, fmt.Errorf("read built-in topics: %w", err)
	}
	for _, f := range files {
		body, err := builtinFS.ReadFile("builtin/" + f.Name())
		if err != nil {
			return nil, fmt.Errorf("read built-in topic %s: %w", f.Name(), err)
		}
		topic, issues := ParseTopic(reg, body)
		if len(issues) > 0 {
			return nil, fmt.Errorf("built-in topic %s: %s at %s", f.Name(), issues[0].Diagnostics, issues[0].Expression)
		}
		topic.ID = ""
		t.builtin[topic.URL] = topic
	}
	return t, nil
}

func (t *Topics) attach(st *store.Store) { t.st.Store(st) }

// Builtin lists the canonicals of the built-in topics.
func (t *Topics) Builtin() []string {
	var out []string
	for u := range t.builtin {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// topicSearch is the search of a tenant's stored topics.
var topicSearch = url.Values{"code": {fhirTypesCS + "|SubscriptionTopic"}, "_count": {"100"}}

// List returns the tenant's topics, built-in ones first; stored ones that
// do not check out are left out.
func (t *Topics) List(ctx context.Context, tenant string) ([]*Topic, error) {
	var out []*Topic
	for _, u := range t.Builtin() {
		out = append(out, t.builtin[u])
	}
	stored, err := t.stored(ctx, tenant)
	return append(out, stored...), err
}

// forget drops the tenant's cached topics after a topic changed.
func (t *Topics) forget(tenant string) {
	t.mu.Lock()
	delete(t.cached, tenant)
	t.mu.Unlock()
}

// stored returns the tenant's stored topics that check out, from the
// cache while it is fresh.
func (t *Topics) stored(ctx context.Context, tenant string) ([]*Topic, error) {
	t.mu.Lock()
	c, ok := t.cached[tenant]
	t.mu.Unlock()
	if ok && time.Since(c.at) < topicsTTL {
		return c.list, nil
	}
	st := t.st.Load()
	if st == nil {
		return nil, nil
	}
	at := time.Now()
	q, err := t.reg.Parse("Basic", topicSearch, search.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("search topics: %w", err)
	}
	var out []*Topic
	for {
		page, err := st.Search(ctx, tenant, q)
		if err != nil {
			return nil, fmt.Errorf("search topics of %s: %w", tenant, err)
		}
		for _, r := range page.Entries {
			if topic, issues := ParseTopic(t.reg, r.JSON); len(issues) == 0 && t.builtin[topic.URL] == nil {
				out = append(out, topic)
			}
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	t.mu.Lock()
	t.cached[tenant] = cachedTopics{list: out, at: at}
	t.mu.Unlock()
	return out, nil
}

// Find returns the tenant's topic of canonical u (nil when it has none).
// A canonical may name a version after a bar, which is ignored.
func (t *Topics) Find(ctx context.Context, tenant, u string) (*Topic, error) {
	u, _, _ = cutVersion(u)
	if b := t.builtin[u]; b != nil {
		return b, nil
	}
	for fresh := false; ; fresh = true {
		list, err := t.stored(ctx, tenant)
		if err != nil {
			return nil, err
		}
		for _, topic := range list {
			if topic.URL == u {
				return topic, nil
			}
		}
		if fresh {
			return nil, nil
		}
		t.forget(tenant) // perhaps stored since the tenant's topics were read
	}
}

// cutVersion splits canonical|version.
func cutVersion(u string) (string, string, bool) {
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] == '|' {
			return u[:i], u[i+1:], true
		}
	}
	return u, "", false
}
