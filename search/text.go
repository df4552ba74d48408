package search

import (
	"html"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// textParams are the full-text parameters: _text searches the narrative,
// _content every text of the resource. Both are indexed as word lists.
var textParams = map[string]bool{"_text": true, "_content": true}

// withoutText are the types without full-text parameters: the server's
// audit trail, an AuditEvent per request, whose records are codes,
// references and addresses searched by AuditEvent's own parameters.
// Their words were a tenth of what each record cost to write.
var withoutText = map[string]bool{"AuditEvent": true}

// addText registers a full-text parameter on every resource type but
// those withoutText.
func (r *Registry) addText(d definition) {
	p := &Param{Code: d.Code, Type: "special", Base: d.Base, Description: d.Description, URL: d.URL}
	for t := range r.types {
		if !withoutText[t] {
			r.register(t, p)
		}
	}
}

// Limits of the word index: longer words are not indexed (identifiers,
// encoded data), and a resource keeps at most maxWords entries.
const (
	maxWordLen = 48
	maxWords   = 4000
)

// skippedTextKeys hold identifiers, links and encoded data, not text.
var skippedTextKeys = map[string]bool{
	"id": true, "reference": true, "system": true, "url": true, "fullUrl": true,
	"data": true, "meta": true, "profile": true, "resourceType": true,
}

// datePattern matches dates, times and instants, which are not words.
var datePattern = regexp.MustCompile(`^\d{4}(-\d\d(-\d\d)?)?(T[0-9:.]+(Z|[+-]\d\d:\d\d)?)?$`)

// textWords are the index values of _text (the narrative) or _content
// (every string of the resource): each pair of adjacent folded words of a
// text ("heart attack"), and its last word alone. So a word is stored as
// the start of a pair or alone, and a phrase as its pairs, in about one
// entry per word.
func textWords(code string, resource map[string]any) []string {
	w := wordSet{}
	if code == "_text" {
		if t, ok := resource["text"].(map[string]any); ok {
			w.addText(narrativeText(str(t, "div")))
		}
		return w.list
	}
	w.walk("", resource)
	return w.list
}

// wordSet gathers the words of a resource once each.
type wordSet struct {
	set
}

func (w *wordSet) walk(key string, v any) {
	if skippedTextKeys[key] || len(w.list) >= maxWords {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the same resource, the same stored list
		for _, k := range keys {
			w.walk(k, x[k])
		}
	case []any:
		for _, e := range x {
			w.walk(key, e)
		}
	case string:
		switch {
		case key == "div":
			w.addText(narrativeText(x))
		case !datePattern.MatchString(x):
			w.addText(x)
		}
	}
}

// addText adds the adjacent pairs of the words of s, and its last word.
func (w *wordSet) addText(s string) {
	words := Words(s)
	for i := 1; i < len(words) && len(w.list) < maxWords; i++ {
		w.add(words[i-1] + " " + words[i])
	}
	if n := len(words); n > 0 {
		w.add(words[n-1])
	}
}

// Words splits text into its folded words (letters and digits), leaving
// out words longer than the index keeps.
func Words(s string) []string {
	fields := strings.FieldsFunc(Fold(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := fields[:0]
	for _, f := range fields {
		if len(f) <= maxWordLen {
			out = append(out, f)
		}
	}
	return out
}

// tagPattern matches XHTML tags and comments.
var tagPattern = regexp.MustCompile(`<!--.*?-->|<[^>]*>`)

// narrativeText is the text of an XHTML div: tags become spaces and
// entities characters.
func narrativeText(div string) string {
	return html.UnescapeString(tagPattern.ReplaceAllString(div, " "))
}

// textCondition translates a _text or _content search. A value is terms
// separated by spaces, all required (AND may be written); OR between
// terms requires either (it binds tighter than AND); parentheses group; a
// quoted phrase requires its words in that order; a term ending in *
// matches words starting with it. Comma-separated values are alternatives.
func textCondition(field, name, modifier, value string) (bson.D, func(bson.Raw) bool, error) {
	if modifier != "" {
		return nil, nil, errorf(name, "the :%s modifier does not apply to %s", modifier, name)
	}
	var conds []bson.D
	for _, v := range splitValues(value) {
		tp := &textParser{field: field, name: name, toks: textTokens(v)}
		cond, err := tp.and()
		if err != nil {
			return nil, nil, err
		}
		if tp.pos < len(tp.toks) {
			return nil, nil, errorf(name, "unexpected %q in %q", tp.toks[tp.pos], v)
		}
		if cond != nil {
			conds = append(conds, cond)
		}
	}
	if len(conds) == 0 {
		return nil, nil, errorf(name, "no words to search for")
	}
	return anyOf(conds), nil, nil
}

// textTokens splits a text search into words, quoted phrases (kept with
// their quotes), parentheses and the keywords AND and OR.
func textTokens(v string) []string {
	var out []string
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case c == ' ' || c == '\t' || c == '+':
			i++
		case c == '(' || c == ')':
			out = append(out, v[i:i+1])
			i++
		case c == '"':
			end := strings.IndexByte(v[i+1:], '"')
			if end < 0 {
				out = append(out, v[i:])
				return out
			}
			out = append(out, v[i:i+end+2])
			i += end + 2
		default:
			end := strings.IndexAny(v[i:], " \t+()\"")
			if end < 0 {
				end = len(v) - i
			}
			out = append(out, v[i:i+end])
			i += end
		}
	}
	return out
}

// textParser is a recursive-descent parser of a text search.
type textParser struct {
	field, name string
	toks        []string
	pos         int
}

func (p *textParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

// and reads ors until the end or a closing parenthesis.
func (p *textParser) and() (bson.D, error) {
	var all bson.A
	for t := p.peek(); t != "" && t != ")"; t = p.peek() {
		if t == "AND" {
			p.pos++
			continue
		}
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		all = append(all, c)
	}
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return all[0].(bson.D), nil
	}
	return bson.D{{Key: "$and", Value: all}}, nil
}

// or reads terms joined by OR.
func (p *textParser) or() (bson.D, error) {
	c, err := p.term()
	if err != nil {
		return nil, err
	}
	alts := []bson.D{c}
	for p.peek() == "OR" {
		p.pos++
		c, err := p.term()
		if err != nil {
			return nil, err
		}
		alts = append(alts, c)
	}
	return anyOf(alts), nil
}

func (p *textParser) term() (bson.D, error) {
	t := p.peek()
	p.pos++
	switch {
	case t == "" || t == ")" || t == "OR" || t == "AND":
		return nil, errorf(p.name, "a word is missing before %q", t)
	case t == "(":
		c, err := p.and()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, errorf(p.name, "a parenthesis is not closed")
		}
		p.pos++
		if c == nil {
			return nil, errorf(p.name, "empty parentheses")
		}
		return c, nil
	case t[0] == '"':
		if len(t) < 2 || t[len(t)-1] != '"' {
			return nil, errorf(p.name, "a quoted phrase is not closed: %s", t)
		}
		return p.phrase(t[1:len(t)-1], false)
	}
	wildcard := strings.HasSuffix(t, "*")
	return p.phrase(strings.TrimSuffix(t, "*"), wildcard)
}

// phrase requires the words of s in order: one word alone or at the
// start of a pair (or, with *, any entry starting with it), several by
// each pair of adjacent words (see textWords).
func (p *textParser) phrase(s string, wildcard bool) (bson.D, error) {
	words := Words(s)
	switch {
	case len(words) == 0:
		return nil, errorf(p.name, "%q holds no word to search for", s)
	case len(words) == 1 && wildcard:
		return bson.D{{Key: p.field, Value: prefix(words[0])}}, nil
	case len(words) == 1:
		return anyOf([]bson.D{{{Key: p.field, Value: words[0]}}, {{Key: p.field, Value: prefix(words[0] + " ")}}}), nil
	}
	all := bson.A{}
	for i := 1; i < len(words); i++ {
		all = append(all, bson.D{{Key: p.field, Value: words[i-1] + " " + words[i]}})
	}
	if wildcard {
		all[len(all)-1] = bson.D{{Key: p.field, Value: prefix(words[len(words)-2] + " " + words[len(words)-1])}}
	}
	if len(all) == 1 {
		return all[0].(bson.D), nil
	}
	return bson.D{{Key: "$and", Value: all}}, nil
}
