package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// The crud operation replays the shape of Health Samurai's FHIR server
// benchmark "crud" scenario: one cycle creates nine resources that refer to
// each other, reads each, updates each and deletes each (the last created
// first, so that nothing is ever left referring to a deleted resource).

// crudTypes are the types of a cycle in creation order.
var crudTypes = []string{"Patient", "Location", "Organization", "Practitioner", "Encounter",
	"Observation", "MedicationRequest", "Claim", "ExplanationOfBenefit"}

// crudRef is the reference to the resource of a type created earlier in a cycle.
type crudRefs map[string]string

func (r crudRefs) ref(typ string) map[string]any {
	return map[string]any{"reference": typ + "/" + r[typ]}
}

// crudBody is the resource of typ for a cycle, referring to the resources
// created before it; version tells the update (2) from the create (1).
func crudBody(typ string, refs crudRefs, version int) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339)
	note := fmt.Sprintf("fhirbench crud v%d", version)
	coding := func(system, code string) map[string]any {
		return map[string]any{"coding": []any{map[string]any{"system": system, "code": code}}}
	}
	claimType := coding("http://terminology.hl7.org/CodeSystem/claim-type", "professional")
	coverage := map[string]any{"focal": true, "coverage": map[string]any{"display": note}}
	switch typ {
	case "Patient":
		var p map[string]any
		_ = json.Unmarshal(patientJSON(families[version%len(families)], "Crud"), &p)
		return p
	case "Location":
		return map[string]any{"resourceType": typ, "status": "active", "name": "Ward " + uuid.NewString()[:8], "description": note}
	case "Organization":
		return map[string]any{"resourceType": typ, "active": true, "name": "Clinic " + uuid.NewString()[:8], "alias": []string{note}}
	case "Practitioner":
		return map[string]any{"resourceType": typ, "active": true, "name": []any{map[string]any{"family": "Crud", "given": []string{note}}}}
	case "Encounter":
		return map[string]any{"resourceType": typ, "status": "finished",
			"class":           map[string]any{"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
			"subject":         refs.ref("Patient"),
			"participant":     []any{map[string]any{"individual": refs.ref("Practitioner")}},
			"location":        []any{map[string]any{"location": refs.ref("Location")}},
			"serviceProvider": refs.ref("Organization"),
			"period":          map[string]any{"start": now, "end": now}}
	case "Observation":
		o := observationJSON("Patient/"+refs["Patient"], "8867-4", "Heart rate", float64(60+version), "beats/minute", "/min")
		o["encounter"], o["performer"] = refs.ref("Encounter"), []any{refs.ref("Practitioner")}
		return o
	case "MedicationRequest":
		return map[string]any{"resourceType": typ, "status": "active", "intent": "order",
			"medicationCodeableConcept": coding("http://www.nlm.nih.gov/research/umls/rxnorm", "313782"),
			"subject":                   refs.ref("Patient"), "encounter": refs.ref("Encounter"),
			"requester": refs.ref("Practitioner"), "authoredOn": now, "note": []any{map[string]any{"text": note}}}
	case "Claim":
		return map[string]any{"resourceType": typ, "status": "active", "type": claimType, "use": "claim",
			"patient": refs.ref("Patient"), "created": now, "provider": refs.ref("Organization"),
			"insurer": refs.ref("Organization"), "priority": coding("http://terminology.hl7.org/CodeSystem/processpriority", "normal"),
			"insurance": []any{map[string]any{"sequence": 1, "focal": true, "coverage": coverage["coverage"]}},
			"item": []any{map[string]any{"sequence": 1, "productOrService": coding("http://snomed.info/sct", "185349003"),
				"encounter": []any{refs.ref("Encounter")}, "net": map[string]any{"value": 100 + version, "currency": "USD"}}}}
	default: // ExplanationOfBenefit
		return map[string]any{"resourceType": typ, "status": "active", "type": claimType, "use": "claim",
			"patient": refs.ref("Patient"), "created": now, "insurer": refs.ref("Organization"),
			"provider": refs.ref("Organization"), "claim": refs.ref("Claim"), "outcome": "complete",
			"insurance": []any{coverage}, "disposition": note}
	}
}

// crud runs one cycle; every request is also recorded on its own, under
// crud.create, crud.read, crud.update or crud.delete.
func (w *worker) crud(ctx context.Context) outcome {
	refs := crudRefs{}
	for _, typ := range crudTypes {
		body, _ := json.Marshal(crudBody(typ, refs, 1))
		x, ok := w.timed(ctx, opCrudCreate, http.MethodPost, "/"+typ, body, "", http.StatusCreated)
		if !ok {
			return outError
		}
		id, vid, ok := createdID(x, typ)
		if !ok || vid != 1 {
			return w.wrong(opCrudCreate, x, "POST /%s: 201 with Location %q, want %s/{id}/_history/1", typ, x.header.Get("Location"), typ)
		}
		refs[typ] = id
		w.b.track.ack(typ, id, vid)
	}
	for _, typ := range crudTypes {
		target := "/" + typ + "/" + refs[typ]
		if _, ok := w.timed(ctx, opCrudRead, http.MethodGet, target, nil, "", http.StatusOK); !ok {
			return outError
		}
	}
	for _, typ := range crudTypes {
		res := crudBody(typ, refs, 2)
		res["id"] = refs[typ]
		body, _ := json.Marshal(res)
		target := "/" + typ + "/" + refs[typ]
		x, ok := w.timed(ctx, opCrudUpdate, http.MethodPut, target, body, `W/"1"`, http.StatusOK)
		if !ok {
			return outError
		}
		if vid, ok := parseETag(x.header.Get("ETag")); !ok || vid != 2 {
			return w.wrong(opCrudUpdate, x, "PUT %s with If-Match W/\"1\": ETag %q, want W/\"2\"", target, x.header.Get("ETag"))
		}
		w.b.track.ack(typ, refs[typ], 2)
	}
	for i := len(crudTypes) - 1; i >= 0; i-- {
		typ := crudTypes[i]
		target := "/" + typ + "/" + refs[typ]
		x, ok := w.timed(ctx, opCrudDelete, http.MethodDelete, target, nil, "", http.StatusOK, http.StatusNoContent)
		if !ok {
			return outError
		}
		if vid, ok := parseETag(x.header.Get("ETag")); ok {
			w.b.track.ack(typ, refs[typ], vid)
		}
		w.b.track.deleted(typ, refs[typ])
	}
	return outOK
}

// timed is call that also records the request's own latency under k.
func (w *worker) timed(ctx context.Context, k op, method, target string, body []byte, ifMatch string, want ...int) (exchange, bool) {
	t0 := time.Now()
	x, ok := w.call(ctx, k, method, target, body, ifMatch, want...)
	out := outOK
	if !ok {
		out = outError
	}
	w.rec.op(k, out, time.Since(t0))
	return x, ok
}
