package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests of this file join real data: _include, _revinclude, :iterate,
// chains, _has and the Patient compartment on the Synthea patient that
// synLoad (search_synthea_test.go) stores, with its Practitioners,
// Organizations and Locations, decoy patients and official examples.
// Every expected set of Type/id is computed here from the loaded JSON: the
// elements each reference parameter follows are written out below from the
// R4 SearchParameter expressions, never read from the server's registry.

// sjParam is a reference search parameter: the elements its R4 expression
// reads (each a path of element names) and the types it may refer to.
type sjParam struct {
	paths   [][]string
	targets []string
}

// sjParams are the reference parameters the rows follow, by Type:code.
// Encounter and MedicationRequest are complete: _include=* follows every
// one of them.
var sjParams = map[string]sjParam{
	"Encounter:account":          {[][]string{{"account"}}, []string{"Account"}},
	"Encounter:appointment":      {[][]string{{"appointment"}}, []string{"Appointment"}},
	"Encounter:based-on":         {[][]string{{"basedOn"}}, []string{"ServiceRequest"}},
	"Encounter:diagnosis":        {[][]string{{"diagnosis", "condition"}}, []string{"Condition", "Procedure"}},
	"Encounter:episode-of-care":  {[][]string{{"episodeOfCare"}}, []string{"EpisodeOfCare"}},
	"Encounter:location":         {[][]string{{"location", "location"}}, []string{"Location"}},
	"Encounter:part-of":          {[][]string{{"partOf"}}, []string{"Encounter"}},
	"Encounter:participant":      {[][]string{{"participant", "individual"}}, []string{"Practitioner", "PractitionerRole", "RelatedPerson"}},
	"Encounter:patient":          {[][]string{{"subject"}}, []string{"Patient"}},
	"Encounter:practitioner":     {[][]string{{"participant", "individual"}}, []string{"Practitioner"}},
	"Encounter:reason-reference": {[][]string{{"reasonReference"}}, []string{"Condition", "Observation", "Procedure", "ImmunizationRecommendation"}},
	"Encounter:service-provider": {[][]string{{"serviceProvider"}}, []string{"Organization"}},
	"Encounter:subject":          {[][]string{{"subject"}}, []string{"Group", "Patient"}},

	"MedicationRequest:encounter":          {[][]string{{"encounter"}}, []string{"Encounter"}},
	"MedicationRequest:intended-dispenser": {[][]string{{"dispenseRequest", "performer"}}, []string{"Organization"}},
	"MedicationRequest:intended-performer": {[][]string{{"performer"}}, []string{"Practitioner", "Organization", "CareTeam", "Device", "Patient", "PractitionerRole", "RelatedPerson"}},
	"MedicationRequest:medication":         {[][]string{{"medicationReference"}}, []string{"Medication"}},
	"MedicationRequest:patient":            {[][]string{{"subject"}}, []string{"Patient"}},
	"MedicationRequest:requester":          {[][]string{{"requester"}}, []string{"Practitioner", "Organization", "Device", "Patient", "PractitionerRole", "RelatedPerson"}},
	"MedicationRequest:subject":            {[][]string{{"subject"}}, []string{"Group", "Patient"}},

	"Observation:encounter": {[][]string{{"encounter"}}, []string{"Encounter", "EpisodeOfCare"}},
	"Observation:subject":   {[][]string{{"subject"}}, []string{"Group", "Device", "Patient", "Location"}},
	"Observation:patient":   {[][]string{{"subject"}}, []string{"Patient"}},
	"Condition:encounter":   {[][]string{{"encounter"}}, []string{"Encounter"}},
}

// sjCompartment is the R4 Patient CompartmentDefinition for the types the
// loader stores: the elements of each type that put a resource in the
// compartment of the patient they name.
var sjCompartment = map[string][][]string{
	"Patient":           {{"link", "other"}},
	"Encounter":         {{"subject"}},
	"Observation":       {{"subject"}, {"performer"}},
	"Condition":         {{"subject"}, {"asserter"}},
	"Immunization":      {{"patient"}},
	"MedicationRequest": {{"subject"}},
	"RiskAssessment":    {{"subject"}},
}

// sjOutsideCompartment are the stored types no Patient compartment holds.
var sjOutsideCompartment = []string{"Practitioner", "Organization", "Location", "Questionnaire", "PlanDefinition"}

// sjData is the loaded tenant with its resources by Type/id.
type sjData struct {
	*synData
	byKey map[string]synRes
}

func sjKey(r synRes) string { return r["resourceType"].(string) + "/" + r["id"].(string) }

func sjType(key string) string { typ, _, _ := strings.Cut(key, "/"); return typ }

// keys lists the Type/id of the loaded resources of typ that pred accepts.
func (d *sjData) keys(typ string, pred func(synRes) bool) []string {
	var out []string
	for _, r := range d.res[typ] {
		if pred(r) {
			out = append(out, sjKey(r))
		}
	}
	return out
}

// refsAt are the references of r at any of paths.
func sjRefsAt(r synRes, paths [][]string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, synRefs(r, p...)...)
	}
	return out
}

// referring lists the resources of typ that refer through paths to one of
// targets (Type/id).
func (d *sjData) referring(typ string, paths [][]string, targets []string) []string {
	return d.keys(typ, func(r synRes) bool {
		for _, ref := range sjRefsAt(r, paths) {
			if slices.Contains(targets, ref) {
				return true
			}
		}
		return false
	})
}

// referred lists the loaded resources that the resources keys refer to
// through paths, restricted to the types of targets.
func (d *sjData) referred(keys []string, paths [][]string, targets []string) []string {
	var out []string
	for _, k := range keys {
		for _, ref := range sjRefsAt(d.byKey[k], paths) {
			if _, ok := d.byKey[ref]; ok && slices.Contains(targets, sjType(ref)) && !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
	}
	return out
}

func (d *sjData) param(t *testing.T, spec string) sjParam {
	p, ok := sjParams[spec]
	if !ok {
		t.Fatalf("no reference parameter %s in sjParams", spec)
	}
	return p
}

// sjJoin is one _include or _revinclude of a row: Type:code[:Target] (or
// Type:* for _include=*).
type sjJoin struct {
	spec         string
	rev, iterate bool
}

func sjInc(spec string) sjJoin     { return sjJoin{spec: spec} }
func sjIncIter(spec string) sjJoin { return sjJoin{spec: spec, iterate: true} }
func sjRev(spec string) sjJoin     { return sjJoin{spec: spec, rev: true} }
func sjRevIter(spec string) sjJoin { return sjJoin{spec: spec, rev: true, iterate: true} }

// step applies one join to resources (Type/id).
func (d *sjData) step(t *testing.T, j sjJoin, from []string) []string {
	parts := strings.Split(j.spec, ":")
	var params []sjParam
	if parts[1] == "*" {
		for name, p := range sjParams {
			if strings.HasPrefix(name, parts[0]+":") {
				params = append(params, p)
			}
		}
	} else {
		p := d.param(t, parts[0]+":"+parts[1])
		if len(parts) == 3 {
			p.targets = []string{parts[2]}
		}
		params = append(params, p)
	}
	var out []string
	for _, p := range params {
		if j.rev {
			var targets []string
			for _, k := range from {
				if slices.Contains(p.targets, sjType(k)) {
					targets = append(targets, k)
				}
			}
			out = append(out, d.referring(parts[0], p.paths, targets)...)
			continue
		}
		var sources []string
		for _, k := range from {
			if sjType(k) == parts[0] {
				sources = append(sources, k)
			}
		}
		out = append(out, d.referred(sources, p.paths, p.targets)...)
	}
	return out
}

// joins is what R4 adds to a page of matches: every join applied to the
// matches, then the :iterate joins to what was added, until nothing new
// comes; each resource once and never a match.
func (d *sjData) joins(t *testing.T, joins ...sjJoin) func(page []string) []string {
	return func(page []string) []string {
		seen := map[string]bool{}
		for _, k := range page {
			seen[k] = true
		}
		out := []string{}
		frontier := page
		for first := true; len(frontier) > 0; first = false {
			var next []string
			for _, j := range joins {
				if !first && !j.iterate {
					continue
				}
				for _, k := range d.step(t, j, frontier) {
					if !seen[k] {
						seen[k] = true
						next = append(next, k)
					}
				}
			}
			out = append(out, next...)
			frontier = next
		}
		slices.Sort(out)
		return out
	}
}

// name lists the resources of typ whose name parameter (string, default
// matching) matches q: Patient, Practitioner and RelatedPerson name their
// HumanNames, Location its name and alias.
func (d *sjData) name(typ, q string) []string {
	paths := [][]string{{"name"}}
	if typ == "Location" {
		paths = [][]string{{"name"}, {"alias"}}
	}
	return d.keys(typ, func(r synRes) bool {
		for _, p := range paths {
			if synString("", q, synStrings(r, p...)) {
				return true
			}
		}
		return false
	})
}

// tokenKeys lists the resources of typ whose element at path holds token q.
func (d *sjData) tokenKeys(typ, q string, path ...string) []string {
	return d.keys(typ, func(r synRes) bool { return synToken(q, synCodes(r, path...)) })
}

// compartment is the Patient compartment of patient (Type/id) for typ.
func (d *sjData) compartment(typ, patient string) []string {
	return d.referring(typ, sjCompartment[typ], []string{patient})
}

// sjForeignObservation is the id of the Observation that refers to another
// server's Patient/f001.
const sjForeignObservation = "sj-foreign"

// Product bugs the rows show (see the rows that name them).
const (
	sjBugIncludeTarget = "_include=Type:param:Target does not check Target: an unknown type (or one the parameter cannot refer to) " +
		"answers 200 with no include, while an unknown parameter answers 400 (search/query.go includeSpec takes parts[2] as is; " +
		"store/include.go findCurrent then skips the unknown type silently)"
)

// sjRow is one request and what it must answer.
type sjRow struct {
	name string
	// path is the request without the base: Type?k=v&k=v, Patient/id/Type?...
	// or Patient/id/$everything; values unencoded; _count=100 unless given.
	path string
	// matches are the Type/id of every match across the pages.
	matches []string
	// include gives the include entries expected on a page of these
	// matches; nil expects none.
	include func(page []string) []string
	// noInclude marks a row whose include expectation is empty on purpose.
	noInclude bool
	// none marks a row that expects no match.
	none bool
	// everything: every entry a match.
	everything bool
	// status, when set, is the error status expected, with an issue whose
	// expression contains expr.
	status int
	expr   string
	// bug marks a row that shows a product bug: skipped while it fails.
	bug string
}

// sjURL encodes a row path: /base?encoded.
func sjURL(path string) string {
	base, raw, _ := strings.Cut(path, "?")
	v := url.Values{}
	if raw != "" {
		for _, kv := range strings.Split(raw, "&") {
			k, val, _ := strings.Cut(kv, "=")
			v.Add(k, val)
		}
	}
	if !v.Has("_count") {
		v.Set("_count", "100")
	}
	return "/" + base + "?" + v.Encode()
}

// sjCheck runs a row and describes how the answer differs ("" when right).
func sjCheck(t *testing.T, e *env, row sjRow) string {
	resp := e.get(sjURL(row.path))
	if row.status != 0 {
		if resp.Status != row.status {
			return fmt.Sprintf("GET %s: status %d, want %d: %s", row.path, resp.Status, row.status, resp.Body)
		}
		wantOutcome(t, resp, row.status, row.expr)
		return ""
	}
	var got []string
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if resp.Status != http.StatusOK {
			return fmt.Sprintf("GET %s (page %d): status %d: %s", row.path, page, resp.Status, resp.Body)
		}
		b := resp.JSON(t)
		total, hasTotal := b["total"].(json.Number)
		if !hasTotal || total.String() != fmt.Sprint(len(row.matches)) {
			return fmt.Sprintf("%s (page %d): total %v, want %d (matches only)", row.path, page, b["total"], len(row.matches))
		}
		var matches, included []string
		onPage := map[string]bool{}
		entries, _ := b["entry"].([]any)
		for _, en := range entries {
			m := en.(map[string]any)
			res := m["resource"].(map[string]any)
			key := res["resourceType"].(string) + "/" + res["id"].(string)
			if onPage[key] {
				return fmt.Sprintf("%s (page %d): %s is on the page twice", row.path, page, key)
			}
			onPage[key] = true
			switch mode, _ := m["search"].(map[string]any)["mode"].(string); mode {
			case "match":
				if seen[key] {
					return fmt.Sprintf("%s (page %d): match %s was on an earlier page", row.path, page, key)
				}
				seen[key] = true
				matches = append(matches, key)
			case "include":
				included = append(included, key)
			default:
				return fmt.Sprintf("%s (page %d): %s has search.mode %q", row.path, page, key, mode)
			}
		}
		got = append(got, matches...)
		want := []string{}
		if row.include != nil {
			want = row.include(matches)
		}
		slices.Sort(included)
		if !slices.Equal(included, want) && !(len(included) == 0 && len(want) == 0) {
			return fmt.Sprintf("%s (page %d): includes\n got  %d %v\n want %d %v\n missing %v\n extra %v", row.path, page,
				len(included), included, len(want), want, sjMinus(want, included), sjMinus(included, want))
		}
		next := synNextLink(t, b)
		if next == "" {
			break
		}
		if page > 50 {
			return row.path + ": more than 50 pages"
		}
		resp = e.get(next)
	}
	want := sorted(row.matches)
	slices.Sort(got)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		return fmt.Sprintf("%s: matches\n got  %d %v\n want %d %v\n missing %v\n extra %v", row.path,
			len(got), got, len(want), want, sjMinus(want, got), sjMinus(got, want))
	}
	return ""
}

// sjMinus lists the elements of a that b lacks.
func sjMinus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestSyntheaJoins(t *testing.T) {
	start := time.Now()
	d := &sjData{synData: synLoad(t), byKey: map[string]synRes{}}
	// An Observation about another server's patient whose id is that of
	// the official example Patient/f001: it is no reference to Patient/f001.
	d.synPut(t, synRes{"resourceType": "Observation", "id": sjForeignObservation, "status": "final",
		"code":    map[string]any{"coding": []any{map[string]any{"system": "http://loinc.org", "code": "8310-5"}}},
		"subject": map[string]any{"reference": "http://other.example.org/fhir/Patient/f001"}})
	loaded := time.Since(start)
	for _, rs := range d.res {
		for _, r := range rs {
			d.byKey[sjKey(r)] = r
		}
	}
	for typ := range d.res {
		if _, ok := sjCompartment[typ]; !ok && !slices.Contains(sjOutsideCompartment, typ) {
			t.Fatalf("the loader stores %s: add it to sjCompartment or sjOutsideCompartment", typ)
		}
	}
	t.Cleanup(func() {
		t.Logf("%d resources loaded in %v, joined in %v", len(d.byKey), loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))
	})
	rows := sjRows(t, d)
	t.Run("rows", func(t *testing.T) {
		for i, row := range rows {
			if testing.Short() && i%synShortStride != 0 {
				continue
			}
			t.Run(row.name, func(t *testing.T) { sjRunRow(t, d, row) })
		}
	})
}

// sjRunRow checks one row; a row marked as a bug is skipped while it fails.
func sjRunRow(t *testing.T, d *sjData, row sjRow) {
	if row.status == 0 {
		if len(row.matches) == 0 && !row.none {
			t.Fatalf("%s: no match expected; the row does not test anything", row.path)
		}
		if row.none && len(row.matches) > 0 {
			t.Fatalf("%s: expected no match but the data has %v", row.path, row.matches)
		}
		if row.include != nil && len(row.include(row.matches)) == 0 && !row.noInclude {
			t.Fatalf("%s: no include expected; the row does not test anything", row.path)
		}
	}
	e := *d.e
	e.t = t
	problem := sjCheck(t, &e, row)
	switch {
	case problem != "" && row.bug != "":
		t.Skipf("BUG: %s\n%s", row.bug, problem)
	case problem != "":
		t.Fatal(problem)
	case row.bug != "":
		t.Fatalf("row marked as a bug (%s) now passes: remove the mark", row.bug)
	}
}

// sjRows builds the table from the loaded data.
func sjRows(t *testing.T, d *sjData) []sjRow {
	p := d.patientID
	pat := "Patient/" + p
	prac := func(npi string) string { return d.refs["Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|"+npi] }
	hammes, amaya := prac("9999975094"), prac("9999985994")
	if hammes == "" || amaya == "" {
		t.Fatalf("practitioners not loaded: %q %q", hammes, amaya)
	}
	const (
		heartRate = "http://loinc.org|8867-4"
		smoking   = "http://loinc.org|72166-2"
	)
	encounter := [][]string{{"encounter"}}
	participant := [][]string{{"participant", "individual"}}
	subject := [][]string{{"subject"}}

	patientObs := d.referring("Observation", subject, []string{pat})
	patientEnc := d.referring("Encounter", subject, []string{pat})
	heartRateObs := synAnd(patientObs, d.tokenKeys("Observation", heartRate, "code"))
	emer := synAnd(patientEnc, d.tokenKeys("Encounter", "EMER", "class"))
	patientMR := d.referring("MedicationRequest", subject, []string{pat})
	obsEncounters := d.referred(patientObs, encounter, []string{"Encounter"})
	if len(obsEncounters) < 2 {
		t.Fatalf("the patient's Observations name %d Encounters", len(obsEncounters))
	}
	twoEnc := obsEncounters[:2]
	ids := func(keys []string) string {
		var out []string
		for _, k := range keys {
			_, id, _ := strings.Cut(k, "/")
			out = append(out, id)
		}
		return strings.Join(out, ",")
	}

	// Chains: the targets first, then who refers to them.
	harvey := append(d.name("Patient", "Harvey63"), d.name("Location", "Harvey63")...)
	peter := append(d.name("Patient", "peter"), d.name("Location", "peter")...)
	byIdentifier := d.tokenKeys("Patient", "http://hospital.smarthealthit.org|"+p, "identifier")
	namedHammes := append(d.name("Practitioner", "Hammes673"), d.name("RelatedPerson", "Hammes673")...)
	namedAmaya := append(d.name("Practitioner", "amaya"), d.name("RelatedPerson", "amaya")...)
	amayaEnc := d.referring("Encounter", participant, namedAmaya)

	// _has: who is referred to by resources matching the inner search.
	has := func(typ string, referrers []string, paths [][]string) []string {
		return d.referred(referrers, paths, []string{typ})
	}
	heartRateEnc := has("Encounter", d.tokenKeys("Observation", heartRate, "code"), encounter)

	// A patient's compartment, every type, and the patient.
	everything := func(patient string) []string {
		out := []string{patient}
		for typ := range d.res {
			if _, ok := sjCompartment[typ]; ok {
				out = append(out, d.compartment(typ, patient)...)
			}
		}
		return out
	}
	foreign := "Observation/" + sjForeignObservation

	return []sjRow{
		// _include
		{name: "_include Encounter:participant", path: "Encounter?patient=" + p + "&_include=Encounter:participant",
			matches: patientEnc, include: d.joins(t, sjInc("Encounter:participant"))},
		{name: "_include on every page", path: "Observation?subject=" + pat + "&_count=25&_include=Observation:encounter",
			matches: patientObs, include: d.joins(t, sjInc("Observation:encounter"))},
		{name: "_include of two parameters", path: "Encounter?patient=" + p + "&class=EMER&_include=Encounter:participant&_include=Encounter:service-provider&_include=Encounter:location",
			matches: emer, include: d.joins(t, sjInc("Encounter:participant"), sjInc("Encounter:service-provider"), sjInc("Encounter:location"))},
		{name: "_include with target type", path: "Encounter?patient=" + p + "&_include=Encounter:participant:Practitioner",
			matches: patientEnc, include: d.joins(t, sjInc("Encounter:participant:Practitioner"))},
		{name: "_include with a target type no reference has", path: "Encounter?patient=" + p + "&_include=Encounter:participant:RelatedPerson",
			matches: patientEnc, include: d.joins(t, sjInc("Encounter:participant:RelatedPerson")), noInclude: true},
		{name: "_include=* of Encounters", path: "Encounter?patient=" + p + "&class=EMER&_include=*",
			matches: emer, include: d.joins(t, sjInc("Encounter:*"))},
		{name: "_include=* skips references that are no parameter and missing targets", path: "MedicationRequest?subject=" + pat + "&_include=*",
			matches: patientMR, include: d.joins(t, sjInc("MedicationRequest:*"))},

		// _revinclude
		{name: "_revinclude Encounter:subject", path: "Patient?_id=" + p + "&_revinclude=Encounter:subject",
			matches: []string{pat}, include: d.joins(t, sjRev("Encounter:subject"))},
		{name: "_revinclude of several patients", path: "Patient?_id=" + p + ",example&_revinclude=Observation:patient",
			matches: []string{pat, "Patient/example"}, include: d.joins(t, sjRev("Observation:patient"))},
		{name: "_revinclude Encounter:participant", path: "Practitioner?_id=" + ids([]string{hammes, amaya}) + "&_revinclude=Encounter:participant",
			matches: []string{hammes, amaya}, include: d.joins(t, sjRev("Encounter:participant"))},
		{name: "_revinclude on every page", path: "Encounter?patient=" + p + "&_count=25&_revinclude=Observation:encounter",
			matches: patientEnc, include: d.joins(t, sjRev("Observation:encounter"))},
		{name: "_include and _revinclude", path: "Encounter?_id=" + ids(twoEnc) + "&_include=Encounter:participant&_revinclude=Observation:encounter&_revinclude=Condition:encounter",
			matches: twoEnc, include: d.joins(t, sjInc("Encounter:participant"), sjRev("Observation:encounter"), sjRev("Condition:encounter"))},

		// :iterate
		{name: "_include:iterate two hops", path: "Observation?subject=" + pat + "&_count=25&_include=Observation:encounter&_include:iterate=Encounter:participant&_include:iterate=Encounter:service-provider",
			matches: patientObs, include: d.joins(t, sjInc("Observation:encounter"), sjIncIter("Encounter:participant"), sjIncIter("Encounter:service-provider"))},
		{name: "_revinclude:iterate back to the matches' type", path: "Observation?subject=" + pat + "&code=" + heartRate + "&_include=Observation:encounter&_revinclude:iterate=Observation:encounter",
			matches: heartRateObs, include: d.joins(t, sjInc("Observation:encounter"), sjRevIter("Observation:encounter"))},
		{name: "_revinclude then _revinclude:iterate", path: "Patient?_id=" + p + "&_revinclude=Encounter:subject&_revinclude:iterate=Observation:encounter",
			matches: []string{pat}, include: d.joins(t, sjRev("Encounter:subject"), sjRevIter("Observation:encounter"))},

		// chains
		{name: "chain subject.name", path: "Observation?subject.name=Harvey63",
			matches: d.referring("Observation", subject, harvey)},
		{name: "chain subject.name of other patients", path: "Observation?subject.name=peter",
			matches: d.referring("Observation", subject, peter)},
		{name: "typed chain subject:Patient.identifier", path: "Observation?subject:Patient.identifier=http://hospital.smarthealthit.org|" + p,
			matches: d.referring("Observation", subject, byIdentifier)},
		{name: "chain and another parameter", path: "Observation?subject.name=Harvey63&code=" + heartRate,
			matches: synAnd(d.referring("Observation", subject, harvey), d.tokenKeys("Observation", heartRate, "code"))},
		{name: "chain participant:Practitioner.identifier", path: "Encounter?participant:Practitioner.identifier=http://hl7.org/fhir/sid/us-npi|9999975094",
			matches: d.referring("Encounter", participant, []string{hammes})},
		{name: "two-level chain encounter.participant.name", path: "Observation?encounter.participant.name=Hammes673",
			matches: d.referring("Observation", encounter, d.referring("Encounter", participant, namedHammes))},
		{name: "chain with _include on every page", path: "Encounter?participant.name=amaya&_count=20&_include=Encounter:participant&_include=Encounter:service-provider",
			matches: amayaEnc, include: d.joins(t, sjInc("Encounter:participant"), sjInc("Encounter:service-provider"))},
		{name: "chain to nothing", path: "Observation?subject.name=Nobody", none: true},

		// reverse chains
		{name: "_has Observation:subject:code", path: "Patient?_has:Observation:subject:code=" + smoking,
			matches: has("Patient", d.tokenKeys("Observation", smoking, "code"), subject)},
		{name: "_has Observation:encounter:code", path: "Encounter?_has:Observation:encounter:code=" + heartRate,
			matches: heartRateEnc},
		{name: "_has Encounter:participant:class", path: "Practitioner?_has:Encounter:participant:class=EMER",
			matches: has("Practitioner", d.tokenKeys("Encounter", "EMER", "class"), participant)},
		{name: "nested _has", path: "Practitioner?_has:Encounter:participant:_has:Observation:encounter:code=" + heartRate,
			matches: has("Practitioner", heartRateEnc, participant)},
		{name: "_has with _revinclude", path: "Patient?_has:Observation:subject:code=" + smoking + "&_revinclude=Encounter:patient",
			matches: has("Patient", d.tokenKeys("Observation", smoking, "code"), subject),
			include: d.joins(t, sjRev("Encounter:patient"))},

		// Patient compartment
		{name: "compartment Observation?code", path: "Patient/" + p + "/Observation?code=" + heartRate,
			matches: synAnd(d.compartment("Observation", pat), d.tokenKeys("Observation", heartRate, "code"))},
		{name: "compartment Encounter with _include", path: "Patient/" + p + "/Encounter?_count=25&_include=Encounter:participant",
			matches: d.compartment("Encounter", pat), include: d.joins(t, sjInc("Encounter:participant"))},
		{name: "compartment $everything", path: "Patient/" + p + "/$everything", matches: everything(pat), everything: true},
		{name: "compartment $everything with linked patients", path: "Patient/pat2/$everything", matches: everything("Patient/pat2"), everything: true},

		// references to another server
		{name: "_include does not follow a reference to another server", path: "Observation?_id=" + sjForeignObservation + "&_include=Observation:subject",
			matches: []string{foreign}, include: d.joins(t, sjInc("Observation:subject")), noInclude: true},
		{name: "_revinclude does not follow a reference to another server", path: "Patient?_id=f001&_revinclude=Observation:subject",
			matches: []string{"Patient/f001"}, include: d.joins(t, sjRev("Observation:subject"))},
		{name: "the compartment holds no resource about another server's patient", path: "Patient/f001/Observation",
			matches: d.compartment("Observation", "Patient/f001")},

		// errors
		{name: "unknown _include parameter", path: "Encounter?_include=Encounter:nosuch", status: http.StatusBadRequest, expr: "_include"},
		{name: "unknown _revinclude parameter", path: "Patient?_revinclude=Encounter:nosuch", status: http.StatusBadRequest, expr: "_revinclude"},
		{name: "_include of a token parameter", path: "Encounter?_include=Encounter:class", status: http.StatusBadRequest, expr: "_include"},
		{name: "_include of another type without :iterate", path: "Observation?_include=Encounter:participant", status: http.StatusBadRequest, expr: "_include"},
		{name: "_include with an unknown target type", path: "Encounter?_include=Encounter:participant:Nosuch", status: http.StatusBadRequest, expr: "_include", bug: sjBugIncludeTarget},
		{name: "_include with an unknown modifier", path: "Encounter?_include:deep=Encounter:participant", status: http.StatusBadRequest, expr: "_include"},
		{name: "unknown _include parameter in a compartment", path: "Patient/" + p + "/Encounter?_include=Encounter:nosuch", status: http.StatusBadRequest, expr: "_include"},
		{name: "chain on a token parameter", path: "Observation?code.name=x", status: http.StatusBadRequest, expr: "code.name"},
		{name: "chain on a date parameter at the second level", path: "Observation?subject:Patient.birthdate.name=x", status: http.StatusBadRequest, expr: "subject:Patient.birthdate.name"},
		{name: "chain to an unknown parameter", path: "Observation?subject.nosuch=x", status: http.StatusBadRequest, expr: "subject.nosuch"},
		{name: "chain of three levels", path: "Observation?encounter.service-provider.partof.name=x", status: http.StatusBadRequest, expr: "encounter.service-provider.partof.name"},
		{name: "chain of three levels in a compartment", path: "Patient/" + p + "/Observation?encounter.participant.organization.name=x", status: http.StatusBadRequest, expr: "encounter.participant.organization.name"},
	}
}
