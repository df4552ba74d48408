package fhirxml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// CheckNarratives finds the first narrative (a "div" string inside a
// "text" object) of a FHIR JSON resource that is not one well-formed XHTML
// div, as FHIR requires and XML output needs. It returns the element's
// path (Patient.text.div, Bundle.entry[0].resource.text.div) and the
// problem, or "" and nil.
func CheckNarratives(resourceJSON []byte) (string, error) {
	if !bytes.Contains(resourceJSON, []byte(`"div"`)) {
		return "", nil
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(resourceJSON, &root); err != nil {
		return "", nil // not an object: the JSON validator reports it
	}
	var typ string
	_ = json.Unmarshal(root["resourceType"], &typ)
	return checkNarrativesIn(typ, resourceJSON)
}

// checkNarrativesIn walks one JSON value at path.
func checkNarrativesIn(path string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return "", nil
	case raw[0] == '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return "", nil
		}
		for i, it := range items {
			if at, err := checkNarrativesIn(path+"["+strconv.Itoa(i)+"]", it); err != nil {
				return at, err
			}
		}
	case raw[0] == '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", nil
		}
		for k, v := range obj {
			if !bytes.Contains(v, []byte(`"div"`)) && k != "div" {
				continue
			}
			if at, err := checkNarrativeMember(path, k, v); err != nil {
				return at, err
			}
		}
	}
	return "", nil
}

// checkNarrativeMember checks member k of the object at path: a text
// object's div, or anything that may hold one.
func checkNarrativeMember(path, k string, v json.RawMessage) (string, error) {
	at := path + "." + k
	if k != "text" {
		return checkNarrativesIn(at, v)
	}
	var text struct {
		Div *string `json:"div"`
	}
	if json.Unmarshal(v, &text) != nil || text.Div == nil {
		return checkNarrativesIn(at, v)
	}
	if _, err := checkDiv(*text.Div); err != nil {
		return at + ".div", fmt.Errorf("the narrative is not well-formed XHTML: %w", err)
	}
	return "", nil
}
