package search

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// PatientPopulation selects the resources of resourceType in the Patient
// compartment of any of patientIDs, or of any patient at all when
// patientIDs is empty (a reference to some Patient through one of the
// type's linking parameters). It is the selection of a Patient- or
// Group-level bulk export: one query however many patients.
func (r *Registry) PatientPopulation(resourceType string, patientIDs []string) (*Query, error) {
	params, ok := PatientCompartmentParams(resourceType)
	if !ok {
		return nil, errorf("_type", "%s is not in the Patient compartment", resourceType)
	}
	if resourceType == "Patient" {
		params = append([]string{CompartmentSelf}, params...) // a patient is in its own compartment
	}
	refs := make([]string, len(patientIDs))
	for i, id := range patientIDs {
		if !fhirID.MatchString(id) {
			return nil, errorf("patient", "%q is not a valid patient id", id)
		}
		refs[i] = "Patient/" + id
	}
	q := &Query{Type: resourceType, Count: DefaultCount}
	conds := make([]bson.D, 0, len(params))
	for _, code := range params {
		if code == CompartmentSelf {
			if len(patientIDs) == 0 {
				return q, nil // every patient is in its own compartment
			}
			conds = append(conds, eqAny("_id", patientIDs))
			continue
		}
		if p, ok := r.Lookup(resourceType, code); !ok || p.Type != "reference" {
			return nil, fmt.Errorf("patient compartment of %s: %q is not a reference parameter", resourceType, code)
		}
		field := "idx." + code
		if len(refs) == 0 {
			conds = append(conds, bson.D{{Key: field, Value: prefix("Patient/")}})
		} else {
			conds = append(conds, eqAny(field, refs))
		}
	}
	if len(conds) > 0 {
		q.Conditions = []bson.D{anyOf(conds)}
	}
	return q, nil
}
