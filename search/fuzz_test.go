package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/fhirschema"
	"fhirstore/search"
)

// FuzzParse feeds raw query strings to Registry.Parse for any resource type
// (the index wraps around the sorted type list, plus one unknown type) and
// checks, lenient and strict:
//
//  1. Parse never panics; a failure is a *search.Error with a message and
//     no Query;
//  2. the filter of the query and of every _has and chain sub-query
//     marshals to BSON;
//  3. in that BSON every key starting with '$' is one of the operators
//     condition.go emits (allowedOperators), and every other key is
//     idx.<a parameter of the searched type>[suffix], so a user value never
//     becomes an operator or a field name;
//  4. every regular expression is a literal (optionally anchored with ^),
//     so a user value never becomes a pattern: no ReDoS, no wildcards;
//  5. the post-filter runs on stored values of any shape without panicking;
//  6. what the strict parse accepts, the lenient parse accepts with the
//     same conditions and ignores nothing. (Not the same filter bytes: ap
//     on dates widens by the distance from now, so it moves between calls.)
//
// Run: go test ./search -run '^$' -fuzz '^FuzzParse$' -fuzztime 1m
func FuzzParse(f *testing.F) {
	r := newRegistry(f)
	types := fhirschema.ResourceTypes()
	typeIndex := func(typ string) uint16 {
		if i := slices.Index(types, typ); i >= 0 {
			return uint16(i)
		}
		return uint16(len(types)) // the unknown type
	}
	for _, s := range parameterSeeds(f) {
		f.Add(typeIndex(s.typ), s.query)
	}
	long := strings.Repeat("a", 8<<10)
	for _, s := range []struct{ typ, query string }{
		{"Patient", "name[$ne]=x"},
		{"Patient", "name=%24ne"},
		{"Patient", "$where=1"},
		{"Patient", "_id=$where"},
		{"Patient", "_id=\\$where,\\,x"},
		{"Patient", "name=.*"},
		{"Patient", "name=(a+)+$"},
		{"Patient", "name:contains=(a|aa)*b"},
		{"Patient", "name=%00"},
		{"Patient", "name:exact=%00&family:contains=a%00b"},
		{"Patient", "name=%ff%fe&identifier=%c3"},
		{"Patient", "name=" + long},
		{"Patient", "birthdate=" + long},
		{"Patient", "name=a,,b,\\"},
		{"Patient", "birthdate=ge2020-13-45&birthdate=ap&birthdate=eq"},
		{"Patient", "_lastUpdated=gt2020-01-01T00:00:00Z&_count=0"},
		{"Patient", "_count=101&_summary=maybe&_total=some"},
		{"Patient", "_sort=-birthdate,name,nonsense"},
		{"Patient", "_elements=id,,name&_cursor=abc"},
		{"Patient", "name:missing=maybe&gender:missing=true"},
		{"Patient", "_has:Observation:patient:code=1234-5&_has:Observation:subject:_has:Provenance:target:agent=x"},
		{"Patient", "_has:Observation=x&_has:X:y:z=1"},
		{"Patient", "general-practitioner:Practitioner.name=x&organization.name.family=y"},
		{"Patient", "_include=*&_include=Patient:organization&_revinclude=Observation:subject:Patient"},
		{"Patient", "_include:iterate=Observation:subject&_include:bogus=x"},
		{"Patient", "episode-status=active"},
		{"Patient", "_contained=true"},
		{"Observation", "subject.name=x&subject:Patient.birthdate=ge2000&patient.a.b.c=1"},
		{"Observation", "value-quantity=1e400&value-quantity=-0|http://unitsofmeasure.org|mg&value-quantity=ap5||"},
		{"Observation", "value-quantity=gt-1.5e-3&value-quantity=sa.5&value-quantity=NaN&value-quantity=Inf"},
		{"Observation", "code:of-type=a|b&code:text=%C3%A9&code:not=x,y&code:in=z"},
		{"Observation", "subject=http://x/fhir/Patient/1/&subject:identifier=s|v&subject:Patient=a/b/c"},
		{"Observation", "date=le2020-02-30T25:00:00Z&date=2020-01-01T00:00:00%2B14:00"},
		{"ValueSet", "url:above=http://a/b/c/&url:below=http://a&url=x"},
		{"Observation", "component-code-value-quantity=http://loinc.org|8480-6$gt140,8462-4$le90||mm[Hg]&code-value-date=x$ge2020"},
		{"Observation", "code-value-string=a\\$b$c%00*&combo-code-value-concept=$&code-value-concept=a$b$c"},
		{"MolecularSequence", "referenceseqid-variant-coordinate=NC_1$gt1$lt2&chromosome-window-coordinate=1$$"},
		{"DocumentReference", "relationship=DocumentReference/1$replaces&relationship:missing=true"},
		{"Patient", "_content=%22zebra%20finch%22%20OR%20(parr*%20AND%20x)&_text=((a)&_text=%22"},
		{"Patient", "_content=.*%20(a|b)%20^x$&_text:exact=x"},
		{"Patient", "_filter=" + url.QueryEscape(`name co "pet" and (birthdate ge 2014-10-10 or not (gender eq male))`)},
		{"Patient", "_filter=" + url.QueryEscape(`family ew "\u00e9\"" or family po 2020 or general-practitioner.name sw x`)},
		{"Patient", "_filter=" + url.QueryEscape(`((((gender eq x) and`) + "&_filter=" + url.QueryEscape(`name[family eq "a"].given eq b`)},
		{"Observation", "_filter=" + url.QueryEscape(`code in http://vs or code ni ValueSet/1 or code ss s|c and value-quantity ap 5|s|c`)},
		{"Observation", "_filter=" + url.QueryEscape(`not (not (subject.birthdate eb 2000)) or date po 2020-01 or status pr maybe`)},
		{"Unknown", "name=x"},
	} {
		f.Add(typeIndex(s.typ), s.query)
	}
	f.Fuzz(func(t *testing.T, index uint16, query string) {
		typ := "Unknown"
		if i := int(index) % (len(types) + 1); i < len(types) {
			typ = types[i]
		}
		params, _ := url.ParseQuery(query) // as http.Request.URL.Query: keep what parses
		var strictQuery *search.Query
		for _, strict := range []bool{true, false} {
			q, err := r.Parse(typ, params, search.ParseOptions{Strict: strict})
			if err != nil {
				var se *search.Error
				if !errors.As(err, &se) || err.Error() == "" || q != nil {
					t.Fatalf("%s?%s strict=%v: failure %T %v with query %v", typ, query, strict, err, err, q)
				}
				continue
			}
			if q == nil || q.Type != typ || q.Count < 1 || q.Count > search.MaxCount {
				t.Fatalf("%s?%s strict=%v: query %+v", typ, query, strict, q)
			}
			if err := checkQuery(r, q); err != nil {
				t.Fatalf("%s?%s strict=%v: %v", typ, query, strict, err)
			}
			if strict {
				strictQuery = q
			} else if strictQuery != nil && (len(q.Ignored) > 0 || queryShape(q) != queryShape(strictQuery)) {
				t.Fatalf("%s?%s: strict parse %s, lenient parse %s", typ, query, queryShape(strictQuery), queryShape(q))
			}
		}
	})
}

// parameterSeeds are searches on the official parameters: each distinct
// code with one sample value of its type (taking the samples in turn), and
// the first code of each type with all of them.
func parameterSeeds(tb testing.TB) []struct{ typ, query string } {
	tb.Helper()
	data, err := os.ReadFile("../testdata/fhir/search-parameters.json")
	if err != nil {
		tb.Fatal(err)
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				Code, Type, Expression string
				Base                   []string
			}
		}
	}
	if err := json.Unmarshal(data, &bundle); err != nil {
		tb.Fatal(err)
	}
	var out []struct{ typ, query string }
	seen := map[string]bool{}
	firstOfType := map[string]bool{}
	for _, e := range bundle.Entry {
		d := e.Resource
		samples := sampleSearches[d.Type]
		if len(samples) == 0 || d.Expression == "" || seen[d.Code+" "+d.Type] {
			continue
		}
		seen[d.Code+" "+d.Type] = true
		typ := d.Base[0]
		if typ == "Resource" || typ == "DomainResource" {
			typ = "Patient"
		}
		if !firstOfType[d.Type] {
			firstOfType[d.Type] = true
		} else {
			samples = samples[len(seen)%len(samples):][:1]
		}
		for _, s := range samples {
			suffix, value, _ := strings.Cut(s, "=")
			out = append(out, struct{ typ, query string }{typ, url.Values{d.Code + suffix: {value}}.Encode()})
		}
	}
	return out
}

// fieldSuffixes are what condition.go appends to idx.<code>.
var fieldSuffixes = func() []string {
	out := []string{"", ":exact", ":text", ":of-type", ":identifier", ".lo", ".hi", ".s", ".u"}
	for _, key := range []string{".a", ".b", ".c"} { // composite components
		out = append(out, key, key+".lo", key+".hi", key+".s", key+".u")
	}
	return out
}()

// queryShape summarizes what a parse produced.
func queryShape(q *search.Query) string {
	return fmt.Sprintf("%d conditions, %d _has, %d chains, %d+%d includes, sort %v, ignored %q",
		len(q.Conditions), len(q.Has), len(q.Chains), len(q.Includes), len(q.Revincludes), q.Sort, q.Ignored)
}

// checkQuery checks the filter of q and of its sub-queries (see FuzzParse).
func checkQuery(r *search.Registry, q *search.Query) error {
	if err := q.Resolve(context.Background(), listResolver{}); err != nil || q.Deferred() {
		return fmt.Errorf("resolve value sets, chains and sub-searches: %v", err)
	}
	raw, err := bson.Marshal(q.Filter())
	if err != nil {
		return fmt.Errorf("bson.Marshal(%v): %w", q.Filter(), err)
	}
	codes := map[string]bool{}
	if err := walkRaw(r, q.Type, bson.Raw(raw), false, codes); err != nil {
		return fmt.Errorf("filter %v: %w", bson.Raw(raw), err)
	}
	if q.PostFilter != nil {
		for _, idx := range storedShapes(codes) {
			q.PostFilter(idx)
		}
	}
	for _, s := range q.Sort {
		if _, ok := r.Lookup(q.Type, s.Param); !ok {
			return fmt.Errorf("sort by unknown %q", s.Param)
		}
	}
	for _, h := range q.Has {
		if err := checkQuery(r, h.Query); err != nil {
			return fmt.Errorf("_has:%s:%s: %w", h.Type, h.Param, err)
		}
	}
	for _, c := range q.Chains {
		for _, tg := range c.Targets {
			if err := checkQuery(r, tg.Query); err != nil {
				return fmt.Errorf("chain %s:%s: %w", c.Param, tg.Type, err)
			}
		}
	}
	return nil
}

// walkRaw checks the keys and regular expressions of a marshalled filter
// document (array elements when inArray) and collects the parameter codes
// its fields name.
func walkRaw(r *search.Registry, typ string, doc bson.Raw, inArray bool, codes map[string]bool) error {
	elems, err := doc.Elements()
	if err != nil {
		return err
	}
	for _, el := range elems {
		key := el.Key()
		switch {
		case inArray:
		case strings.HasPrefix(key, "$"):
			if !allowedOperators[key] {
				return fmt.Errorf("operator %q", key)
			}
		case key == "_id": // the ids of a _filter branch's matches, the primary key
		default:
			code, err := fieldCode(r, typ, key)
			if err != nil {
				return err
			}
			codes[code] = true
		}
		v := el.Value()
		switch v.Type {
		case bson.TypeEmbeddedDocument:
			err = walkRaw(r, typ, v.Document(), false, codes)
		case bson.TypeArray:
			err = walkRaw(r, typ, bson.Raw(v.Array()), true, codes)
		case bson.TypeRegex:
			pattern, options := v.Regex()
			err = checkLiteral(pattern, options)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fieldCode returns the parameter code of a filter field idx.<code><suffix>.
func fieldCode(r *search.Registry, typ, key string) (string, error) {
	rest, ok := strings.CutPrefix(key, "idx.")
	if !ok {
		return "", fmt.Errorf("field %q outside idx", key)
	}
	if i := strings.LastIndex(rest, ".k.h"); i >= 0 && len(rest) == i+4+16 { // a point key of a composite
		rest = rest[:i]
	}
	for _, suffix := range fieldSuffixes {
		if code, ok := strings.CutSuffix(rest, suffix); ok {
			if _, known := r.Lookup(typ, code); known {
				return code, nil
			}
		}
	}
	return "", fmt.Errorf("field %q is no parameter of %s", key, typ)
}

// checkLiteral accepts the patterns condition.go builds from values: an
// optional ^ and then only plain bytes and escapes (\ before a
// metacharacter, \x00), whatever the bytes are (invalid UTF-8 included).
func checkLiteral(pattern, options string) error {
	if options != "" {
		return fmt.Errorf("regex /%s/%s has options", pattern, options)
	}
	p := strings.TrimPrefix(pattern, "^")
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && strings.HasPrefix(p[i+1:], "x00"):
			i += 3
		case p[i] == '\\' && i+1 < len(p) && strings.IndexByte(regexMeta, p[i+1]) >= 0:
			i++
		case p[i] == 0 || strings.IndexByte(regexMeta, p[i]) >= 0:
			return fmt.Errorf("regex %q is not a literal (byte %d)", pattern, i+len(pattern)-len(p))
		}
	}
	return nil
}

// regexMeta are the bytes regexp.QuoteMeta escapes.
const regexMeta = `\.+*?()|[]{}^$`

// storedShapes are idx documents giving each code values of every shape
// Extract writes, and some it does not.
func storedShapes(codes map[string]bool) []bson.Raw {
	t := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	values := bson.A{
		bson.D{{Key: "lo", Value: 1.0}, {Key: "hi", Value: 2.0}, {Key: "s", Value: "http://unitsofmeasure.org|mg"}, {Key: "u", Value: "mg"}},
		bson.D{{Key: "lo", Value: t}, {Key: "hi", Value: t.Add(time.Hour)}},
		bson.D{{Key: "lo", Value: "x"}},
		"x", int32(1),
	}
	full, odd := bson.D{}, bson.D{}
	for code := range codes {
		full = append(full, bson.E{Key: code, Value: values})
		odd = append(odd, bson.E{Key: code, Value: "not an array"})
	}
	var out []bson.Raw
	for _, d := range []bson.D{{}, full, odd} {
		raw, err := bson.Marshal(d)
		if err != nil {
			panic(err)
		}
		out = append(out, raw)
	}
	return out
}
