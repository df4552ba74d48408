package search

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"sync"
)

// patientCompartmentJSON is the official R4 CompartmentDefinition of the
// Patient compartment.
//
//go:embed compartment-patient.json
var patientCompartmentJSON []byte

// CompartmentSelf is the pseudo parameter of a CompartmentDefinition that
// means the compartment's own resource (the patient itself, for Patient).
const CompartmentSelf = "{def}"

// patientCompartment parses the embedded definition once: resource type →
// the parameters linking it to the patient, in the definition's order.
var patientCompartment = sync.OnceValue(func() map[string][]string {
	var def struct {
		Code     string `json:"code"`
		Resource []struct {
			Code  string   `json:"code"`
			Param []string `json:"param"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(patientCompartmentJSON, &def); err != nil || def.Code != "Patient" {
		panic(fmt.Sprintf("embedded Patient CompartmentDefinition is invalid (code %q): %v", def.Code, err))
	}
	out := map[string][]string{}
	for _, r := range def.Resource {
		if len(r.Param) > 0 {
			out[r.Code] = r.Param
		}
	}
	return out
})

// PatientCompartment maps each resource type of the Patient compartment to
// the parameters that put a resource of that type in a patient's compartment.
func PatientCompartment() map[string][]string {
	out := make(map[string][]string, len(patientCompartment()))
	for t, params := range patientCompartment() {
		out[t] = slices.Clone(params)
	}
	return out
}

// PatientCompartmentParams returns the linking parameters of resourceType;
// false when the type is never in a Patient compartment.
func PatientCompartmentParams(resourceType string) ([]string, bool) {
	params, ok := patientCompartment()[resourceType]
	return slices.Clone(params), ok
}

// PatientCompartmentTypes lists the resource types of the Patient
// compartment in alphabetical order.
func PatientCompartmentTypes() []string {
	types := make([]string, 0, len(patientCompartment()))
	for t := range patientCompartment() {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// fhirID is the syntax of a resource id.
var fhirID = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// PatientCompartmentValues are the parameters selecting the resources of
// resourceType that link to the patient through param: param=Patient/<id>,
// or _id=<id> for the patient itself ({def}).
func PatientCompartmentValues(resourceType, param, patientID string) (url.Values, error) {
	if !fhirID.MatchString(patientID) {
		return nil, errorf("id", "%q is not a valid patient id", patientID)
	}
	if param == CompartmentSelf {
		if resourceType != "Patient" {
			return nil, errorf(param, "%s stands for the patient only, not for %s", CompartmentSelf, resourceType)
		}
		return url.Values{"_id": {patientID}}, nil
	}
	return url.Values{param: {"Patient/" + patientID}}, nil
}

// CompartmentQueries parses one query per parameter linking resourceType to
// the patient: each is extra AND that parameter = Patient/<patientID>. A
// resource is in the compartment search when it matches any of them, so
// callers union the results.
func (r *Registry) CompartmentQueries(resourceType, patientID string, extra url.Values, opts ParseOptions) ([]*Query, error) {
	params, ok := PatientCompartmentParams(resourceType)
	if !ok {
		return nil, errorf("type", "%s is not in the Patient compartment", resourceType)
	}
	queries := make([]*Query, 0, len(params))
	for _, code := range params {
		if code != CompartmentSelf { // lenient parsing would silently drop an unknown code
			if p, ok := r.Lookup(resourceType, code); !ok || p.Type != "reference" {
				return nil, fmt.Errorf("patient compartment of %s: %q is not a reference parameter", resourceType, code)
			}
		}
		sel, err := PatientCompartmentValues(resourceType, code, patientID)
		if err != nil {
			return nil, err
		}
		values := url.Values{}
		for k, vs := range extra {
			values[k] = slices.Clone(vs)
		}
		for k, vs := range sel {
			values[k] = append(values[k], vs...)
		}
		q, err := r.Parse(resourceType, values, opts)
		if err != nil {
			return nil, fmt.Errorf("patient compartment of %s by %s: %w", resourceType, code, err)
		}
		queries = append(queries, q)
	}
	return queries, nil
}

// InPatientCompartment tells whether resource, of resourceType and decoded
// with json.Decoder.UseNumber, is in the compartment of patient patientID:
// the patient itself, or a resource whose linking parameters (those of the
// compartment search) reference Patient/patientID.
func (r *Registry) InPatientCompartment(resourceType string, resource map[string]any, patientID string) bool {
	params, ok := patientCompartment()[resourceType]
	if !ok || patientID == "" {
		return false
	}
	if id, _ := resource["id"].(string); resourceType == "Patient" && id == patientID {
		return true // a patient is in its own compartment
	}
	want := "Patient/" + patientID
	x := extractor{isType: func(t string) bool { return r.types[t] || r.byType[t] != nil }}
	for _, code := range params {
		p, ok := r.Lookup(resourceType, code)
		if !ok || p.expr == nil || p.Type != "reference" {
			continue
		}
		x.reset()
		for _, n := range p.expr.Evaluate(resource) {
			x.node(p, n)
		}
		if contains(x.main.list, want) {
			return true
		}
	}
	return false
}
