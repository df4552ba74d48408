package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// The tests of this file search real data: one Synthea patient (the
// smallest of testdata/synthea), the Organizations, Locations and
// Practitioners its conditional references name, and a few official R4
// examples as decoys and for the parameter types Synthea lacks (number, uri).
// Every expected result is computed here from the loaded JSON with the FHIR
// R4 search rules, never copied from the server's answers.

const (
	synDir = "../testdata/synthea"
	// synPatientFile is the smallest of the four patient bundles.
	synPatientFile = "Breana975_Harvey63_47e5d1f6-a017-1481-f0a2-49ef0edb3b72.json"
)

// synShortStride thins the rows of TestSyntheaSearch and TestSyntheaJoins
// with -short (the race detector's run): every fourth row is checked, on
// the same data.
const synShortStride = 4

// synOtherPatientFiles give only their Patient entry (decoy patients).
var synOtherPatientFiles = []string{
	"Alvin56_Jerde200_53917de0-aa0c-0700-105a-4f7f893c62f6.json",
	"Ellsworth48_Kihn564_7686735f-54d7-fca9-2006-83d78cefb707.json",
	"Juana825_Pagan507_f467cc2f-3697-4476-b0b9-868e9737fa62.json",
}

// synBundleTypes are the entry types of the patient bundle that are stored.
var synBundleTypes = map[string]bool{
	"Patient": true, "Encounter": true, "Observation": true, "Condition": true,
	"Immunization": true, "MedicationRequest": true,
}

// synObservationYears keep the embedded database's collection scans short:
// of the patient's 149 Observations only those of these years (vital signs,
// laboratory panels, surveys, social history, components, a valueString)
// are stored.
var synObservationYears = []string{"2015", "2022", "2023"}

// synExtraPractitioners and synExtraOrganizations are entry positions in
// practitionerInformation.json / hospitalInformation.json stored besides
// the referenced ones: decoys, and Dr. Calderón210 for accent folding.
var (
	synExtraPractitioners = []int{0, 2, 4, 136}
	synExtraOrganizations = []int{0, 2, 4}
	synExtraLocations     = []int{1, 3}
)

// synOfficialObservations are official examples stored next to the Synthea
// Observations: other statuses, units, a Period with and without end, no
// effective[x], no subject.
var synOfficialObservations = []string{
	"blood-pressure-cancel", "f202", "unsat", "f001", "example", "heart-rate", "bmi",
	"body-height", "vp-oyster", "656", "body-temperature",
}

// synOfficialGlobs are the other official examples stored as they are.
var synOfficialGlobs = []string{"Patient-*.json", "Condition-*.json", "Immunization-*.json",
	"RiskAssessment-*.json", "Questionnaire-*.json",
	"PlanDefinition-opioidcds-*.json", "PlanDefinition-zika-*.json", "PlanDefinition-protocol-example.json"}

// synRes is a resource decoded with json.Number.
type synRes = map[string]any

// synData is the loaded tenant and what the test knows about it.
type synData struct {
	e         *env
	res       map[string][]synRes // by type, in load order
	updated   map[string]string   // "Type/id" -> meta.lastUpdated of the write
	refs      map[string]string   // conditional reference -> "Type/id"
	urnType   map[string]string   // urn:uuid fullUrl -> resource type
	patientID string
	start     time.Time // before the first write
	midCond   time.Time // between the two halves of the Conditions
}

type synEntry struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource"`
	Request  struct {
		IfNoneExist string `json:"ifNoneExist"`
	} `json:"request"`
}

func synReadBundle(t *testing.T, path string) []synEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Entry []synEntry `json:"entry"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return bundle.Entry
}

func synDecode(t *testing.T, raw []byte) synRes {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m synRes
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func synTypeOf(t *testing.T, raw []byte) string {
	t.Helper()
	var head struct {
		ResourceType string `json:"resourceType"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Fatal(err)
	}
	return head.ResourceType
}

// synPut stores r with PUT /{type}/{id} and records it.
func (d *synData) synPut(t *testing.T, r synRes) {
	t.Helper()
	typ, id := r["resourceType"].(string), r["id"].(string)
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	resp := d.e.put("/"+typ+"/"+id, string(body))
	if resp.Status != http.StatusCreated && resp.Status != http.StatusOK {
		t.Fatalf("PUT %s/%s: %d %s", typ, id, resp.Status, resp.Body)
	}
	meta, _ := resp.JSON(t)["meta"].(map[string]any)
	lu, _ := meta["lastUpdated"].(string)
	if lu == "" {
		t.Fatalf("PUT %s/%s: no meta.lastUpdated in %s", typ, id, resp.Body)
	}
	d.updated[typ+"/"+id] = lu
	d.res[typ] = append(d.res[typ], r)
}

// synRewrite replaces every Reference.reference of v through fn.
func synRewrite(v any, fn func(string) string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "reference" {
				v[k] = fn(s)
				continue
			}
			synRewrite(x, fn)
		}
	case []any:
		for _, x := range v {
			synRewrite(x, fn)
		}
	}
}

// synConditionalRefs collects the conditional references ("Type?query") of v.
func synConditionalRefs(v any, into map[string]bool) {
	synRewrite(v, func(s string) string {
		if strings.Contains(s, "?") {
			into[s] = true
		}
		return s
	})
}

// synLoad fills a fresh tenant; see the file comment.
func synLoad(t *testing.T) *synData {
	t.Helper()
	d := &synData{e: newEnv(t), res: map[string][]synRes{}, updated: map[string]string{},
		refs: map[string]string{}, urnType: map[string]string{}}
	d.start = time.Now().UTC()
	time.Sleep(5 * time.Millisecond)

	// The patient bundle: which entries are stored and which conditional
	// references they use.
	var picked []synRes
	needed := map[string]bool{}
	for _, en := range synReadBundle(t, filepath.Join(synDir, synPatientFile)) {
		typ := synTypeOf(t, en.Resource)
		d.urnType[en.FullURL] = typ
		if !synBundleTypes[typ] {
			continue
		}
		r := synDecode(t, en.Resource)
		if typ == "Observation" && !slices.Contains(synObservationYears, synStr(r, "effectiveDateTime")[:4]) {
			continue
		}
		if id, ok := strings.CutPrefix(en.FullURL, "urn:uuid:"); !ok || id != r["id"] {
			t.Fatalf("entry %s: fullUrl and id disagree (%v)", en.FullURL, r["id"])
		}
		if typ == "Patient" {
			d.patientID = r["id"].(string)
		}
		synConditionalRefs(r, needed)
		picked = append(picked, r)
	}
	if d.patientID == "" || len(needed) == 0 {
		t.Fatalf("patient bundle: patient %q, %d conditional references", d.patientID, len(needed))
	}

	// The targets of the conditional references, with ids of our own
	// (position in their file), plus decoys.
	assigned := map[string]string{}
	synLoadTargets(t, d, "practitionerInformation.json", needed, map[string][]int{"Practitioner": synExtraPractitioners}, assigned)
	synLoadTargets(t, d, "hospitalInformation.json", needed,
		map[string][]int{"Organization": synExtraOrganizations, "Location": synExtraLocations}, assigned)

	// Resolve each conditional reference with a real search; it must find
	// the resource the loader gave that identifier.
	for ref := range needed {
		typ, query, _ := strings.Cut(ref, "?")
		params, err := url.ParseQuery(query)
		if err != nil {
			t.Fatalf("conditional reference %s: %v", ref, err)
		}
		ids := matchIDs(t, d.e.get("/"+typ+"?"+params.Encode()))
		if len(ids) != 1 {
			t.Fatalf("GET %s matched %v, want exactly one", ref, ids)
		}
		if want := assigned[ref]; ids[0] != want {
			t.Fatalf("GET %s matched %s, but %s has that identifier", ref, ids[0], want)
		}
		d.refs[ref] = typ + "/" + ids[0]
	}

	// The patient bundle's resources, references rewritten.
	nCond, condSeen := 0, 0
	for _, r := range picked {
		if r["resourceType"] == "Condition" {
			nCond++
		}
	}
	for _, r := range picked {
		synRewrite(r, func(s string) string {
			if typ, ok := d.urnType[s]; ok {
				return typ + "/" + strings.TrimPrefix(s, "urn:uuid:")
			}
			if to, ok := d.refs[s]; ok {
				return to
			}
			if strings.HasPrefix(s, "urn:uuid:") || strings.Contains(s, "?") {
				t.Fatalf("unresolved reference %s", s)
			}
			return s
		})
		if r["resourceType"] == "Condition" {
			if condSeen == nCond/2 {
				time.Sleep(5 * time.Millisecond)
				d.midCond = time.Now().UTC()
				time.Sleep(5 * time.Millisecond)
			}
			condSeen++
		}
		d.synPut(t, r)
	}

	// The Patient of the other bundles.
	for _, f := range synOtherPatientFiles {
		entries := synReadBundle(t, filepath.Join(synDir, f))
		if synTypeOf(t, entries[0].Resource) != "Patient" {
			t.Fatalf("%s: first entry is not the Patient", f)
		}
		d.synPut(t, synDecode(t, entries[0].Resource))
	}

	// Official examples.
	invalid := knownInvalidExamples(t)
	var files []string
	for _, id := range synOfficialObservations {
		files = append(files, "Observation-"+id+".json")
	}
	for _, g := range synOfficialGlobs {
		m, err := filepath.Glob(filepath.Join(exampleDir, g))
		if err != nil || len(m) == 0 {
			t.Fatalf("no examples %s: %v", g, err)
		}
		for _, p := range m {
			files = append(files, filepath.Base(p))
		}
	}
	for _, f := range files {
		if _, bad := invalid[f]; bad {
			continue
		}
		b, err := os.ReadFile(filepath.Join(exampleDir, f))
		if err != nil {
			t.Fatal(err)
		}
		d.synPut(t, synDecode(t, b))
	}
	return d
}

// synIDPrefix names the ids given to the conditional-create targets:
// prefix and the entry's position in its file.
var synIDPrefix = map[string]string{"Practitioner": "syn-prac-", "Organization": "syn-org-", "Location": "syn-loc-"}

// synLoadTargets stores the entries of a batch bundle of conditional
// creates that needed names ("Type?" + their ifNoneExist), plus the entries
// at the extra positions, and records the id each conditional reference
// should resolve to in assigned.
func synLoadTargets(t *testing.T, d *synData, file string, needed map[string]bool, extra map[string][]int, assigned map[string]string) {
	t.Helper()
	for i, en := range synReadBundle(t, filepath.Join(synDir, file)) {
		typ := synTypeOf(t, en.Resource)
		cond := typ + "?" + en.Request.IfNoneExist
		if !needed[cond] && !slices.Contains(extra[typ], i) {
			continue
		}
		if en.Request.IfNoneExist == "" || synIDPrefix[typ] == "" {
			t.Fatalf("%s entry %d: %s without ifNoneExist or id prefix", file, i, typ)
		}
		r := synDecode(t, en.Resource)
		r["id"] = fmt.Sprintf("%s%d", synIDPrefix[typ], i)
		assigned[cond] = r["id"].(string)
		d.synPut(t, r)
	}
}

// ---- reading the loaded JSON ----

// synAt follows path from v, flattening arrays; a step "a|b" takes the
// elements a and b (the types of a choice element the parameter indexes,
// e.g. "onsetDateTime|onsetPeriod" for Condition.onset.as(dateTime) |
// Condition.onset.as(Period)).
func synAt(v any, path ...string) []any {
	cur := []any{v}
	for _, step := range path {
		var next []any
		for _, c := range cur {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			for _, name := range strings.Split(step, "|") {
				next = append(next, synFlat(m[name])...)
			}
		}
		cur = next
	}
	return cur
}

func synFlat(x any) []any {
	switch x := x.(type) {
	case nil:
		return nil
	case []any:
		return x
	}
	return []any{x}
}

func synStr(v any, key string) string {
	m, _ := v.(map[string]any)
	s, _ := m[key].(string)
	return s
}

// synFold is the spec's string matching form: case and accents ignored,
// white space normalized.
func synFold(s string) string {
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return strings.Join(strings.Fields(strings.ToLower(out)), " ")
}

// synStrings are the string values a string parameter searches: the parts
// of a HumanName or Address, or the string itself.
func synStrings(r synRes, path ...string) []string {
	var out []string
	for _, v := range synAt(r, path...) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case map[string]any:
			for _, k := range []string{"family", "given", "prefix", "suffix", "text", "line", "city", "district", "state", "postalCode", "country"} {
				for _, s := range synFlat(v[k]) {
					if s, ok := s.(string); ok {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

// synString matches a string parameter: default (folded prefix), exact or contains.
func synString(modifier, q string, values []string) bool {
	for _, v := range values {
		switch modifier {
		case "":
			if strings.HasPrefix(synFold(v), synFold(q)) {
				return true
			}
		case "exact":
			if v == q {
				return true
			}
		case "contains":
			if strings.Contains(synFold(v), synFold(q)) {
				return true
			}
		}
	}
	return false
}

// synCode is a coded value: Coding system/code, Identifier system/value,
// or a bare code.
type synCode struct{ system, code string }

func synCodes(r synRes, path ...string) []synCode {
	var out []synCode
	for _, v := range synAt(r, path...) {
		switch v := v.(type) {
		case string:
			out = append(out, synCode{code: v})
		case bool:
			out = append(out, synCode{code: strconv.FormatBool(v)})
		case map[string]any:
			switch {
			case v["coding"] != nil:
				for _, c := range synFlat(v["coding"]) {
					out = append(out, synCode{synStr(c, "system"), synStr(c, "code")})
				}
			case v["code"] != nil:
				out = append(out, synCode{synStr(v, "system"), synStr(v, "code")})
			case v["value"] != nil:
				out = append(out, synCode{synStr(v, "system"), synStr(v, "value")})
			}
		}
	}
	return out
}

// synToken matches one token value: code, system|code, |code or system|.
func synToken(q string, codes []synCode) bool {
	system, code, hasSystem := strings.Cut(q, "|")
	if !hasSystem {
		code, system = system, ""
	}
	for _, c := range codes {
		switch {
		case !hasSystem:
			if c.code == code {
				return true
			}
		case system == "":
			if c.system == "" && c.code == code {
				return true
			}
		case code == "":
			if c.system == system {
				return true
			}
		default:
			if c.system == system && c.code == code {
				return true
			}
		}
	}
	return false
}

// synTexts are what :text searches: CodeableConcept.text, Coding.display.
func synTexts(r synRes, path ...string) []string {
	var out []string
	for _, v := range synAt(r, path...) {
		if s := synStr(v, "text"); s != "" {
			out = append(out, s)
		}
		for _, c := range synAt(v, "coding") {
			if s := synStr(c, "display"); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// synOfType matches Identifier :of-type system|code|value.
func synOfType(r synRes, q string, path ...string) bool {
	parts := strings.Split(q, "|")
	for _, idn := range synAt(r, path...) {
		if synStr(idn, "value") != parts[2] {
			continue
		}
		for _, c := range synAt(idn, "type", "coding") {
			if synStr(c, "system") == parts[0] && synStr(c, "code") == parts[1] {
				return true
			}
		}
	}
	return false
}

func synRefs(r synRes, path ...string) []string {
	var out []string
	for _, v := range synAt(r, path...) {
		if s := synStr(v, "reference"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ---- dates ----

// synSpan is the closed range of instants a date value stands for.
type synSpan struct{ lo, hi time.Time }

var (
	synMinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	synMaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// synParseDate reads a FHIR date, dateTime or instant at its precision; no
// zone means UTC.
func synParseDate(t testing.TB, s string) synSpan {
	t.Helper()
	var lo time.Time
	var step func(time.Time) time.Time
	var err error
	switch {
	case len(s) == 4:
		lo, err = time.Parse("2006", s)
		step = func(x time.Time) time.Time { return x.AddDate(1, 0, 0) }
	case len(s) == 7:
		lo, err = time.Parse("2006-01", s)
		step = func(x time.Time) time.Time { return x.AddDate(0, 1, 0) }
	case len(s) == 10:
		lo, err = time.Parse("2006-01-02", s)
		step = func(x time.Time) time.Time { return x.AddDate(0, 0, 1) }
	default:
		body, zone := s, ""
		if strings.HasSuffix(s, "Z") {
			body, zone = s[:len(s)-1], "Z"
		} else if i := strings.LastIndexAny(s, "+-"); i > 10 {
			body, zone = s[:i], s[i:]
		}
		layout := "2006-01-02T15:04"
		unit := time.Minute
		if len(body) >= 19 {
			layout, unit = "2006-01-02T15:04:05", time.Second
			if len(body) > 20 {
				frac := body[20:]
				layout += "." + strings.Repeat("9", len(frac))
				unit = time.Second
				for range frac {
					unit /= 10
				}
			}
		}
		switch zone {
		case "":
		case "Z":
			layout += "Z"
			body += "Z"
		default:
			layout += "-07:00"
			body += zone
		}
		lo, err = time.Parse(layout, body)
		step = func(x time.Time) time.Time { return x.Add(unit) }
	}
	if err != nil {
		t.Fatalf("date %q: %v", s, err)
	}
	lo = lo.UTC()
	return synSpan{lo, step(lo).Add(-time.Nanosecond)}
}

// synDates are the ranges of the date values at path: dates, dateTimes,
// instants and Periods (an open end is unbounded).
func synDates(t testing.TB, r synRes, path ...string) []synSpan {
	var out []synSpan
	for _, v := range synAt(r, path...) {
		switch v := v.(type) {
		case string:
			out = append(out, synParseDate(t, v))
		case map[string]any:
			p := synSpan{synMinTime, synMaxTime}
			if s := synStr(v, "start"); s != "" {
				p.lo = synParseDate(t, s).lo
			}
			if s := synStr(v, "end"); s != "" {
				p.hi = synParseDate(t, s).hi
			}
			out = append(out, p)
		}
	}
	return out
}

// synPrefix splits a search value into its prefix (eq when none) and value.
func synPrefix(q string) (string, string) {
	for _, p := range []string{"eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap"} {
		if rest, ok := strings.CutPrefix(q, p); ok && rest != "" && (rest[0] >= '0' && rest[0] <= '9' || rest[0] == '-' || rest[0] == '.') {
			return p, rest
		}
	}
	return "eq", q
}

// synDateMatch applies a date search value to the ranges of a resource with
// the R4 prefix table: the range of the search value s against the range of
// each target value.
func synDateMatch(t testing.TB, q string, targets []synSpan) bool {
	prefix, v := synPrefix(q)
	s := synParseDate(t, v)
	for _, x := range targets {
		contained := !x.lo.Before(s.lo) && !x.hi.After(s.hi)
		var ok bool
		switch prefix {
		case "eq":
			ok = contained
		case "ne":
			ok = !contained
		case "gt":
			ok = x.hi.After(s.hi)
		case "lt":
			ok = x.lo.Before(s.lo)
		case "ge":
			ok = x.hi.After(s.hi) || contained
		case "le":
			ok = x.lo.Before(s.lo) || contained
		case "sa":
			ok = x.lo.After(s.hi)
		case "eb":
			ok = x.hi.Before(s.lo)
		case "ap": // 10% of the distance from now, as the spec recommends
			gap := time.Since(s.lo)
			if gap < 0 {
				gap = -gap
			}
			ok = !x.lo.After(s.hi.Add(gap/10)) && !x.hi.Before(s.lo.Add(-gap/10))
		}
		if ok {
			return true
		}
	}
	return false
}

// ---- numbers and quantities ----

// synNum is a decimal of the data with its unit (quantities).
type synNum struct {
	v            float64
	system, code string
	unit         string
}

func synNumber(t testing.TB, x any) (float64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatalf("number %v: %v", n, err)
	}
	return f, true
}

func synNumbers(t testing.TB, r synRes, path ...string) []synNum {
	var out []synNum
	for _, v := range synAt(r, path...) {
		switch v := v.(type) {
		case json.Number:
			f, _ := synNumber(t, v)
			out = append(out, synNum{v: f})
		case map[string]any:
			if f, ok := synNumber(t, v["value"]); ok {
				out = append(out, synNum{v: f, system: synStr(v, "system"), code: synStr(v, "code"), unit: synStr(v, "unit")})
			}
		}
	}
	return out
}

// synNumMatch applies a number or quantity search value
// ([prefix]number[|system|code]) with the R4 number rules: eq and ne use
// the range implied by the search value's precision (100 is [99.5, 100.5)),
// gt, lt, ge and le compare with the exact value ("gt100: values greater
// than exactly 100"), ap is within 10% of the value.
func synNumMatch(t testing.TB, q string, values []synNum) bool {
	prefix, v := synPrefix(q)
	num, unit, hasUnit := strings.Cut(v, "|")
	system, code, _ := strings.Cut(unit, "|")
	s, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Fatalf("search number %q: %v", q, err)
	}
	decimals := 0
	if _, frac, ok := strings.Cut(num, "."); ok {
		decimals = len(frac)
	}
	half := 0.5 * math.Pow(10, -float64(decimals))
	for _, x := range values {
		if hasUnit {
			if system != "" && (x.system != system || x.code != code) {
				continue
			}
			if system == "" && x.code != code && x.unit != code {
				continue
			}
		}
		in := x.v >= s-half && x.v < s+half
		var ok bool
		switch prefix {
		case "eq":
			ok = in
		case "ne":
			ok = !in
		case "gt":
			ok = x.v > s
		case "lt":
			ok = x.v < s
		case "ge":
			ok = x.v >= s
		case "le":
			ok = x.v <= s
		case "ap":
			ok = math.Abs(x.v-s) <= math.Abs(s)*0.1
		default:
			t.Fatalf("prefix %s is not used with numbers here", prefix)
		}
		if ok {
			return true
		}
	}
	return false
}

// ---- expectations ----

// where lists the ids of the loaded resources of typ that pred accepts.
func (d *synData) where(typ string, pred func(synRes) bool) []string {
	var out []string
	for _, r := range d.res[typ] {
		if pred(r) {
			out = append(out, r["id"].(string))
		}
	}
	return out
}

// synOr applies each comma-separated value of q: the values are ORed.
func synOr(q string, match func(string) bool) bool {
	for _, v := range strings.Split(q, ",") {
		if match(v) {
			return true
		}
	}
	return false
}

// token lists the ids of typ whose element at path holds the token q.
func (d *synData) token(typ, q string, path ...string) []string {
	return d.where(typ, func(r synRes) bool {
		return synOr(q, func(v string) bool { return synToken(v, synCodes(r, path...)) })
	})
}

func (d *synData) str(typ, modifier, q string, path ...string) []string {
	return d.where(typ, func(r synRes) bool {
		return synOr(q, func(v string) bool { return synString(modifier, v, synStrings(r, path...)) })
	})
}

func (d *synData) ref(typ, target string, path ...string) []string {
	return d.where(typ, func(r synRes) bool { return slices.Contains(synRefs(r, path...), target) })
}

func (d *synData) date(t testing.TB, typ, q string, path ...string) []string {
	return d.where(typ, func(r synRes) bool { return synDateMatch(t, q, synDates(t, r, path...)) })
}

func (d *synData) num(t testing.TB, typ, q string, path ...string) []string {
	return d.where(typ, func(r synRes) bool { return synNumMatch(t, q, synNumbers(t, r, path...)) })
}

func (d *synData) missing(typ string, path ...string) []string {
	return d.where(typ, func(r synRes) bool { return len(synAt(r, path...)) == 0 })
}

func (d *synData) not(typ string, ids []string) []string {
	return d.where(typ, func(r synRes) bool { return !slices.Contains(ids, r["id"].(string)) })
}

func synAnd(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// synOrder is an expected search order: the resources with a value of the
// sort parameter in order, then those without one (the spec does not place
// them; the server puts them last both ways, on every engine).
type synOrder struct{ present, missing []string }

// sortedBy orders ids of typ by key (false when the resource has no value):
// by the key, then as the server's default order, lastUpdated and id.
func (d *synData) sortedBy(typ string, ids []string, desc bool, key func(r synRes) (float64, bool)) synOrder {
	keys := map[string]float64{}
	var o synOrder
	byID := map[string]synRes{}
	for _, r := range d.res[typ] {
		byID[r["id"].(string)] = r
	}
	for _, id := range ids {
		if k, ok := key(byID[id]); ok {
			keys[id] = k
			o.present = append(o.present, id)
		} else {
			o.missing = append(o.missing, id)
		}
	}
	tie := func(a, b string) bool {
		ua, ub := d.updated[typ+"/"+a], d.updated[typ+"/"+b]
		if ua != ub {
			return ua < ub
		}
		return a < b
	}
	sort.SliceStable(o.present, func(i, j int) bool {
		a, b := keys[o.present[i]], keys[o.present[j]]
		if a != b {
			return (a < b) != desc
		}
		return tie(o.present[i], o.present[j])
	})
	sort.SliceStable(o.missing, func(i, j int) bool { return tie(o.missing[i], o.missing[j]) })
	return o
}

// dateKey is the sort value of a date parameter: its lowest instant
// ascending, its highest descending, in milliseconds (stored as BSON dates).
func dateKey(t testing.TB, desc bool, path ...string) func(synRes) (float64, bool) {
	return func(r synRes) (float64, bool) {
		spans := synDates(t, r, path...)
		if len(spans) == 0 {
			return 0, false
		}
		k := spans[0].lo
		if desc {
			k = spans[0].hi
		}
		for _, s := range spans[1:] {
			if desc && s.hi.After(k) {
				k = s.hi
			}
			if !desc && s.lo.Before(k) {
				k = s.lo
			}
		}
		return float64(k.UnixMilli()), true
	}
}

// numKey is the sort value of a number or quantity parameter: its lowest
// value ascending, its highest descending.
func numKey(t testing.TB, desc bool, path ...string) func(synRes) (float64, bool) {
	return func(r synRes) (float64, bool) {
		nums := synNumbers(t, r, path...)
		if len(nums) == 0 {
			return 0, false
		}
		k := nums[0].v
		for _, n := range nums[1:] {
			if desc {
				k = math.Max(k, n.v)
			} else {
				k = math.Min(k, n.v)
			}
		}
		return k, true
	}
}

// ---- the rows ----

type synRow struct {
	name  string
	query string   // Type?k=v&k=v, values unencoded
	want  []string // ids; order matters when ordered
	// order, when set, is the expected order (and want its ids).
	order *synOrder
	// ordered compares the order; firstPage reads the first page only;
	// count checks _summary=count; none expects no match.
	ordered, firstPage, count, none bool
	// pageSize, when set, checks every page holds at most that many (and
	// is the number of ids a firstPage row expects).
	pageSize int
	// bug marks a row that shows a product bug: it is skipped while it fails.
	bug string
}

// synPath encodes a row query: /Type?encoded.
func synPath(query string) string {
	typ, raw, _ := strings.Cut(query, "?")
	v := url.Values{}
	for _, kv := range strings.Split(raw, "&") {
		k, val, _ := strings.Cut(kv, "=")
		v.Add(k, val)
	}
	if !v.Has("_count") {
		v.Set("_count", "100")
	}
	return "/" + typ + "?" + v.Encode()
}

func synNextLink(t *testing.T, b map[string]any) string {
	return synLink(t, b, "next")
}

// synLink is the request of the bundle's link of relation rel ("" when none).
func synLink(t *testing.T, b map[string]any, rel string) string {
	for _, l := range b["link"].([]any) {
		m := l.(map[string]any)
		if m["relation"] == rel {
			u, err := url.Parse(m["url"].(string))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimPrefix(u.RequestURI(), "/fhir/r4")
		}
	}
	return ""
}

// synBackward follows the previous links from the last page read (resp)
// and tells how the pages differ from those read forward.
func synBackward(t *testing.T, e *env, query string, resp *response, pages [][]string) string {
	for i := len(pages) - 2; i >= 0; i-- {
		prev := synLink(t, resp.JSON(t), "previous")
		if prev == "" {
			return fmt.Sprintf("%s: page %d has no previous link", query, i+1)
		}
		if resp = e.get(prev); resp.Status != http.StatusOK {
			return fmt.Sprintf("GET %s: status %d: %s", prev, resp.Status, resp.Body)
		}
		if got := matchIDs(t, resp); !slices.Equal(got, pages[i]) {
			return fmt.Sprintf("%s: page %d read backwards is %v, forwards %v", query, i, got, pages[i])
		}
	}
	return ""
}

// synCheck runs a row and describes how the answer differs ("" when it is right).
func synCheck(t *testing.T, e *env, row synRow) string {
	path := synPath(row.query)
	resp := e.get(path)
	if resp.Status != http.StatusOK {
		return fmt.Sprintf("GET %s: status %d: %s", row.query, resp.Status, resp.Body)
	}
	first := resp.JSON(t)
	total := "none"
	if n, ok := first["total"].(json.Number); ok {
		total = n.String()
	}
	if row.count {
		if total != strconv.Itoa(len(row.want)) || first["entry"] != nil {
			return fmt.Sprintf("%s: total %s with %d entries, want total %d and no entries", row.query, total, len(matchIDs(t, resp)), len(row.want))
		}
		return ""
	}
	var got []string
	var pages [][]string
	seen := map[string]bool{}
	for page := 0; ; page++ {
		ids := matchIDs(t, resp)
		pages = append(pages, ids)
		if row.pageSize > 0 && len(ids) > row.pageSize {
			return fmt.Sprintf("%s: page %d has %d entries", row.query, page, len(ids))
		}
		for _, id := range ids {
			if seen[id] {
				return fmt.Sprintf("%s: %s returned twice (page %d)", row.query, id, page)
			}
			seen[id] = true
		}
		got = append(got, ids...)
		next := synNextLink(t, resp.JSON(t))
		if row.firstPage || next == "" {
			break
		}
		if page > 50 {
			return row.query + ": more than 50 pages"
		}
		if resp = e.get(next); resp.Status != http.StatusOK {
			return fmt.Sprintf("GET %s: status %d: %s", next, resp.Status, resp.Body)
		}
	}
	if msg := synBackward(t, e, row.query, resp, pages); msg != "" {
		return msg
	}
	want := slices.Clone(row.want)
	if row.firstPage && len(want) > row.pageSize {
		want = want[:row.pageSize]
	}
	if !row.ordered {
		slices.Sort(got)
		slices.Sort(want)
	}
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		var missing, extra []string
		for _, id := range want {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		for _, id := range got {
			if !slices.Contains(want, id) {
				extra = append(extra, id)
			}
		}
		return fmt.Sprintf("%s:\n got  %d %v\n want %d %v\n missing %v\n extra %v", row.query, len(got), got, len(want), want, missing, extra)
	}
	if total != strconv.Itoa(len(row.want)) {
		return fmt.Sprintf("%s: total %s, want %d", row.query, total, len(row.want))
	}
	return ""
}

func TestSyntheaSearch(t *testing.T) {
	start := time.Now()
	d := synLoad(t)
	loaded := time.Since(start)
	t.Cleanup(func() {
		n := 0
		for _, rs := range d.res {
			n += len(rs)
		}
		t.Logf("%d resources loaded in %v, searched in %v", n, loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))
	})
	rows := synRows(t, d)
	t.Run("rows", func(t *testing.T) {
		for i, row := range rows {
			if testing.Short() && i%synShortStride != 0 {
				continue
			}
			t.Run(row.name, func(t *testing.T) {
				t.Parallel()
				synRunRow(t, d, row)
			})
		}
	})
}

// synRunRow checks one row; a row marked as a bug is skipped while it fails.
func synRunRow(t *testing.T, d *synData, row synRow) {
	if row.order != nil {
		row.want = append(slices.Clone(row.order.present), row.order.missing...)
		row.ordered = true
	}
	if len(row.want) == 0 && !row.none {
		t.Fatalf("%s: the expectation is empty; the row does not test anything", row.query)
	}
	if row.none && len(row.want) != 0 {
		t.Fatalf("%s: expected no match but the data has %v", row.query, row.want)
	}
	e := *d.e // the row's own test reports the row's failures
	e.t = t
	problem := synCheck(t, &e, row)
	switch {
	case problem != "" && row.bug != "":
		t.Skipf("BUG: %s\n%s", row.bug, problem)
	case problem != "":
		t.Fatal(problem)
	case row.bug != "":
		t.Fatalf("row marked as a bug (%s) now passes: remove the mark", row.bug)
	}
}

// synRows builds the table from the loaded data.
func synRows(t *testing.T, d *synData) []synRow {
	p := d.patientID
	pat := "Patient/" + p
	prac := func(npi string) string { return d.refs["Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|"+npi] }
	org := func(uuid string) string {
		return d.refs["Organization?identifier=https://github.com/synthetichealth/synthea|"+uuid]
	}
	loc := func(uuid string) string {
		return d.refs["Location?identifier=https://github.com/synthetichealth/synthea|"+uuid]
	}
	emerDoc := prac("9999888396")
	stanley := org("fb4a08b8-57ee-382b-b3cb-43d94f1bb4c0")
	stanleyLoc := loc("48282f29-73ac-39cb-8a6d-28cb95a46c4d")
	for _, ref := range []string{emerDoc, stanley, stanleyLoc} {
		if ref == "" {
			t.Fatalf("a conditional reference of the rows was not resolved: %v", d.refs)
		}
	}
	obs := d.res["Observation"]
	firstObs, secondObs := obs[0]["id"].(string), obs[1]["id"].(string)
	obsEnc := synRefs(obs[0], "encounter")[0]
	var medRef string
	for _, r := range d.res["MedicationRequest"] {
		if refs := synRefs(r, "medicationReference"); len(refs) > 0 {
			medRef = refs[0]
			break
		}
	}
	base := d.e.srv.URL + "/fhir/r4/"
	mid := d.midCond.Format("2006-01-02T15:04:05.000Z")
	before := d.start.Format("2006-01-02T15:04:05.000Z")
	updatedAfter := func(typ string, at time.Time) []string {
		return d.where(typ, func(r synRes) bool {
			lu, err := time.Parse(time.RFC3339Nano, d.updated[typ+"/"+r["id"].(string)])
			if err != nil {
				t.Fatal(err)
			}
			return lu.After(at)
		})
	}
	enc := func(q string) []string { return d.date(t, "Encounter", q, "period") }
	const effective = "effectiveDateTime|effectivePeriod|effectiveInstant" // Observation.effective
	const occurrence = "occurrenceDateTime"                                // Immunization.occurrence (occurrenceString is no date)
	obsDate := func(q string) []string { return d.date(t, "Observation", q, effective) }
	birth := func(q string) []string { return d.date(t, "Patient", q, "birthDate") }
	onset := func(q string) []string { return d.date(t, "Condition", q, "onsetDateTime|onsetPeriod") }
	prob := func(q string) []string {
		return d.num(t, "RiskAssessment", q, "prediction", "probabilityDecimal|probabilityRange")
	}
	qty := func(q string) []string { return d.num(t, "Observation", q, "valueQuantity") }
	vitals := d.token("Observation", "vital-signs", "category")
	weights := d.token("Observation", "http://loinc.org|29463-7", "code")
	amb := d.token("Encounter", "AMB", "class")
	all := func(typ string) []string { return d.where(typ, func(synRes) bool { return true }) }
	allObs, allPatients := all("Observation"), all("Patient")
	by := func(typ string, ids []string, desc bool, key func(synRes) (float64, bool)) *synOrder {
		o := d.sortedBy(typ, ids, desc, key)
		return &o
	}

	return []synRow{
		// string
		{name: "string prefix", query: "Patient?family=harv", want: d.str("Patient", "", "harv", "name", "family")},
		{name: "string is case-insensitive", query: "Patient?family=HARVEY63", want: d.str("Patient", "", "HARVEY63", "name", "family")},
		{name: "string prefix several matches", query: "Patient?family=solo", want: d.str("Patient", "", "solo", "name", "family")},
		{name: "string ignores accents in the data", query: "Practitioner?family=calderon", want: d.str("Practitioner", "", "calderon", "name", "family")},
		{name: "string ignores accents in the query", query: "Practitioner?family=CALDERÓN", want: d.str("Practitioner", "", "CALDERÓN", "name", "family")},
		{name: "string or", query: "Patient?given=peter,jaina", want: d.str("Patient", "", "peter,jaina", "name", "given")},
		{name: "string name covers given", query: "Patient?name=breana", want: d.str("Patient", "", "breana", "name")},
		{name: "string family is not a contact's", query: "Patient?family=marche", want: d.str("Patient", "", "marche", "name", "family"), none: true},
		{name: "string :exact", query: "Practitioner?family:exact=Calderón210", want: d.str("Practitioner", "exact", "Calderón210", "name", "family")},
		{name: "string :exact keeps accents", query: "Practitioner?family:exact=Calderon210", want: d.str("Practitioner", "exact", "Calderon210", "name", "family"), none: true},
		{name: "string :exact on a name part", query: "Patient?name:exact=Breana975", want: d.str("Patient", "exact", "Breana975", "name")},
		{name: "string :contains", query: "Patient?family:contains=ARVEY", want: d.str("Patient", "contains", "ARVEY", "name", "family")},
		{name: "string :contains in a name", query: "Practitioner?name:contains=lderó", want: d.str("Practitioner", "contains", "lderó", "name")},
		{name: "string address city", query: "Patient?address-city=fall river", want: d.str("Patient", "", "fall river", "address", "city")},
		{name: "string organization name", query: "Organization?name=stanley street", want: d.str("Organization", "", "stanley street", "name")},

		// token
		{name: "token code", query: "Patient?gender=female", want: d.token("Patient", "female", "gender")},
		{name: "token :not keeps resources without the element", query: "Patient?gender:not=male", want: d.not("Patient", d.token("Patient", "male", "gender"))},
		{name: "token identifier system|value", query: "Patient?identifier=http://hl7.org/fhir/sid/us-ssn|999-79-6848", want: d.token("Patient", "http://hl7.org/fhir/sid/us-ssn|999-79-6848", "identifier")},
		{name: "token identifier value", query: "Patient?identifier=12345", want: d.token("Patient", "12345", "identifier")},
		{name: "token identifier |value has no system", query: "Patient?identifier=|AB60001", want: d.token("Patient", "|AB60001", "identifier")},
		{name: "token identifier system|", query: "Patient?identifier=http://hl7.org/fhir/sid/us-ssn|", want: d.token("Patient", "http://hl7.org/fhir/sid/us-ssn|", "identifier")},
		{name: "token :of-type", query: "Patient?identifier:of-type=http://terminology.hl7.org/CodeSystem/v2-0203|MR|12345",
			want: d.where("Patient", func(r synRes) bool {
				return synOfType(r, "http://terminology.hl7.org/CodeSystem/v2-0203|MR|12345", "identifier")
			})},
		{name: "token :of-type Synthea SSN", query: "Patient?identifier:of-type=http://terminology.hl7.org/CodeSystem/v2-0203|SS|999-79-6848",
			want: d.where("Patient", func(r synRes) bool {
				return synOfType(r, "http://terminology.hl7.org/CodeSystem/v2-0203|SS|999-79-6848", "identifier")
			})},
		{name: "token system|code", query: "Observation?code=http://loinc.org|8302-2", want: d.token("Observation", "http://loinc.org|8302-2", "code")},
		{name: "token code without system", query: "Observation?code=85354-9", want: d.token("Observation", "85354-9", "code")},
		{name: "token |code matches only codes without system", query: "Observation?code=|8302-2", want: d.token("Observation", "|8302-2", "code"), none: true},
		{name: "token system|", query: "Observation?code=http://snomed.info/sct|", want: d.token("Observation", "http://snomed.info/sct|", "code")},
		{name: "token :text", query: "Observation?code:text=body", want: d.where("Observation", func(r synRes) bool { return synString("", "body", synTexts(r, "code")) })},
		{name: "token :text of a vaccine", query: "Immunization?vaccine-code:text=covid", want: d.where("Immunization", func(r synRes) bool { return synString("", "covid", synTexts(r, "vaccineCode")) })},
		{name: "token category code", query: "Observation?category=vital-signs", want: vitals},
		{name: "token category system|code", query: "Observation?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory",
			want: d.token("Observation", "http://terminology.hl7.org/CodeSystem/observation-category|laboratory", "category")},
		{name: "token :not final", query: "Observation?status:not=final", want: d.not("Observation", d.token("Observation", "final", "status"))},
		{name: "token or", query: "Observation?status=cancelled,preliminary", want: append(d.token("Observation", "cancelled", "status"), d.token("Observation", "preliminary", "status")...)},
		{name: "token clinical-status", query: "Condition?clinical-status=active", want: d.token("Condition", "active", "clinicalStatus")},
		{name: "token clinical-status :not", query: "Condition?clinical-status:not=resolved", want: d.not("Condition", d.token("Condition", "resolved", "clinicalStatus"))},
		{name: "token condition code", query: "Condition?code=http://snomed.info/sct|10509002", want: d.token("Condition", "http://snomed.info/sct|10509002", "code")},
		{name: "token Coding class", query: "Encounter?class=EMER", want: d.token("Encounter", "EMER", "class")},
		{name: "token Coding class system|code", query: "Encounter?class=http://terminology.hl7.org/CodeSystem/v3-ActCode|AMB", want: amb},
		{name: "token vaccine-code", query: "Immunization?vaccine-code=http://hl7.org/fhir/sid/cvx|140", want: d.token("Immunization", "http://hl7.org/fhir/sid/cvx|140", "vaccineCode")},
		{name: "token medication code", query: "MedicationRequest?code=http://www.nlm.nih.gov/research/umls/rxnorm|313782", want: d.token("MedicationRequest", "http://www.nlm.nih.gov/research/umls/rxnorm|313782", "medicationCodeableConcept")},
		{name: "token and", query: "Condition?clinical-status=active&code=http://snomed.info/sct|314529007",
			want: synAnd(d.token("Condition", "active", "clinicalStatus"), d.token("Condition", "http://snomed.info/sct|314529007", "code"))},
		{name: "_id", query: "Observation?_id=" + firstObs + "," + secondObs, want: []string{firstObs, secondObs}},
		{name: "_id and another parameter", query: "Observation?_id=" + firstObs + "&status=cancelled", want: synAnd([]string{firstObs}, d.token("Observation", "cancelled", "status")), none: true},
		{name: "_id of two sources", query: "Patient?_id=" + p + ",example", want: []string{p, "example"}},

		// reference
		{name: "reference Type/id", query: "Observation?subject=" + pat, want: d.ref("Observation", pat, "subject")},
		{name: "reference id", query: "Condition?subject=" + p, want: d.ref("Condition", pat, "subject")},
		{name: "reference :Type", query: "Condition?subject:Patient=" + p, want: d.ref("Condition", pat, "subject")},
		{name: "reference absolute URL of this server", query: "Immunization?patient=" + base + pat, want: d.ref("Immunization", pat, "patient")},
		{name: "reference patient parameter", query: "Condition?patient=" + p, want: d.ref("Condition", pat, "subject")},
		{name: "reference of the official examples", query: "Observation?subject=Patient/example", want: d.ref("Observation", "Patient/example", "subject")},
		{name: "reference rewritten urn:uuid", query: "Observation?encounter=" + obsEnc, want: d.ref("Observation", obsEnc, "encounter")},
		{name: "reference rewritten urn:uuid of a type not stored", query: "MedicationRequest?medication=" + medRef, want: d.ref("MedicationRequest", medRef, "medicationReference")},
		{name: "reference resolved conditional participant", query: "Encounter?participant=" + emerDoc, want: d.ref("Encounter", emerDoc, "participant", "individual")},
		{name: "reference practitioner parameter", query: "Encounter?practitioner=" + emerDoc, want: d.ref("Encounter", emerDoc, "participant", "individual")},
		{name: "reference resolved conditional organization", query: "Encounter?service-provider=" + stanley, want: d.ref("Encounter", stanley, "serviceProvider")},
		{name: "reference resolved conditional location", query: "Encounter?location=" + stanleyLoc, want: d.ref("Encounter", stanleyLoc, "location", "location")},
		{name: "reference requester", query: "MedicationRequest?requester=" + emerDoc, want: d.ref("MedicationRequest", emerDoc, "requester")},
		{name: "reference and token", query: "Condition?subject=" + pat + "&code=http://snomed.info/sct|10509002",
			want: synAnd(d.ref("Condition", pat, "subject"), d.token("Condition", "http://snomed.info/sct|10509002", "code"))},
		{name: "_has", query: "Patient?_has:Observation:subject:code=http://loinc.org|8302-2", want: d.where("Patient", func(r synRes) bool {
			return len(synAnd(d.ref("Observation", "Patient/"+r["id"].(string), "subject"), d.token("Observation", "http://loinc.org|8302-2", "code"))) > 0
		})},

		// date
		{name: "date ge day on Periods", query: "Encounter?date=ge2015-01-01", want: enc("ge2015-01-01")},
		{name: "date eq year", query: "Encounter?date=2016", want: enc("2016")},
		{name: "date eq month", query: "Encounter?date=eq2016-05", want: enc("eq2016-05")},
		{name: "date eq day in UTC", query: "Encounter?date=2013-04-03", want: enc("2013-04-03")},
		{name: "date ne year", query: "Encounter?date=ne2016", want: enc("ne2016")},
		{name: "date gt day", query: "Encounter?date=gt2022-09-12", want: enc("gt2022-09-12")},
		{name: "date lt month", query: "Encounter?date=lt2014-05", want: enc("lt2014-05")},
		{name: "date le year", query: "Encounter?date=le2014", want: enc("le2014")},
		{name: "date sa month", query: "Encounter?date=sa2024-01", want: enc("sa2024-01")},
		{name: "date eb year", query: "Encounter?date=eb2014", want: enc("eb2014")},
		{name: "date ap year", query: "Encounter?date=ap2019", want: enc("ap2019")},
		{name: "date ge a day a Period overlaps from below", query: "Encounter?date=ge2016-05-05", want: enc("ge2016-05-05")},
		{name: "date le a day a Period overlaps from above", query: "Encounter?date=le2016-05-04", want: enc("le2016-05-04")},
		{name: "date range with two bounds", query: "Encounter?date=ge2018&date=lt2019", want: synAnd(enc("ge2018"), enc("lt2019"))},
		{name: "date dateTime day", query: "Observation?date=2015-04-15", want: obsDate("2015-04-15")},
		{name: "date dateTime with offset", query: "Immunization?date=2023-05-18T03:41:30+05:30", want: d.date(t, "Immunization", "2023-05-18T03:41:30+05:30", occurrence)},
		{name: "date gt instant in UTC", query: "Condition?onset-date=gt2020-05-13T22:11:30Z", want: onset("gt2020-05-13T22:11:30Z")},
		{name: "date open Period end", query: "Observation?date=ge2025", want: obsDate("ge2025")},
		{name: "date :missing=true", query: "Observation?date:missing=true", want: d.missing("Observation", effective)},
		{name: "date birthdate year", query: "Patient?birthdate=2001", want: birth("2001")},
		{name: "date birthdate month", query: "Patient?birthdate=2001-03", want: birth("2001-03")},
		{name: "date birthdate day", query: "Patient?birthdate=eq2001-03-15", want: birth("eq2001-03-15")},
		{name: "date birthdate ne", query: "Patient?birthdate=ne1974-12-25", want: birth("ne1974-12-25")},
		{name: "date birthdate lt", query: "Patient?birthdate=lt1950", want: birth("lt1950")},
		{name: "date birthdate ge", query: "Patient?birthdate=ge2017-05-15", want: birth("ge2017-05-15")},
		{name: "date birthdate sa", query: "Patient?birthdate=sa2001-03-15", want: birth("sa2001-03-15")},
		{name: "date birthdate eb", query: "Patient?birthdate=eb1960", want: birth("eb1960")},
		{name: "date birthdate ap", query: "Patient?birthdate=ap1970", want: birth("ap1970")},
		{name: "date onset lt", query: "Condition?onset-date=lt2016", want: onset("lt2016")},
		{name: "date onset month", query: "Condition?onset-date=2019-05", want: onset("2019-05")},
		{name: "date abatement :missing", query: "Condition?abatement-date:missing=true", want: d.missing("Condition", "abatementDateTime|abatementPeriod")},
		{name: "date :missing=true with a string value", query: "Immunization?date:missing=true", want: d.missing("Immunization", occurrence)},
		{name: "date immunization year", query: "Immunization?date=2021", want: d.date(t, "Immunization", "2021", occurrence)},
		{name: "date authoredon ge", query: "MedicationRequest?authoredon=ge2021", want: d.date(t, "MedicationRequest", "ge2021", "authoredOn")},
		{name: "_lastUpdated gt before the load", query: "Patient?_lastUpdated=gt" + before, want: updatedAfter("Patient", d.start)},
		{name: "_lastUpdated gt in the middle of the load", query: "Condition?_lastUpdated=gt" + mid, want: updatedAfter("Condition", d.midCond)},
		{name: "_lastUpdated le in the middle of the load", query: "Condition?_lastUpdated=le" + mid, want: d.not("Condition", updatedAfter("Condition", d.midCond))},

		// number
		{name: "number eq", query: "RiskAssessment?probability=0.02", want: prob("0.02")},
		{name: "number eq among several values", query: "RiskAssessment?probability=0.000368", want: prob("0.000368")},
		{name: "number gt", query: "RiskAssessment?probability=gt0.01", want: prob("gt0.01")},
		{name: "number lt", query: "RiskAssessment?probability=lt0.00020", want: prob("lt0.00020")},
		{name: "number ge", query: "RiskAssessment?probability=ge0.0016", want: prob("ge0.0016")},
		{name: "number le", query: "RiskAssessment?probability=le0.0002", want: prob("le0.0002")},
		{name: "number ne", query: "RiskAssessment?probability=ne0.02", want: prob("ne0.02")},
		{name: "number ap", query: "RiskAssessment?probability=ap0.0004", want: prob("ap0.0004")},
		{name: "number lt compares with the exact value", query: "RiskAssessment?probability=lt0.0004", want: prob("lt0.0004")},
		{name: "number :missing=true", query: "RiskAssessment?probability:missing=true", want: d.missing("RiskAssessment", "prediction", "probabilityDecimal|probabilityRange")},
		{name: "number :missing=false", query: "RiskAssessment?probability:missing=false", want: d.not("RiskAssessment", d.missing("RiskAssessment", "prediction", "probabilityDecimal|probabilityRange"))},

		// quantity
		{name: "quantity gt with code", query: "Observation?value-quantity=gt8||mg/dL", want: qty("gt8||mg/dL")},
		{name: "quantity eq with system and code", query: "Observation?value-quantity=159.8|http://unitsofmeasure.org|cm", want: qty("159.8|http://unitsofmeasure.org|cm")},
		{name: "quantity ||unit matches the unit text", query: "Observation?value-quantity=44||beats/minute", want: qty("44||beats/minute")},
		{name: "quantity lt without units", query: "Observation?value-quantity=lt5", want: qty("lt5")},
		{name: "quantity gt without units across units", query: "Observation?value-quantity=gt100", want: qty("gt100")},
		{name: "quantity ge with units", query: "Observation?value-quantity=ge72|http://unitsofmeasure.org|kg", want: qty("ge72|http://unitsofmeasure.org|kg")},
		{name: "quantity ap", query: "Observation?value-quantity=ap75||kg", want: qty("ap75||kg")},
		{name: "quantity ne with units", query: "Observation?value-quantity=ne162.5|http://unitsofmeasure.org|cm", want: qty("ne162.5|http://unitsofmeasure.org|cm")},
		{name: "quantity lt compares with the exact value", query: "Observation?value-quantity=lt160|http://unitsofmeasure.org|cm", want: qty("lt160|http://unitsofmeasure.org|cm")},
		{name: "quantity le excludes values above the bound", query: "Observation?value-quantity=le1", want: qty("le1")},
		{name: "quantity :missing=true", query: "Observation?value-quantity:missing=true", want: d.missing("Observation", "valueQuantity")},
		{name: "quantity :missing=false", query: "Observation?value-quantity:missing=false", want: d.not("Observation", d.missing("Observation", "valueQuantity"))},

		// uri
		{name: "uri", query: "Questionnaire?url=http://hl7.org/fhir/Questionnaire/3141", want: d.token("Questionnaire", "http://hl7.org/fhir/Questionnaire/3141", "url")},
		{name: "uri shared by two resources", query: "PlanDefinition?url=http://example.org/PlanDefinition/zika-virus-intervention",
			want: d.token("PlanDefinition", "http://example.org/PlanDefinition/zika-virus-intervention", "url")},
		{name: "uri :below", query: "Questionnaire?url:below=http://hl7.org/fhir/Questionnaire", want: d.where("Questionnaire", func(r synRes) bool {
			return strings.HasPrefix(synStr(r, "url"), "http://hl7.org/fhir/Questionnaire/")
		})},
		{name: "uri :below a path", query: "PlanDefinition?url:below=http://hl7.org/fhir/ig/opioid-cds", want: d.where("PlanDefinition", func(r synRes) bool {
			return strings.HasPrefix(synStr(r, "url"), "http://hl7.org/fhir/ig/opioid-cds/")
		})},
		{name: "uri :above", query: "Questionnaire?url:above=http://hl7.org/fhir/Questionnaire/gcs/_history/2", want: d.token("Questionnaire", "http://hl7.org/fhir/Questionnaire/gcs", "url")},
		{name: "uri :missing=true", query: "Questionnaire?url:missing=true", want: d.missing("Questionnaire", "url")},

		// sort, paging, totals
		{name: "_sort=-date first page", query: "Observation?_sort=-date&_count=5", firstPage: true, pageSize: 5,
			order: by("Observation", allObs, true, dateKey(t, true, effective))},
		{name: "_sort=date over all pages with ties", query: "Observation?category=vital-signs&_sort=date&_count=8", pageSize: 8,
			order: by("Observation", vitals, false, dateKey(t, false, effective))},
		{name: "_sort=-date of one code", query: "Observation?code=http://loinc.org|29463-7&_sort=-date",
			order: by("Observation", weights, true, dateKey(t, true, effective))},
		{name: "_sort=-date over all pages of Periods", query: "Encounter?class=AMB&_sort=-date&_count=15", pageSize: 15,
			order: by("Encounter", amb, true, dateKey(t, true, "period"))},
		{name: "_sort=value-quantity over pages with missing values", query: "Observation?category=vital-signs&_sort=value-quantity&_count=8", pageSize: 8,
			order: by("Observation", vitals, false, numKey(t, false, "valueQuantity"))},
		{name: "_sort=-value-quantity over pages with missing values", query: "Observation?category=vital-signs&_sort=-value-quantity&_count=10", pageSize: 10,
			order: by("Observation", vitals, true, numKey(t, true, "valueQuantity"))},
		{name: "_sort=birthdate over pages with missing values", query: "Patient?_sort=birthdate&_count=9", pageSize: 9,
			order: by("Patient", allPatients, false, dateKey(t, false, "birthDate"))},
		{name: "_sort=-birthdate,_id over pages with missing values", query: "Patient?_sort=-birthdate,_id&_count=7", pageSize: 7,
			order: by("Patient", allPatients, true, dateKey(t, true, "birthDate"))},
		{name: "paging visits every match once", query: "Observation?category=vital-signs&_count=7", pageSize: 7, want: vitals},
		{name: "_summary=count", query: "Observation?category=vital-signs&_summary=count", count: true, want: vitals},
		{name: "_summary=count of a type", query: "Condition?_summary=count", count: true, want: d.where("Condition", func(synRes) bool { return true })},
		{name: "_summary=count of a date search", query: "Encounter?date=ge2020&_summary=count", count: true, want: enc("ge2020")},
	}
}
