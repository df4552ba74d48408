package schemacheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	"fhirstore/fhirschema/questionnaire"
	"fhirstore/fhirschema/sdc"
	"fhirstore/store"
)

// checkForms is the layer after the profiles: a Questionnaire is checked
// for the rules of forms, and a QuestionnaireResponse against the
// Questionnaire it answers, when the tenant (or the response's Bundle, or
// the response itself, contained) holds it. A response whose form cannot
// be found gets a warning.
func (c *Checker) checkForms(ctx context.Context, in store.Validation, defs profile.Definitions) ([]fhirschema.Issue, error) {
	if in.Type != "Questionnaire" && in.Type != "QuestionnaireResponse" {
		return nil, nil
	}
	r, err := decodeResource(in)
	if err != nil {
		return nil, nil // the base validation has said what is wrong
	}
	if in.Type == "Questionnaire" {
		return c.forms.CheckForm(r), nil
	}
	return c.checkResponse(ctx, in, defs, r)
}

// formIssues are the issues of a Questionnaire's own rules; none when it
// is not a JSON object.
func (c *Checker) formIssues(in store.Validation) []fhirschema.Issue {
	r, err := decodeResource(in)
	if err != nil {
		return nil
	}
	return c.forms.CheckForm(r)
}

// checkResponse checks the response r against its Questionnaire.
func (c *Checker) checkResponse(ctx context.Context, in store.Validation, defs profile.Definitions, r map[string]any) ([]fhirschema.Issue, error) {
	canonical, _ := r["questionnaire"].(string)
	if canonical == "" {
		return nil, nil
	}
	q, err := findQuestionnaire(ctx, in, defs, r, canonical)
	if err != nil {
		return nil, fmt.Errorf("find the Questionnaire %s: %w", canonical, err)
	}
	if q == nil {
		return []fhirschema.Issue{{Severity: "warning", Code: "not-found", Expression: "QuestionnaireResponse.questionnaire",
			Diagnostics: "the Questionnaire " + canonical + " is not known to the server: the answers were not checked against it"}}, nil
	}
	if q, err = assembled(ctx, defs, q); err != nil {
		return nil, fmt.Errorf("assemble the Questionnaire %s: %w", canonical, err)
	}
	if q == nil {
		return []fhirschema.Issue{{Severity: "warning", Code: "not-found", Expression: "QuestionnaireResponse.questionnaire",
			Diagnostics: "the modular Questionnaire " + canonical + " cannot be assembled: the answers were not checked against it"}}, nil
	}
	issues, err := c.forms.CheckResponse(ctx, r, q, questionnaire.Options{Terminology: answerTerms{v: c.profiles, defs: defs}})
	if err != nil {
		return nil, fmt.Errorf("check the response against %s: %w", canonical, err)
	}
	return issues, nil
}

// findQuestionnaire resolves a response's questionnaire: a contained form
// (#id), a relative reference (Questionnaire/id), an entry of the same
// Bundle, or a canonical (url|version, else the latest version) among the
// tenant's forms; nil when none.
func findQuestionnaire(ctx context.Context, in store.Validation, defs profile.Definitions, qr map[string]any, canonical string) (map[string]any, error) {
	if id, ok := strings.CutPrefix(canonical, "#"); ok {
		for _, c := range objectList(qr["contained"]) {
			if c["resourceType"] == "Questionnaire" && c["id"] == id {
				return c, nil
			}
		}
		return nil, nil
	}
	if id, ok := strings.CutPrefix(canonical, "Questionnaire/"); ok && in.Find != nil {
		found, err := in.Find(ctx, "Questionnaire", "_id="+url.QueryEscape(id))
		if err != nil || len(found) == 0 {
			return nil, err
		}
		return decodeJSON(found[0])
	}
	if q := bundleQuestionnaire(in.Bundle, canonical); q != nil {
		return q, nil
	}
	return defs.Resource(ctx, "Questionnaire", canonical)
}

// bundleQuestionnaire finds the Questionnaire with canonical among the
// entries of a batch or transaction.
func bundleQuestionnaire(b *store.Bundle, canonical string) map[string]any {
	if b == nil {
		return nil
	}
	u, version, _ := strings.Cut(canonical, "|")
	for _, e := range b.Entries {
		if !bytes.Contains(e.Resource, []byte(`"Questionnaire"`)) || !bytes.Contains(e.Resource, []byte(u)) {
			continue
		}
		q, err := decodeJSON(e.Resource)
		if err != nil || q["resourceType"] != "Questionnaire" || q["url"] != u {
			continue
		}
		if v, _ := q["version"].(string); version == "" || v == version {
			return q
		}
	}
	return nil
}

// objectList returns the JSON objects of an array.
func objectList(v any) []map[string]any { return fhirschema.Objects(v) }

// decodeJSON decodes a resource with its numbers as written.
func decodeJSON(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var r map[string]any
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode a resource: %w", err)
	}
	return r, nil
}

// answerTerms answers value set membership from the profile validator's
// cached expansions of the tenant's and the core value sets.
type answerTerms struct {
	v    *profile.Validator
	defs profile.Definitions
}

func (t answerTerms) MemberOf(ctx context.Context, url, system, code string) (bool, string, error) {
	return t.v.MemberOf(ctx, t.defs, url, system, code)
}

// Displays returns the display and designations of system|code in the
// tenant's or the core CodeSystem of system; known is false when neither
// holds the code.
func (t answerTerms) Displays(ctx context.Context, system, code string) ([]string, bool, error) {
	cs, err := t.defs.Resource(ctx, "CodeSystem", system)
	if err != nil || cs == nil {
		return nil, false, err
	}
	concept := findConcept(cs["concept"], code)
	if concept == nil {
		return nil, false, nil
	}
	var out []string
	if d, _ := concept["display"].(string); d != "" {
		out = append(out, d)
	}
	for _, d := range objectList(concept["designation"]) {
		if v, _ := d["value"].(string); v != "" {
			out = append(out, v)
		}
	}
	return out, true, nil
}

// findConcept finds code among concepts and their nested concepts.
func findConcept(concepts any, code string) map[string]any {
	list, _ := concepts.([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		if m == nil {
			continue
		}
		if m["code"] == code {
			return m
		}
		if found := findConcept(m["concept"], code); found != nil {
			return found
		}
	}
	return nil
}

// assembled is q with its sub-questionnaires inlined when it is a modular
// form (a response answers the assembled form); nil when a module cannot
// be found.
func assembled(ctx context.Context, defs profile.Definitions, q map[string]any) (map[string]any, error) {
	if !modular(q["item"]) {
		return q, nil
	}
	out, issues, err := sdc.Assemble(ctx, formsOf{defs}, sdc.AssembleRequest{Questionnaire: q})
	if err != nil || sdc.Failed(issues) {
		return nil, err
	}
	return out, nil
}

// modular reports whether an item (or one below it) stands for a
// sub-questionnaire.
func modular(items any) bool {
	for _, it := range objectList(items) {
		for _, e := range objectList(it["extension"]) {
			if e["url"] == sdc.ExtSubQuestionnaire {
				return true
			}
		}
		if modular(it["item"]) {
			return true
		}
	}
	return false
}

// formsOf finds the modules of a form among the tenant's Questionnaires;
// assembling reads nothing else.
type formsOf struct{ defs profile.Definitions }

func (f formsOf) Search(context.Context, string) (map[string]any, error) { return nil, nil }

func (f formsOf) Read(context.Context, string) (map[string]any, error) { return nil, nil }

func (f formsOf) Questionnaire(ctx context.Context, canonical string) (map[string]any, error) {
	return f.defs.Resource(ctx, "Questionnaire", canonical)
}
