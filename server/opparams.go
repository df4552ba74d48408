package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// opParam is one input parameter of an operation: a value (as its text),
// an inline resource, or parts.
type opParam struct {
	name     string
	value    string
	hasValue bool
	// kind is the value[x] type (String, Reference, Boolean…); "" from a
	// query string.
	kind     string
	resource map[string]any
	parts    []opParam
	// at locates the parameter in the request (Parameters.parameter[2]).
	at string
}

// opParams are the input parameters of one operation request: the query
// string's, then a POST body's (a Parameters resource).
type opParams []opParam

// operationParameters reads an operation's parameters from the query
// string and, for a POST with a body, from its Parameters resource.
func (s *Server) operationParameters(c *gin.Context) (opParams, error) {
	var out opParams
	for name, values := range c.Request.URL.Query() {
		for _, v := range values {
			out = append(out, opParam{name: name, value: v, hasValue: true, at: name})
		}
	}
	if c.Request.Method != http.MethodPost || (c.Request.ContentLength == 0 && c.GetHeader("Content-Type") == "") {
		return out, nil
	}
	body, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil || p["resourceType"] != "Parameters" {
		return nil, fail(http.StatusBadRequest, "structure", "the body of the operation must be a Parameters resource", "Parameters")
	}
	list, _ := p["parameter"].([]any)
	params, err := readParams(list, "Parameters.parameter")
	if err != nil {
		return nil, err
	}
	return append(out, params...), nil
}

// readParams reads the parameter elements of a Parameters resource (or the
// part elements of a parameter).
func readParams(list []any, at string) ([]opParam, error) {
	out := make([]opParam, 0, len(list))
	for i, item := range list {
		pat := fmt.Sprintf("%s[%d]", at, i)
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fail(http.StatusBadRequest, "structure", "a parameter must be an object", pat)
		}
		p := opParam{at: pat}
		p.name, _ = m["name"].(string)
		if p.name == "" {
			return nil, fail(http.StatusBadRequest, "required", "a parameter must have a name", pat+".name")
		}
		for k, v := range m {
			kind, isValue := strings.CutPrefix(k, "value")
			switch {
			case k == "resource":
				p.resource, ok = v.(map[string]any)
				if !ok {
					return nil, fail(http.StatusBadRequest, "structure", fmt.Sprintf("parameter %s: resource must be an object", p.name), pat+".resource")
				}
			case k == "part":
				parts, _ := v.([]any)
				var err error
				if p.parts, err = readParams(parts, pat+".part"); err != nil {
					return nil, err
				}
			case isValue && kind != "":
				p.kind, p.hasValue = kind, true
				p.value = valueText(v)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// valueText is a parameter value as text: a primitive as written, a
// Reference its reference.
func valueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case json.Number:
		return string(x)
	case map[string]any:
		ref, _ := x["reference"].(string)
		return ref
	}
	return ""
}

// all are the parameters named name.
func (ps opParams) all(name string) []opParam {
	var out []opParam
	for _, p := range ps {
		if p.name == name {
			out = append(out, p)
		}
	}
	return out
}

// one is the parameter named name, if any; 400 when it is repeated.
func (ps opParams) one(name string) (*opParam, error) {
	list := ps.all(name)
	switch len(list) {
	case 0:
		return nil, nil
	case 1:
		return &list[0], nil
	}
	return nil, fail(http.StatusBadRequest, "structure", fmt.Sprintf("parameter %s may be given only once", name), list[1].at)
}

// text is the value of the parameter named name, "" when absent.
func (ps opParams) text(name string) (string, error) {
	p, err := ps.one(name)
	if err != nil || p == nil {
		return "", err
	}
	if !p.hasValue {
		return "", fail(http.StatusBadRequest, "structure", fmt.Sprintf("parameter %s needs a value", name), p.at)
	}
	return strings.TrimSpace(p.value), nil
}

// values are the values of every parameter named name, comma-separated
// values split.
func (ps opParams) values(name string) []string {
	var out []string
	for _, p := range ps.all(name) {
		out = append(out, commaList([]string{p.value})...)
	}
	return out
}

// unknown is a 400 for the first parameter known does not list.
func (ps opParams) unknown(op string, known map[string]bool) error {
	for _, p := range ps {
		if !known[p.name] {
			return fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("parameter %s is not one %s takes", p.name, op), p.at)
		}
	}
	return nil
}
