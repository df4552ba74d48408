package subscription

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
	"fhirstore/search"
	"fhirstore/store"
)

// The cross-version extensions that carry an R5 SubscriptionTopic in an R4
// Basic resource, and the backport IG's canonical base.
const (
	topicExt    = "http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic."
	backportSD  = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/"
	fhirTypesCS = "http://hl7.org/fhir/fhir-types"
	coreSD      = "http://hl7.org/fhir/StructureDefinition/"
)

// Topic statuses (PublicationStatus).
const (
	TopicActive  = "active"
	TopicDraft   = "draft"
	TopicRetired = "retired"
)

// Topic is a checked SubscriptionTopic: what changes it reports and how
// subscribers may narrow and shape its notifications.
type Topic struct {
	// URL is the topic's canonical, which Subscription.criteria names.
	URL, Status, Title string
	// ID is the Basic resource that holds it (empty for a built-in one).
	ID          string
	Triggers    []*Trigger
	CanFilterBy []FilterDef
	Shapes      []Shape
}

// Trigger is a resourceTrigger: the changes of one resource type that
// raise an event.
type Trigger struct {
	Resource        string
	Interactions    map[string]bool // empty: create, update and delete
	Previous        url.Values      // nil: no previous criteria
	Current         url.Values      // nil: no current criteria
	ResultForCreate string          // test-passes or test-fails
	ResultForDelete string
	RequireBoth     bool
	FHIRPath        *fhirpath.Expr
}

// FilterDef is a canFilterBy: a search parameter of a resource type that
// subscriptions may filter on.
type FilterDef struct {
	Resource, Parameter string
}

// Shape is a notificationShape: what accompanies a focus of a type.
type Shape struct {
	Resource            string
	Include, RevInclude []string
}

// extension is an R4 extension as JSON holds it.
type extension struct {
	URL           string      `json:"url"`
	Extension     []extension `json:"extension"`
	ValueString   *string     `json:"valueString"`
	ValueURI      *string     `json:"valueUri"`
	ValueCanon    *string     `json:"valueCanonical"`
	ValueCode     *string     `json:"valueCode"`
	ValueMarkdown *string     `json:"valueMarkdown"`
	ValueBoolean  *bool       `json:"valueBoolean"`
	ValueUnsigned *int64      `json:"valueUnsignedInt"`
	ValuePositive *int64      `json:"valuePositiveInt"`
}

// str is the extension's string-like value.
func (x extension) str() (string, bool) {
	for _, v := range []*string{x.ValueString, x.ValueURI, x.ValueCanon, x.ValueCode, x.ValueMarkdown} {
		if v != nil {
			return *v, true
		}
	}
	return "", false
}

// basicTopic is the part of a Basic resource a topic is read from.
type basicTopic struct {
	ResourceType      string      `json:"resourceType"`
	ID                string      `json:"id"`
	Extension         []extension `json:"extension"`
	ModifierExtension []extension `json:"modifierExtension"`
	Code              struct {
		Coding []struct {
			System string `json:"system"`
			Code   string `json:"code"`
		} `json:"coding"`
	} `json:"code"`
}

// IsTopic tells whether a Basic resource's JSON is a SubscriptionTopic: its
// code is fhir-types SubscriptionTopic, or it carries the topic extensions.
func IsTopic(body []byte) bool {
	var b basicTopic
	if json.Unmarshal(body, &b) != nil {
		return false
	}
	return b.isTopic()
}

func (b *basicTopic) isTopic() bool {
	for _, c := range b.Code.Coding {
		if c.Code == "SubscriptionTopic" && (c.System == fhirTypesCS || c.System == "") {
			return true
		}
	}
	for _, x := range append(b.Extension, b.ModifierExtension...) {
		if strings.HasPrefix(x.URL, topicExt) {
			return true
		}
	}
	return false
}

// topicIssue is a problem of a topic at a FHIRPath location.
func topicIssue(expr, format string, args ...any) store.Issue {
	return store.Issue{Severity: "error", Code: "value", Diagnostics: fmt.Sprintf(format, args...), Expression: "Basic." + expr}
}

// ParseTopic reads a SubscriptionTopic from a Basic resource and checks
// it: the issues say what is wrong, each at its element.
func ParseTopic(reg *search.Registry, body []byte) (*Topic, []store.Issue) {
	var b basicTopic
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, []store.Issue{topicIssue("", "not a Basic resource: %v", err)}
	}
	t := &Topic{ID: b.ID}
	var issues []store.Issue
	add := func(is ...store.Issue) { issues = append(issues, is...) }
	for i, x := range b.ModifierExtension {
		if x.URL == topicExt+"status" {
			t.Status, _ = x.str()
			add(checkTopicStatus(t.Status, fmt.Sprintf("modifierExtension[%d].value", i))...)
		}
	}
	for i, x := range b.Extension {
		at := fmt.Sprintf("extension[%d]", i)
		switch strings.TrimPrefix(x.URL, topicExt) {
		case "url":
			t.URL, _ = x.str()
			if u, err := url.Parse(t.URL); err != nil || !u.IsAbs() {
				add(topicIssue(at+".value", "the topic url %q is not an absolute URI", t.URL))
			}
		case "status":
			t.Status, _ = x.str()
			add(checkTopicStatus(t.Status, at+".value")...)
		case "title":
			t.Title, _ = x.str()
		case "resourceTrigger":
			tr, is := parseTrigger(reg, x, at)
			add(is...)
			if tr != nil {
				t.Triggers = append(t.Triggers, tr)
			}
		case "canFilterBy":
			f, is := parseCanFilterBy(reg, x, at)
			add(is...)
			if f != nil {
				t.CanFilterBy = append(t.CanFilterBy, *f)
			}
		case "notificationShape":
			sh, is := parseShape(reg, x, at)
			add(is...)
			if sh != nil {
				t.Shapes = append(t.Shapes, *sh)
			}
		}
	}
	if t.URL == "" {
		add(topicIssue("extension", "a topic needs its canonical url (extension %surl)", topicExt))
	}
	if t.Status == "" {
		add(topicIssue("modifierExtension", "a topic needs its status (modifier extension %sstatus)", topicExt))
	}
	if len(t.Triggers) == 0 {
		add(topicIssue("extension", "a topic needs at least one resourceTrigger (extension %sresourceTrigger)", topicExt))
	}
	return t, issues
}

func checkTopicStatus(s, at string) []store.Issue {
	switch s {
	case TopicActive, TopicDraft, TopicRetired, "unknown":
		return nil
	}
	return []store.Issue{topicIssue(at, "topic status %q is not one of draft, active, retired, unknown", s)}
}

// resourceType reads a trigger's or filter's resource: a type name or the
// canonical of its core StructureDefinition.
func resourceType(s string) (string, bool) {
	t := strings.TrimPrefix(s, coreSD)
	return t, fhirschema.IsResourceType(t)
}

func parseTrigger(reg *search.Registry, x extension, at string) (*Trigger, []store.Issue) {
	tr := &Trigger{Interactions: map[string]bool{}, ResultForCreate: "test-fails", ResultForDelete: "test-fails"}
	var issues []store.Issue
	for j, sub := range x.Extension {
		sat := fmt.Sprintf("%s.extension[%d]", at, j)
		v, _ := sub.str()
		switch sub.URL {
		case "resource":
			typ, ok := resourceType(v)
			if !ok {
				issues = append(issues, topicIssue(sat+".value", "resource %q is not a FHIR R4 resource type", v))
			}
			tr.Resource = typ
		case "supportedInteraction":
			if v != "create" && v != "update" && v != "delete" {
				issues = append(issues, topicIssue(sat+".value", "supportedInteraction %q is not one of create, update, delete", v))
			}
			tr.Interactions[v] = true
		case "queryCriteria":
			issues = append(issues, tr.parseQueryCriteria(sub, sat)...)
		case "fhirPathCriteria":
			e, err := fhirpath.Compile(v)
			if err != nil {
				issues = append(issues, topicIssue(sat+".value", "fhirPathCriteria %q: %v", v, err))
			}
			tr.FHIRPath = e
		}
	}
	if tr.Resource == "" {
		return nil, append(issues, topicIssue(at, "a resourceTrigger needs its resource"))
	}
	for j, sub := range x.Extension {
		if sub.URL != "queryCriteria" {
			continue
		}
		for k, c := range sub.Extension {
			if c.URL != "previous" && c.URL != "current" {
				continue
			}
			v, _ := c.str()
			if _, err := criteriaQuery(reg, tr.Resource, v); err != nil {
				issues = append(issues, topicIssue(fmt.Sprintf("%s.extension[%d].extension[%d].value", at, j, k), "%s criteria %q: %v", c.URL, v, err))
			}
		}
	}
	return tr, issues
}

func (tr *Trigger) parseQueryCriteria(x extension, at string) []store.Issue {
	var issues []store.Issue
	for k, c := range x.Extension {
		cat := fmt.Sprintf("%s.extension[%d].value", at, k)
		v, _ := c.str()
		switch c.URL {
		case "previous", "current":
			q, err := url.ParseQuery(strings.TrimPrefix(v, "?"))
			if err != nil {
				issues = append(issues, topicIssue(cat, "%s criteria %q: %v", c.URL, v, err))
				continue
			}
			if c.URL == "previous" {
				tr.Previous = q
			} else {
				tr.Current = q
			}
		case "resultForCreate", "resultForDelete":
			if v != "test-passes" && v != "test-fails" {
				issues = append(issues, topicIssue(cat, "%s %q is not one of test-passes, test-fails", c.URL, v))
			}
			if c.URL == "resultForCreate" {
				tr.ResultForCreate = v
			} else {
				tr.ResultForDelete = v
			}
		case "requireBoth":
			tr.RequireBoth = c.ValueBoolean != nil && *c.ValueBoolean
		}
	}
	return issues
}

// criteriaQuery parses a trigger's or a filter's search on typ strictly.
func criteriaQuery(reg *search.Registry, typ, s string) (*search.Query, error) {
	values, err := url.ParseQuery(strings.TrimPrefix(s, "?"))
	if err != nil {
		return nil, err
	}
	for name := range values {
		if strings.HasPrefix(name, "_") && name != "_id" && name != "_tag" && name != "_profile" && name != "_security" {
			return nil, fmt.Errorf("%s selects nothing; use search parameters only", name)
		}
	}
	return reg.Parse(typ, values, search.ParseOptions{Strict: true})
}

func parseCanFilterBy(reg *search.Registry, x extension, at string) (*FilterDef, []store.Issue) {
	f := &FilterDef{}
	var issues []store.Issue
	paramAt := at
	for j, sub := range x.Extension {
		v, _ := sub.str()
		switch sub.URL {
		case "resource":
			typ, ok := resourceType(v)
			if !ok {
				issues = append(issues, topicIssue(fmt.Sprintf("%s.extension[%d].value", at, j), "resource %q is not a FHIR R4 resource type", v))
			}
			f.Resource = typ
		case "filterParameter":
			f.Parameter = v
			paramAt = fmt.Sprintf("%s.extension[%d].value", at, j)
		}
	}
	if f.Parameter == "" {
		return nil, append(issues, topicIssue(at, "a canFilterBy needs its filterParameter"))
	}
	if f.Resource != "" && len(issues) == 0 {
		if _, ok := reg.Lookup(f.Resource, f.Parameter); !ok {
			issues = append(issues, topicIssue(paramAt, "%q is not a search parameter of %s", f.Parameter, f.Resource))
		}
	}
	return f, issues
}

func parseShape(reg *search.Registry, x extension, at string) (*Shape, []store.Issue) {
	sh := &Shape{}
	var issues []store.Issue
	for j, sub := range x.Extension {
		v, _ := sub.str()
		sat := fmt.Sprintf("%s.extension[%d].value", at, j)
		switch sub.URL {
		case "resource":
			typ, ok := resourceType(v)
			if !ok {
				issues = append(issues, topicIssue(sat, "resource %q is not a FHIR R4 resource type", v))
			}
			sh.Resource = typ
		case "include", "revInclude":
			src, param, _ := strings.Cut(strings.SplitN(v, "&", 2)[0], ":")
			if _, ok := reg.Lookup(src, strings.SplitN(param, ":", 2)[0]); !ok || !fhirschema.IsResourceType(src) {
				issues = append(issues, topicIssue(sat, "%s %q is not of the form Type:search-parameter", sub.URL, v))
				continue
			}
			if sub.URL == "include" {
				sh.Include = append(sh.Include, v)
			} else {
				sh.RevInclude = append(sh.RevInclude, v)
			}
		}
	}
	if sh.Resource == "" {
		return nil, append(issues, topicIssue(at, "a notificationShape needs its resource"))
	}
	return sh, issues
}

// trigger is the topic's trigger for changes of typ, if any.
func (t *Topic) trigger(typ string) *Trigger {
	for _, tr := range t.Triggers {
		if tr.Resource == typ {
			return tr
		}
	}
	return nil
}

// canFilter tells whether subscribers may filter typ by param.
func (t *Topic) canFilter(typ, param string) bool {
	for _, f := range t.CanFilterBy {
		if f.Parameter == param && (f.Resource == "" || f.Resource == typ) {
			return true
		}
	}
	return false
}

// shape is the notificationShape of a focus of typ, if any.
func (t *Topic) shape(typ string) *Shape {
	for i := range t.Shapes {
		if t.Shapes[i].Resource == typ {
			return &t.Shapes[i]
		}
	}
	return nil
}

// resourceTypes are the resource types the topic's notifications may
// carry: its triggers', its shapes', and the types their includes
// (Type:param[:Target]) and revincludes reach, per reg's parameters.
func (t *Topic) resourceTypes(reg *search.Registry) []string {
	seen := map[string]bool{}
	for _, tr := range t.Triggers {
		seen[tr.Resource] = true
	}
	for _, s := range t.Shapes {
		seen[s.Resource] = true
		for _, inc := range s.Include {
			for _, typ := range includeTargets(reg, inc) {
				seen[typ] = true
			}
		}
		for _, rev := range s.RevInclude {
			if typ, _, ok := strings.Cut(rev, ":"); ok {
				seen[typ] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for typ := range seen {
		if typ != "" {
			out = append(out, typ)
		}
	}
	slices.Sort(out)
	return out
}

// includeTargets are the types an _include (Type:param[:Target]) reaches.
func includeTargets(reg *search.Registry, inc string) []string {
	parts := strings.Split(inc, ":")
	if len(parts) < 2 {
		return nil
	}
	if len(parts) > 2 && parts[2] != "" {
		return parts[2:3]
	}
	if reg == nil {
		return nil
	}
	p, ok := reg.Lookup(parts[0], parts[1])
	if !ok {
		return nil
	}
	return p.Target
}
