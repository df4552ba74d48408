package questionnaire

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
)

// responseCheck is one check of a response against its form.
type responseCheck struct {
	ctx      context.Context
	c        *Checker
	opts     Options
	qr, q    map[string]any
	form     *form // the form indexed, when an unknown linkId needs it
	complete bool  // completed or amended: required items must be answered
	issues   []fhirschema.Issue
	err      error
}

func (r *responseCheck) errorf(at, code, format string, args ...any) {
	r.issues = append(r.issues, fhirschema.Issue{Severity: "error", Code: code, Diagnostics: fmt.Sprintf(format, args...), Expression: at})
}

func (r *responseCheck) warnf(at, code, format string, args ...any) {
	r.issues = append(r.issues, fhirschema.Issue{Severity: "warning", Code: code, Diagnostics: fmt.Sprintf(format, args...), Expression: at})
}

// formStatus warns of a response to a form that was not in use when it
// was authored: a draft or retired form, or one outside its effective
// period.
func (r *responseCheck) formStatus() {
	name := formName(r.q)
	switch st, _ := r.q["status"].(string); st {
	case "draft", "retired":
		r.warnf("QuestionnaireResponse.questionnaire", "business-rule", "the Questionnaire %s is %s", name, st)
	}
	authored, _ := r.qr["authored"].(string)
	period, _ := r.q["effectivePeriod"].(map[string]any)
	if authored == "" || period == nil {
		return
	}
	if start, _ := period["start"].(string); start != "" && compareTemporal(authored, start) < 0 {
		r.warnf("QuestionnaireResponse.authored", "business-rule", "the response was authored (%s) before the Questionnaire %s came into effect (%s)", authored, name, start)
	}
	if end, _ := period["end"].(string); end != "" && compareTemporal(authored, end) > 0 {
		r.warnf("QuestionnaireResponse.authored", "business-rule", "the response was authored (%s) after the Questionnaire %s went out of effect (%s)", authored, name, end)
	}
}

// subjectType checks the response's subject against the form's
// subjectType.
func (r *responseCheck) subjectType() {
	types, _ := r.q["subjectType"].([]any)
	subject, _ := r.qr["subject"].(map[string]any)
	ref, _ := subject["reference"].(string)
	if len(types) == 0 || ref == "" || strings.HasPrefix(ref, "#") || strings.HasPrefix(ref, "urn:") {
		return
	}
	typ := referenceType(ref)
	if typ == "" {
		return
	}
	var allowed []string
	for _, t := range types {
		s, _ := t.(string)
		if s == typ || s == "Resource" {
			return
		}
		allowed = append(allowed, s)
	}
	r.errorf("QuestionnaireResponse.subject", "business-rule", "the subject is a %s; the Questionnaire %s is for %s", typ, formName(r.q), strings.Join(allowed, ", "))
}

// formName names a Questionnaire in messages.
func formName(q map[string]any) string {
	if u, _ := q["url"].(string); u != "" {
		if v, _ := q["version"].(string); v != "" {
			return u + "|" + v
		}
		return u
	}
	id, _ := q["id"].(string)
	return "Questionnaire/" + id
}

// scope is the chain of response items enclosing the items being checked,
// innermost last: enableWhen looks for its question there first.
type scope []map[string]any

// items checks the response items got (QuestionnaireResponse.item, or an
// item's or answer's item) against the form items want, at path.
func (r *responseCheck) items(want, got any, path string, sc scope) {
	wantItems := objects(want)
	gotItems, _ := got.([]any)
	found := make([][]int, len(wantItems)) // the response items of each form item
	last := -1
	for i, g := range gotItems {
		at := path + ".item[" + strconv.Itoa(i) + "]"
		gi, ok := g.(map[string]any)
		if !ok {
			continue // the structure rules have said what is wrong
		}
		id, _ := gi["linkId"].(string)
		wi := position(wantItems, id, last)
		if wi < 0 {
			r.unknownLinkID(at, id)
			continue
		}
		if wi < last {
			r.errorf(at, "structure", "item %q is out of order: the Questionnaire puts it before %q", id, linkID(wantItems[last]))
		}
		last = max(last, wi)
		found[wi] = append(found[wi], i)
		r.item(wantItems[wi], gi, at, append(sc, gi))
	}
	for wi, w := range wantItems {
		r.occurrences(w, found[wi], gotItems, path, sc)
	}
}

// position finds the form item with linkId id among items, looking from
// from first: a response follows its form's order.
func position(items []map[string]any, id string, from int) int {
	for k := range items {
		j := (max(from, 0) + k) % len(items)
		if items[j]["linkId"] == id {
			return j
		}
	}
	return -1
}

// unknownLinkID reports a response item whose linkId the form does not
// have where the response puts it.
func (r *responseCheck) unknownLinkID(at, id string) {
	if r.form == nil {
		r.form = indexForm(r.q)
	}
	if _, elsewhere := r.form.byLinkID[id]; elsewhere {
		where := "at the root"
		if p := r.form.parent[id]; p != "" {
			where = "under item " + strconv.Quote(p)
		}
		r.errorf(at, "structure", "item %q is not where the Questionnaire puts it (%s)", id, where)
		return
	}
	r.errorf(at, "structure", "linkId %q is not in the Questionnaire %s", id, formName(r.q))
}

func linkID(it map[string]any) string {
	s, _ := it["linkId"].(string)
	return s
}

// occurrences checks how often the form item w appears among the response
// items (at the indexes found) of the item at path: a repeating group may
// appear several times, anything else once, and a required item that is
// enabled must be there in a completed response.
func (r *responseCheck) occurrences(w map[string]any, found []int, got []any, path string, sc scope) {
	id := linkID(w)
	typ, _ := w["type"].(string)
	repeats := w["repeats"] == true
	if len(found) > 1 && !(typ == "group" && repeats) {
		for _, i := range found[1:] {
			r.errorf(path+".item["+strconv.Itoa(i)+"]", "structure", "item %q appears more than once; only a repeating group may (the answers of a repeating question go in one item)", id)
		}
	}
	_, _, hasMin := extValue(w, extMinOccurs)
	_, _, hasMax := extValue(w, extMaxOccurs)
	if typ == "display" || !r.complete || !(w["required"] == true || hasMin || hasMax) || !r.enabled(w, nil, path, sc) {
		return
	}
	n := 0 // answers or group instances with content
	for _, i := range found {
		gi, _ := got[i].(map[string]any)
		if typ == "group" {
			if answered(gi) {
				n++
			}
		} else {
			n += len(objects(gi["answer"]))
		}
	}
	if w["required"] == true && n == 0 {
		if typ == "group" {
			r.errorf(path, "required", "the required group %q has no answered items", id)
		} else {
			r.errorf(path, "required", "the required item %q has no answer", id)
		}
	}
	if _, v, ok := extValue(w, extMinOccurs); ok {
		if min, ok := intValue(v); ok && n < min {
			r.errorf(path, "required", "item %q needs at least %d answers; it has %d", id, min, n)
		}
	}
	if _, v, ok := extValue(w, extMaxOccurs); ok {
		if max, ok := intValue(v); ok && n > max {
			r.errorf(path, "structure", "item %q allows at most %d answers; it has %d", id, max, n)
		}
	}
}

// answered reports whether a response item or one below it has an answer.
func answered(g map[string]any) bool {
	list, _ := g["answer"].([]any)
	if len(list) > 0 {
		return true
	}
	items, _ := g["item"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && answered(m) {
			return true
		}
	}
	return false
}

// item checks one response item g against its form item w.
func (r *responseCheck) item(w, g map[string]any, at string, sc scope) {
	id := linkID(w)
	typ, _ := w["type"].(string)
	answers := objects(g["answer"])
	enabled := r.enabled(w, g, at, sc)
	if !enabled && (len(answers) > 0 || len(objects(g["item"])) > 0) {
		r.errorf(at, "business-rule", "item %q is answered though it is not enabled (its enableWhen is not met)", id)
		return
	}
	switch typ {
	case "display":
		if len(answers) > 0 || g["item"] != nil {
			r.errorf(at, "structure", "item %q is a display item: it cannot have answers or items", id)
		}
		return
	case "group":
		if len(answers) > 0 {
			r.errorf(at+".answer[0]", "structure", "item %q is a group: it has items, not answers", id)
		}
		r.items(w["item"], g["item"], at, sc)
		return
	}
	if g["item"] != nil {
		r.errorf(at+".item[0]", "structure", "item %q is a question: the items under it go under its answers", id)
	}
	if len(answers) > 1 && w["repeats"] != true {
		r.errorf(at+".answer[1]", "structure", "item %q does not repeat: it allows one answer, not %d", id, len(answers))
	}
	for k, a := range answers {
		aat := at + ".answer[" + strconv.Itoa(k) + "]"
		r.answer(w, a, aat)
		if sub := a["item"]; sub != nil || len(objects(w["item"])) > 0 {
			r.items(w["item"], sub, aat, sc)
		}
	}
	r.readOnly(w, answers, at)
}

// readOnly warns of a read-only item whose answer is not the form's fixed
// initial value: the user could not have given it.
func (r *responseCheck) readOnly(w map[string]any, answers []map[string]any, at string) {
	if w["readOnly"] != true || len(answers) == 0 {
		return
	}
	initial := objects(w["initial"])
	if len(initial) == 0 {
		return
	}
	for k, a := range answers {
		if !r.matchesAny(a, initial) {
			r.warnf(at+".answer["+strconv.Itoa(k)+"]", "business-rule", "item %q is read-only: its answer differs from the Questionnaire's initial value", linkID(w))
		}
	}
}

// matchesAny reports whether the answer's value equals one of the
// elements' value[x].
func (r *responseCheck) matchesAny(a map[string]any, els []map[string]any) bool {
	at, av, ok := answerOf(a, "value")
	if !ok {
		return false
	}
	for _, el := range els {
		if et, ev, ok := answerOf(el, "value"); ok && et == at && sameValue(at, av, ev) {
			return true
		}
	}
	return false
}
