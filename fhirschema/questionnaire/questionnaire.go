// Package questionnaire checks a QuestionnaireResponse against its
// Questionnaire, as R4 and the Structured Data Capture IG define the rules
// (linkIds and nesting, answer types, required and repeating items, answer
// options and value sets, enableWhen, the value constraints of the core
// extensions), and checks a Questionnaire's own rules that can be checked
// without data (unique linkIds, enableWhen questions that exist,
// expressions that parse). It is pure: the Questionnaire and the value
// sets come from the caller.
package questionnaire

import (
	"context"
	"math/big"
	"regexp"
	"sync"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// Terminology answers whether a code is in a value set.
type Terminology interface {
	// MemberOf reports whether system|code is in the value set at url;
	// unknown says why that cannot be known (the value set or its code
	// system is not available) when member is false.
	MemberOf(ctx context.Context, url, system, code string) (member bool, unknown string, err error)
}

// DisplayLookup is what a Terminology implements when it knows the
// displays of code systems' concepts: a coded answer's display is then
// checked too.
type DisplayLookup interface {
	// Displays returns the display and designations of system|code;
	// known is false when the code system or the code is not available.
	Displays(ctx context.Context, system, code string) (displays []string, known bool, err error)
}

// Options tune one check of a response.
type Options struct {
	// Terminology checks answerValueSet and unitValueSet membership; nil
	// makes every such check a warning that it could not be made.
	Terminology Terminology
	// Timeout bounds each expression (enableWhenExpression); zero is the
	// FHIRPath engine's default.
	Timeout time.Duration
}

// Checker checks responses and forms. Safe for concurrent use.
type Checker struct {
	exprs    *fhirpath.Cache
	patterns patternCache
}

// NewChecker returns a Checker that compiles each distinct expression once.
func NewChecker() *Checker {
	return &Checker{exprs: fhirpath.NewCache(4096)}
}

// CheckResponse checks the QuestionnaireResponse qr against q, the
// Questionnaire its questionnaire element names. Each issue's expression
// is the element at fault (QuestionnaireResponse.item[2].answer[0]) and its
// text names the linkId. An error from the terminology is returned as is.
func (c *Checker) CheckResponse(ctx context.Context, qr, q map[string]any, opts Options) ([]fhirschema.Issue, error) {
	r := &responseCheck{ctx: ctx, c: c, opts: opts, qr: qr, q: q}
	status, _ := qr["status"].(string)
	r.complete = status == "completed" || status == "amended"
	r.formStatus()
	r.subjectType()
	r.items(q["item"], qr["item"], "QuestionnaireResponse", nil)
	if r.err != nil {
		return nil, r.err
	}
	return r.issues, nil
}

// item is a Questionnaire item, decoded.
type item = map[string]any

// form indexes a Questionnaire's items by linkId.
type form struct {
	byLinkID map[string]item
	parent   map[string]string // linkId → the linkId of the item holding it ("" at the root)
}

func indexForm(q map[string]any) *form {
	f := &form{byLinkID: map[string]item{}, parent: map[string]string{}}
	var walk func(v any, parent string)
	walk = func(v any, parent string) {
		for _, it := range objects(v) {
			id, _ := it["linkId"].(string)
			if _, dup := f.byLinkID[id]; !dup {
				f.byLinkID[id] = it
				f.parent[id] = parent
			}
			walk(it["item"], id)
		}
	}
	walk(q["item"], "")
	return f
}

// objects returns the JSON objects of an array (or the one object).
func objects(v any) []map[string]any { return fhirschema.Objects(v) }

// patternCache compiles each regex extension's pattern once.
type patternCache struct {
	mu sync.Mutex
	re map[string]patternEntry
}

type patternEntry struct {
	re  *regexp.Regexp
	err error
}

// maxPatterns bounds the cache; past it, it starts afresh.
const maxPatterns = 1024

func (p *patternCache) compile(pattern string) (*regexp.Regexp, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.re[pattern]; ok {
		return e.re, e.err
	}
	if p.re == nil || len(p.re) >= maxPatterns {
		p.re = map[string]patternEntry{}
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	p.re[pattern] = patternEntry{re, err}
	return re, err
}

func bigInt(n int64) *big.Rat { return big.NewRat(n, 1) }
