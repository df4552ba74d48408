package sdc

import (
	"context"
	"net/http"

	"fhirstore/fhirschema/sdc"
)

// Populate serves Questionnaire/$populate and Questionnaire/[id]/$populate:
// the form (the instance, or the questionnaire, questionnaireRef,
// canonical or identifier parameter), the subject, the launch contexts
// (context or launchContext, parts name and content) and local (all data
// is local here). It answers Parameters with the in-progress response and
// the issues met; a form that cannot be filled is a 422.
func Populate(ctx context.Context, b Backend, r Request) (map[string]any, error) {
	ps, _, err := readParams(r, "")
	if err != nil {
		return nil, err
	}
	if err := ps.only("$populate", "identifier", "canonical", "questionnaire", "questionnaireRef", "url", "subject", "context", "launchContext", "local"); err != nil {
		return nil, err
	}
	q, err := formOf(ctx, b, r, ps)
	if err != nil {
		return nil, err
	}
	req := sdc.PopulateRequest{Questionnaire: q, Limits: r.Limits, Now: r.Now}
	subject, err := ps.one("subject")
	if err != nil {
		return nil, err
	}
	if subject == nil {
		return nil, refuse(http.StatusBadRequest, "required", "Parameters", "$populate needs a subject (a Reference)")
	}
	if subject.resource != nil {
		req.Subject = subject.resource
	} else if req.Subject, err = read(ctx, b, subject.text(), subject.at, "subject"); err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.name != "context" && p.name != "launchContext" {
			continue
		}
		c, err := launchContext(ctx, b, p)
		if err != nil {
			return nil, err
		}
		req.Contexts = append(req.Contexts, c)
	}
	if local, err := ps.one("local"); err != nil {
		return nil, err
	} else if local != nil && local.text() != "true" && local.text() != "false" {
		return nil, refuse(http.StatusBadRequest, "value", local.at, "local must be a boolean")
	}
	qr, issues, err := sdc.Populate(ctx, b, req)
	if err != nil {
		return nil, dataError("$populate", err)
	}
	if qr == nil || sdc.Failed(issues) {
		return nil, failed("$populate", issues)
	}
	return parameters("response", qr, "issues", outcome(issues)), nil
}

// formOf is the Questionnaire of a $populate request.
func formOf(ctx context.Context, b Backend, r Request, ps params) (map[string]any, error) {
	if r.ID != "" {
		return instance(ctx, b, "Questionnaire", r.ID)
	}
	p, err := ps.first("questionnaire", "questionnaireRef", "canonical", "url", "identifier")
	if err != nil {
		return nil, err
	}
	switch {
	case p == nil:
		return nil, refuse(http.StatusBadRequest, "required", "Parameters", "name the Questionnaire: questionnaire, questionnaireRef, canonical or identifier, or use Questionnaire/[id]/$populate")
	case p.resource != nil:
		if p.resource["resourceType"] != "Questionnaire" {
			return nil, refuse(http.StatusBadRequest, "structure", p.at+".resource", "parameter %s must hold a Questionnaire", p.name)
		}
		return p.resource, nil
	case p.name == "identifier":
		return questionnaireByIdentifier(ctx, b, p)
	case p.kind == "Reference" || p.name == "questionnaireRef":
		return read(ctx, b, p.text(), p.at, "Questionnaire")
	}
	return questionnaireByCanonical(ctx, b, p.text(), p.at)
}

// launchContext reads a context parameter: its name and content (a
// Reference, read now so that an unknown one is the request's 404, or a
// resource).
func launchContext(ctx context.Context, b Backend, p param) (sdc.LaunchContext, error) {
	var c sdc.LaunchContext
	var content *param
	for i, part := range p.parts {
		switch part.name {
		case "name":
			c.Name = part.text()
			if cd, ok := part.value.(map[string]any); ok { // a Coding
				c.Name, _ = cd["code"].(string)
			}
		case "content":
			content = &p.parts[i]
		default:
			return c, refuse(http.StatusBadRequest, "not-supported", part.at, "a context has parts name and content, not %q", part.name)
		}
	}
	switch {
	case c.Name == "":
		return c, refuse(http.StatusBadRequest, "required", p.at, "a context needs a name part")
	case content == nil:
		return c, refuse(http.StatusBadRequest, "required", p.at, "context %s needs a content part", c.Name)
	case content.resource != nil:
		c.Resource = content.resource
		return c, nil
	}
	res, err := read(ctx, b, content.text(), content.at, "context "+c.Name)
	if err != nil {
		return c, err
	}
	c.Resource = res
	return c, nil
}

// Extract serves QuestionnaireResponse/$extract (the response as the
// questionnaire-response parameter or the body itself, optionally its
// questionnaire) and QuestionnaireResponse/[id]/$extract. The response
// must pass the checks of a write first (422 otherwise). It answers
// Parameters with the transaction Bundle as return and the issues met;
// nothing is written.
func Extract(ctx context.Context, b Backend, r Request) (map[string]any, error) {
	ps, body, err := readParams(r, "QuestionnaireResponse")
	if err != nil {
		return nil, err
	}
	if err := ps.only("$extract", "questionnaire-response", "questionnaire"); err != nil {
		return nil, err
	}
	req := sdc.ExtractRequest{Response: body, Limits: r.Limits, Now: r.Now}
	if p, err := ps.one("questionnaire-response"); err != nil {
		return nil, err
	} else if p != nil {
		if p.resource == nil || p.resource["resourceType"] != "QuestionnaireResponse" {
			return nil, refuse(http.StatusBadRequest, "structure", p.at, "questionnaire-response must hold a QuestionnaireResponse resource")
		}
		req.Response = p.resource
	}
	if p, err := ps.one("questionnaire"); err != nil {
		return nil, err
	} else if p != nil {
		if p.resource == nil || p.resource["resourceType"] != "Questionnaire" {
			return nil, refuse(http.StatusBadRequest, "structure", p.at, "questionnaire must hold a Questionnaire resource")
		}
		req.Questionnaire = p.resource
	}
	switch {
	case r.ID != "" && req.Response != nil:
		return nil, refuse(http.StatusBadRequest, "structure", "Parameters", "QuestionnaireResponse/%s/$extract takes no other response", r.ID)
	case r.ID != "":
		if req.Response, err = instance(ctx, b, "QuestionnaireResponse", r.ID); err != nil {
			return nil, err
		}
	case req.Response == nil:
		return nil, refuse(http.StatusBadRequest, "required", "Parameters", "$extract needs the QuestionnaireResponse: the questionnaire-response parameter, or the response as the body")
	}
	if err := b.CheckResponse(ctx, req.Response); err != nil {
		return nil, err
	}
	bundle, issues, err := sdc.Extract(ctx, b, req)
	if err != nil {
		return nil, dataError("$extract", err)
	}
	if bundle == nil || sdc.Failed(issues) {
		return nil, failed("$extract", issues)
	}
	return parameters("return", bundle, "issues", outcome(issues)), nil
}

// Assemble serves Questionnaire/[id]/$assemble and Questionnaire/$assemble
// (the questionnaire parameter, or url/canonical naming a stored one). It
// answers Parameters with the assembled form as return and its issues as
// outcome; a form that cannot be assembled is a 422.
func Assemble(ctx context.Context, b Backend, r Request) (map[string]any, error) {
	ps, _, err := readParams(r, "")
	if err != nil {
		return nil, err
	}
	if err := ps.only("$assemble", "questionnaire", "url", "canonical"); err != nil {
		return nil, err
	}
	var q map[string]any
	p, err := ps.first("questionnaire", "url", "canonical")
	switch {
	case err != nil:
		return nil, err
	case r.ID != "" && p != nil:
		return nil, refuse(http.StatusBadRequest, "structure", p.at, "Questionnaire/%s/$assemble takes no other Questionnaire", r.ID)
	case r.ID != "":
		q, err = instance(ctx, b, "Questionnaire", r.ID)
	case p == nil:
		return nil, refuse(http.StatusBadRequest, "required", "Parameters", "$assemble needs the Questionnaire: the questionnaire parameter, or use Questionnaire/[id]/$assemble")
	case p.resource != nil:
		if p.resource["resourceType"] != "Questionnaire" {
			return nil, refuse(http.StatusBadRequest, "structure", p.at+".resource", "questionnaire must hold a Questionnaire")
		}
		q = p.resource
	default:
		q, err = questionnaireByCanonical(ctx, b, p.text(), p.at)
	}
	if err != nil {
		return nil, err
	}
	out, issues, err := sdc.Assemble(ctx, b, sdc.AssembleRequest{Questionnaire: q})
	if err != nil {
		return nil, dataError("$assemble", err)
	}
	if out == nil || sdc.Failed(issues) {
		return nil, failed("$assemble", issues)
	}
	return parameters("return", out, "outcome", outcome(issues)), nil
}
