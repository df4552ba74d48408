// Package sdc serves the Structured Data Capture operations over FHIR
// REST: Questionnaire $populate and $assemble and QuestionnaireResponse
// $extract. It reads the operations' input parameters (a Parameters body,
// or the query string where SDC allows a GET), runs them with package
// fhirschema/sdc and shapes their output Parameters; refused input is an
// *Error with the status and issues of its OperationOutcome. The server
// package routes to it and supplies a Backend bound to the request.
package sdc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/sdc"
)

// OperationDefinition canonicals of the SDC operations.
const (
	// PopulateDefinition defines Questionnaire $populate.
	PopulateDefinition = "http://hl7.org/fhir/uv/sdc/OperationDefinition/Questionnaire-populate"
	// ExtractDefinition defines QuestionnaireResponse $extract.
	ExtractDefinition = "http://hl7.org/fhir/uv/sdc/OperationDefinition/QuestionnaireResponse-extract"
	// AssembleDefinition defines Questionnaire $assemble.
	AssembleDefinition = "http://hl7.org/fhir/uv/sdc/OperationDefinition/Questionnaire-assemble"
)

// Backend is what the operations need of the server for one request: the
// tenant's data read with the caller's rights, and the checks a write of a
// QuestionnaireResponse makes.
type Backend interface {
	sdc.Data
	// CheckResponse checks a QuestionnaireResponse as a write of it would
	// (its Questionnaire included); an error refuses it.
	CheckResponse(ctx context.Context, response map[string]any) error
}

// Request is one operation request as the server received it.
type Request struct {
	// Method is GET or POST; Query the URL's parameters; Body a POST's body.
	Method string
	Query  url.Values
	Body   []byte
	// ID is the resource of an instance-level request; "" at type level.
	ID string
	// Limits bound the operation's expressions and queries.
	Limits sdc.Limits
	// Now fixes the time stamps of the output; zero means the clock.
	Now time.Time
}

// Error refuses an operation request: the HTTP status and the issues of
// the OperationOutcome that answers it.
type Error struct {
	Status int                // 400, 404, 409 or 422
	Issues []fhirschema.Issue // what was wrong, each located in the request or the form
}

// Error is the first issue's text.
func (e *Error) Error() string {
	if len(e.Issues) > 0 {
		return e.Issues[0].Diagnostics
	}
	return http.StatusText(e.Status)
}

// refuse builds an Error with one issue.
func refuse(status int, code, at, format string, args ...any) *Error {
	return &Error{Status: status, Issues: []fhirschema.Issue{{Severity: "error", Code: code, Expression: at, Diagnostics: fmt.Sprintf(format, args...)}}}
}

// failed is the Error of an operation whose issues include an error: 422,
// every issue reported.
func failed(op string, issues []fhirschema.Issue) *Error {
	if len(issues) == 0 {
		issues = []fhirschema.Issue{{Severity: "error", Code: "processing", Diagnostics: op + " failed"}}
	}
	return &Error{Status: http.StatusUnprocessableEntity, Issues: issues}
}

// dataError unwraps a failure of the Backend for the server to report as
// it reports its own errors.
func dataError(op string, err error) error {
	var de *sdc.DataError
	if errors.As(err, &de) {
		return fmt.Errorf("%s: %s: %w", op, de.Op, de.Err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// param is one input parameter: a value[x] with its type, an inline
// resource, or parts; at locates it (Parameters.parameter[1].part[0]).
type param struct {
	name     string
	kind     string
	value    any
	resource map[string]any
	parts    []param
	at       string
}

// text is the parameter's value as text: a primitive as written, a
// Reference its reference.
func (p param) text() string {
	switch v := p.value.(type) {
	case string:
		return v
	case bool:
		return fmt.Sprint(v)
	case json.Number:
		return v.String()
	case map[string]any:
		ref, _ := v["reference"].(string)
		return ref
	}
	return ""
}

// params are the input parameters of one request.
type params []param

// decode reads JSON with numbers kept as written.
func decode(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// readParams reads the query string's parameters (those not starting with
// _, which the server's own) and a body that is a Parameters resource.
// other is a body of another type the operation accepts in place of a
// Parameters ("" for none); it is returned as is.
func readParams(r Request, other string) (params, map[string]any, error) {
	var out params
	for name, values := range r.Query {
		if strings.HasPrefix(name, "_") {
			continue
		}
		for _, v := range values {
			out = append(out, param{name: name, kind: "String", value: v, at: name})
		}
	}
	if len(bytes.TrimSpace(r.Body)) == 0 {
		return out, nil, nil
	}
	body, err := decode(r.Body)
	if err != nil {
		return nil, nil, refuse(http.StatusBadRequest, "structure", "Parameters", "the body is not a JSON resource: %v", err)
	}
	if other != "" && body["resourceType"] == other {
		return out, body, nil
	}
	if body["resourceType"] != "Parameters" {
		want := "a Parameters resource"
		if other != "" {
			want += " or a " + other
		}
		return nil, nil, refuse(http.StatusBadRequest, "structure", "Parameters", "the body must be %s, not %v", want, body["resourceType"])
	}
	list, err := parseParams(body["parameter"], "Parameters.parameter")
	if err != nil {
		return nil, nil, err
	}
	return append(out, list...), nil, nil
}

// parseParams reads the parameter (or part) elements of a Parameters.
func parseParams(v any, at string) ([]param, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, refuse(http.StatusBadRequest, "structure", at, "%s must be an array", at)
	}
	out := make([]param, 0, len(list))
	for i, x := range list {
		pat := fmt.Sprintf("%s[%d]", at, i)
		m, ok := x.(map[string]any)
		if !ok {
			return nil, refuse(http.StatusBadRequest, "structure", pat, "a parameter must be an object")
		}
		p := param{at: pat}
		p.name, _ = m["name"].(string)
		if p.name == "" {
			return nil, refuse(http.StatusBadRequest, "required", pat+".name", "a parameter must have a name")
		}
		for k, v := range m {
			kind, isValue := strings.CutPrefix(k, "value")
			switch {
			case k == "resource":
				if p.resource, ok = v.(map[string]any); !ok {
					return nil, refuse(http.StatusBadRequest, "structure", pat+".resource", "parameter %s: resource must be an object", p.name)
				}
			case k == "part":
				parts, err := parseParams(v, pat+".part")
				if err != nil {
					return nil, err
				}
				p.parts = parts
			case isValue && kind != "":
				p.kind, p.value = kind, v
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// only checks that every parameter is one the operation takes.
func (ps params) only(op string, known ...string) error {
	for _, p := range ps {
		ok := false
		for _, k := range known {
			ok = ok || p.name == k
		}
		if !ok {
			return refuse(http.StatusBadRequest, "not-supported", p.at, "%s takes no parameter %q", op, p.name)
		}
	}
	return nil
}

// one is the parameter named name, nil when absent; 400 when repeated.
func (ps params) one(name string) (*param, error) {
	var found *param
	for i := range ps {
		if ps[i].name != name {
			continue
		}
		if found != nil {
			return nil, refuse(http.StatusBadRequest, "structure", ps[i].at, "parameter %s may be given only once", name)
		}
		found = &ps[i]
	}
	return found, nil
}

// first is the first of the parameters named in names that is given,
// each at most once.
func (ps params) first(names ...string) (*param, error) {
	for _, n := range names {
		p, err := ps.one(n)
		if err != nil || p != nil {
			return p, err
		}
	}
	return nil, nil
}

// parameters renders output parameters, leaving out nil resources.
func parameters(named ...any) map[string]any {
	var list []any
	for i := 0; i+1 < len(named); i += 2 {
		if res, ok := named[i+1].(map[string]any); ok && res != nil {
			list = append(list, map[string]any{"name": named[i], "resource": res})
		}
	}
	return map[string]any{"resourceType": "Parameters", "parameter": list}
}

// outcome is an OperationOutcome of issues; nil for none.
func outcome(issues []fhirschema.Issue) map[string]any {
	if len(issues) == 0 {
		return nil
	}
	list := make([]any, 0, len(issues))
	for _, is := range issues {
		m := map[string]any{"severity": is.Severity, "code": is.Code}
		if is.Diagnostics != "" {
			m["diagnostics"] = is.Diagnostics
		}
		if is.Expression != "" {
			m["expression"] = []any{is.Expression}
		}
		list = append(list, m)
	}
	return map[string]any{"resourceType": "OperationOutcome", "issue": list}
}

// read reads a resource by reference for a parameter (at), 404 when it is
// not there.
func read(ctx context.Context, b Backend, ref, at, what string) (map[string]any, error) {
	typ, id, ok := strings.Cut(ref, "/")
	if !ok || typ == "" || id == "" || strings.Contains(id, "/") || !fhirschema.IsResourceType(typ) {
		return nil, refuse(http.StatusBadRequest, "value", at, "%s %q is not a reference of the form Type/id", what, ref)
	}
	res, err := b.Read(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	if res == nil {
		return nil, refuse(http.StatusNotFound, "not-found", at, "%s %s is not known", what, ref)
	}
	return res, nil
}

// questionnaireByCanonical finds a Questionnaire by canonical for a
// parameter (at), 404 when none has it.
func questionnaireByCanonical(ctx context.Context, b Backend, canonical, at string) (map[string]any, error) {
	if canonical == "" {
		return nil, refuse(http.StatusBadRequest, "required", at, "the canonical URL of the Questionnaire is empty")
	}
	q, err := b.Questionnaire(ctx, canonical)
	if err != nil {
		return nil, fmt.Errorf("find Questionnaire %s: %w", canonical, err)
	}
	if q == nil {
		return nil, refuse(http.StatusNotFound, "not-found", at, "no Questionnaire has the canonical URL %s", canonical)
	}
	return q, nil
}

// questionnaireByIdentifier finds the one Questionnaire with an identifier
// (system|value, or a token of the query string).
func questionnaireByIdentifier(ctx context.Context, b Backend, p *param) (map[string]any, error) {
	token := p.text()
	if id, ok := p.value.(map[string]any); ok {
		sys, _ := id["system"].(string)
		val, _ := id["value"].(string)
		token = val
		if sys != "" {
			token = sys + "|" + val
		}
	}
	if token == "" {
		return nil, refuse(http.StatusBadRequest, "required", p.at, "the identifier of the Questionnaire is empty")
	}
	bundle, err := b.Search(ctx, "Questionnaire?identifier="+url.QueryEscape(token))
	if err != nil {
		return nil, fmt.Errorf("find Questionnaire by identifier %s: %w", token, err)
	}
	entries, _ := bundle["entry"].([]any)
	var found []map[string]any
	for _, e := range entries {
		em, _ := e.(map[string]any)
		if res, ok := em["resource"].(map[string]any); ok && res["resourceType"] == "Questionnaire" {
			found = append(found, res)
		}
	}
	switch len(found) {
	case 0:
		return nil, refuse(http.StatusNotFound, "not-found", p.at, "no Questionnaire has the identifier %s", token)
	case 1:
		return found[0], nil
	}
	return nil, refuse(http.StatusConflict, "multiple-matches", p.at, "%d Questionnaires have the identifier %s", len(found), token)
}

// instance reads the resource of an instance-level request, 404 when it is
// not there.
func instance(ctx context.Context, b Backend, typ, id string) (map[string]any, error) {
	res, err := b.Read(ctx, typ+"/"+id)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", typ, id, err)
	}
	if res == nil {
		return nil, refuse(http.StatusNotFound, "not-found", "", "%s/%s is not known", typ, id)
	}
	return res, nil
}
