package sdc

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// ExtractRequest is the input of Extract.
type ExtractRequest struct {
	// Response is the QuestionnaireResponse whose answers are extracted.
	Response map[string]any
	// Questionnaire is its form; nil to find it through Data by the
	// response's questionnaire canonical.
	Questionnaire map[string]any
	// Limits bound the expressions; Now fixes now().
	Limits Limits
	Now    time.Time
}

// Extract turns a response's answers into a transaction Bundle of the
// resources they make, ready to POST; nothing is written. Observation-based
// extraction makes an Observation of each answer of a coded question for
// which sdc-questionnaire-observationExtract holds (on the item, an
// ancestor or the form), and of a coded group whose items say how they
// relate to it (component, member, derived); definition-based extraction
// fills the resource
// each sdc-questionnaire-definitionExtract names (or the older
// itemExtractionContext) from the items whose definition points into it
// and from definitionExtractValue. Issues say what could not be extracted;
// when one is an error the Bundle is nil. An error is a failure of d or ctx.
func Extract(ctx context.Context, d Data, req ExtractRequest) (map[string]any, []fhirschema.Issue, error) {
	qr := req.Response
	if qr == nil || qr["resourceType"] != "QuestionnaireResponse" {
		return nil, []fhirschema.Issue{issue("error", "required", "QuestionnaireResponse", "no QuestionnaireResponse to extract from")}, nil
	}
	q := req.Questionnaire
	if q == nil {
		canonical := str(qr["questionnaire"])
		if canonical == "" {
			return nil, []fhirschema.Issue{issue("error", "required", "QuestionnaireResponse.questionnaire", "the response names no Questionnaire to extract with")}, nil
		}
		if d != nil {
			found, err := d.Questionnaire(ctx, canonical)
			if err != nil {
				return nil, nil, &DataError{Op: "find Questionnaire " + canonical, Err: err}
			}
			q = found
		}
		if q == nil {
			return nil, []fhirschema.Issue{issue("error", "not-found", "QuestionnaireResponse.questionnaire", "the Questionnaire %s is not known", canonical)}, nil
		}
	}
	x := &extractor{ev: newEvaluator(d, req.Limits, req.Now), q: q, qr: qr, qitems: map[string]qitem{}}
	x.index(objects(q["item"]), "Questionnaire", nil)
	x.vars = map[string][]fhirpath.Node{"questionnaire": {fhirpath.ResourceNode(q)}}
	if err := x.launchContexts(ctx); err != nil {
		return nil, nil, err
	}
	for k, ext := range objects(q["extension"]) {
		if ext["url"] != ExtVariable {
			continue
		}
		v, ok := expressionOf(ext)
		if !ok || v.name == "" || v.language == langQuery {
			continue
		}
		nodes, err := x.ev.eval(ctx, v, qr, x.vars, []fhirpath.Node{fhirpath.ResourceNode(qr)})
		if err != nil {
			x.add(issue("warning", "processing", index("Questionnaire.extension", k), "variable %s: %v", v.name, err))
		}
		x.vars[v.name] = nodes
	}
	if err := x.observations(objects(qr["item"]), "QuestionnaireResponse", nil); err != nil {
		return nil, x.issues, err
	}
	if err := x.definitions(ctx); err != nil {
		return nil, x.issues, err
	}
	if Failed(x.issues) {
		return nil, x.issues, nil
	}
	return map[string]any{"resourceType": "Bundle", "type": "transaction", "entry": x.entries}, x.issues, nil
}

// launchContexts binds the launch contexts the form declares for the
// expressions of extraction: the patient is the response's subject when
// that is a Patient; the others are empty, the request that filled the
// form being over.
func (x *extractor) launchContexts(ctx context.Context) error {
	for _, ext := range extensions(x.q, ExtLaunchContext) {
		if name := launchContextName(ext); name != "" {
			x.vars[name] = nil
		}
	}
	subject, _ := x.qr["subject"].(map[string]any)
	ref := str(subject["reference"])
	if !strings.HasPrefix(ref, "Patient/") || x.ev.data == nil {
		return nil
	}
	patient, err := x.ev.data.Read(ctx, ref)
	if err != nil {
		return &DataError{Op: "read " + ref, Err: err}
	}
	if patient != nil {
		x.vars["patient"] = []fhirpath.Node{fhirpath.ResourceNode(patient)}
	}
	return nil
}

// qitem is an item of the form with the items it is nested in.
type qitem struct {
	item      map[string]any
	at        string
	ancestors []map[string]any // outermost first
}

// extractor extracts from one response.
type extractor struct {
	ev      *evaluator
	q, qr   map[string]any
	qitems  map[string]qitem
	vars    map[string][]fhirpath.Node
	entries []any
	issues  []fhirschema.Issue
}

func (x *extractor) add(is fhirschema.Issue) { x.issues = append(x.issues, is) }

// index records the form's items by linkId.
func (x *extractor) index(items []map[string]any, at string, ancestors []map[string]any) {
	for i, it := range items {
		iat := index(at+".item", i)
		x.qitems[str(it["linkId"])] = qitem{item: it, at: iat, ancestors: ancestors}
		x.index(objects(it["item"]), iat, append(ancestors[:len(ancestors):len(ancestors)], it))
	}
}

// inherited is the nearest extension u on the item, its ancestors or the
// form, nil when none has it.
func (x *extractor) inherited(qi qitem, u string) []map[string]any {
	if list := extensions(qi.item, u); len(list) > 0 {
		return list
	}
	for i := len(qi.ancestors) - 1; i >= 0; i-- {
		if list := extensions(qi.ancestors[i], u); len(list) > 0 {
			return list
		}
	}
	return extensions(x.q, u)
}

// groupObservation is the Observation a coded group is extracted as,
// while its items are: they may be its components, its members or
// derived from it. It is added to the Bundle once one is.
type groupObservation struct {
	obs     map[string]any
	fullURL string
	used    bool
}

// observations makes the Observations of the answers of items (at at)
// and the items nested in them; parent is the Observation of the coded
// group they are in, nil outside one.
func (x *extractor) observations(items []map[string]any, at string, parent *groupObservation) error {
	for i, ri := range items {
		iat := index(at+".item", i)
		linkID := str(ri["linkId"])
		qi, ok := x.qitems[linkID]
		if !ok {
			x.add(issue("warning", "not-found", iat, "item %s is not in the Questionnaire: nothing is extracted from it", linkID))
			continue
		}
		mode, codes := x.extractMode(qi)
		if qi.item["type"] == "group" {
			inner := parent
			if mode != "" && len(codes) > 0 {
				inner = &groupObservation{obs: x.observationOf(qi, codes), fullURL: "urn:uuid:" + uuid.NewString()}
			}
			if err := x.observations(objects(ri["item"]), iat, inner); err != nil {
				return err
			}
			if inner != parent && inner.used {
				x.relate(inner.obs, inner.fullURL, mode, parent, qi)
				x.entry(inner.obs, inner.fullURL, nil)
			}
			continue
		}
		for k, a := range objects(ri["answer"]) {
			if err := x.observations(objects(a["item"]), index(iat+".answer", k), parent); err != nil {
				return err
			}
		}
		if mode == "" || qi.item["type"] == "display" {
			continue
		}
		if len(codes) == 0 {
			x.add(issue("warning", "required", qi.at, "item %s has no code: no Observation is extracted from it", linkID))
			continue
		}
		for k, a := range objects(ri["answer"]) {
			typ, v := valueOf(a)
			key, value := observationValue(typ, v, unitOf(qi.item))
			if key == "" {
				x.add(issue("warning", "not-supported", index(iat+".answer", k), "item %s: a %s answer has no Observation value: not extracted", linkID, typ))
				continue
			}
			if mode == "component" && parent != nil {
				parent.obs["component"] = append(anyList(parent.obs["component"]), map[string]any{"code": map[string]any{"coding": fhirschema.CopyJSON(codes)}, key: value})
				parent.used = true
				continue
			}
			obs := x.observationOf(qi, codes)
			obs[key] = value
			fullURL := "urn:uuid:" + uuid.NewString()
			x.relate(obs, fullURL, mode, parent, qi)
			x.entry(obs, fullURL, nil)
		}
	}
	return nil
}

// extractMode is how an item is extracted as an Observation: "" not at
// all, "true" on its own, or its relationship to the Observation of the
// group it is in (component, member, derived); and the codes of that
// Observation. A relationship is the item's own; true is inherited from
// the groups it is in and the form.
func (x *extractor) extractMode(qi qitem) (string, []any) {
	if codes := markedCodes(qi.item); codes != nil {
		return "true", codes
	}
	codes := anyList(fhirschema.CopyJSON(qi.item["code"]))
	if own := extension(qi.item, ExtObservationExtract); own != nil {
		if code := str(own["valueCode"]); code != "" {
			return code, codes
		}
		if own["valueBoolean"] == true {
			return "true", codes
		}
		return "", nil
	}
	if flag := x.inherited(qi, ExtObservationExtract); len(flag) > 0 && flag[0]["valueBoolean"] == true {
		return "true", codes
	}
	return "", nil
}

// relate links an extracted Observation to the Observation of its group
// as mode says: a member of it, or derived from it.
func (x *extractor) relate(obs map[string]any, fullURL, mode string, parent *groupObservation, qi qitem) {
	if parent == nil || mode == "true" {
		return
	}
	switch mode {
	case "derived":
		obs["derivedFrom"] = append(anyList(obs["derivedFrom"]), map[string]any{"reference": parent.fullURL})
	case "member", "component": // a group is no component: it is a member
		parent.obs["hasMember"] = append(anyList(parent.obs["hasMember"]), map[string]any{"reference": fullURL})
	default:
		x.add(issue("warning", "code-invalid", qi.at, "item %s: observationExtract %q is none of true, component, member and derived", str(qi.item["linkId"]), mode))
		return
	}
	parent.used = true
}

// observationOf is the Observation of an item, without its value: its
// codes and category, the response's subject, encounter, time and author,
// and the response it is derived from.
func (x *extractor) observationOf(qi qitem, codes []any) map[string]any {
	obs := map[string]any{
		"resourceType": "Observation",
		"status":       "final",
		"code":         map[string]any{"coding": fhirschema.CopyJSON(codes)},
	}
	var categories []any
	for _, ext := range x.inherited(qi, ExtObservationCategory) {
		if cc, ok := ext["valueCodeableConcept"].(map[string]any); ok {
			categories = append(categories, fhirschema.CopyJSON(cc))
		}
	}
	if len(categories) > 0 {
		obs["category"] = categories
	}
	for _, k := range []string{"subject", "encounter"} {
		if ref, ok := x.qr[k].(map[string]any); ok {
			obs[k] = fhirschema.CopyJSON(ref)
		}
	}
	if authored := str(x.qr["authored"]); authored != "" {
		obs["effectiveDateTime"] = authored
		if len(authored) > len("2006-01-02T15:04") && strings.Contains(authored, "T") {
			obs["issued"] = authored
		}
	}
	if author, ok := x.qr["author"].(map[string]any); ok && performerType(str(author["reference"])) {
		obs["performer"] = []any{fhirschema.CopyJSON(author)}
	}
	if id := str(x.qr["id"]); id != "" {
		obs["derivedFrom"] = []any{map[string]any{"reference": "QuestionnaireResponse/" + id}}
	}
	return obs
}

// markedCodes are the codes of an item that carry observationExtract
// themselves (without it), when any does: the Observation has those
// codes only. nil when none does.
func markedCodes(item map[string]any) []any {
	var out []any
	for _, c := range objects(item["code"]) {
		if ext := extension(c, ExtObservationExtract); ext == nil || ext["valueBoolean"] != true {
			continue
		}
		code := fhirschema.CopyJSON(c).(map[string]any)
		delete(code, "extension")
		out = append(out, code)
	}
	return out
}

// performerType tells whether a reference names a resource an
// Observation's performer may be.
func performerType(ref string) bool {
	typ, _, _ := strings.Cut(ref, "/")
	switch typ {
	case "Practitioner", "PractitionerRole", "Organization", "CareTeam", "Patient", "RelatedPerson":
		return true
	}
	return false
}

// observationValue is the value[x] of an Observation for an answer of
// type typ: numbers with a unit are Quantities, Codings CodeableConcepts.
func observationValue(typ string, v any, unit map[string]any) (string, any) {
	switch typ {
	case "Decimal":
		if n, ok := number(v); ok {
			return "valueQuantity", quantityOf(n, unit)
		}
	case "Integer":
		if n, ok := number(v); ok && unit != nil {
			return "valueQuantity", quantityOf(n, unit)
		}
		return "valueInteger", v
	case "Quantity":
		return "valueQuantity", fhirschema.CopyJSON(v)
	case "Coding":
		return "valueCodeableConcept", map[string]any{"coding": []any{fhirschema.CopyJSON(v)}}
	case "String", "Boolean", "Time", "DateTime":
		return "value" + typ, v
	case "Date":
		return "valueDateTime", v
	case "Uri":
		return "valueString", v
	}
	return "", nil
}

// entry adds a resource to the Bundle: created with POST, or updated with
// PUT when id is set; request holds conditional headers.
func (x *extractor) entry(res map[string]any, fullURL string, request map[string]any) {
	typ := str(res["resourceType"])
	if fullURL == "" {
		fullURL = "urn:uuid:" + uuid.NewString()
	}
	req := map[string]any{"method": "POST", "url": typ}
	if id := str(res["id"]); id != "" {
		req["method"], req["url"] = "PUT", typ+"/"+id
	}
	for k, v := range request {
		req[k] = v
	}
	x.entries = append(x.entries, map[string]any{"fullUrl": fullURL, "resource": res, "request": req})
}
