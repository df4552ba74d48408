package questionnaire

import "strings"

// The extensions whose rules a response is checked against.
const (
	coreExt = "http://hl7.org/fhir/StructureDefinition/"
	sdcExt  = "http://hl7.org/fhir/uv/sdc/StructureDefinition/"

	extMinValue         = coreExt + "minValue"
	extMaxValue         = coreExt + "maxValue"
	extMinLength        = coreExt + "minLength"
	extRegex            = coreExt + "regex"
	extMaxDecimalPlaces = coreExt + "maxDecimalPlaces"
	extMinOccurs        = coreExt + "questionnaire-minOccurs"
	extMaxOccurs        = coreExt + "questionnaire-maxOccurs"
	extUnit             = coreExt + "questionnaire-unit"
	extUnitOption       = coreExt + "questionnaire-unitOption"
	extUnitValueSet     = coreExt + "questionnaire-unitValueSet"
	extMimeType         = coreExt + "mimeType"
	extMaxSize          = coreExt + "maxSize"
	extReferenceType    = coreExt + "questionnaire-referenceResource"
	extMinQuantity      = sdcExt + "sdc-questionnaire-minQuantity"
	extMaxQuantity      = sdcExt + "sdc-questionnaire-maxQuantity"
	extEnableWhenExpr   = sdcExt + "sdc-questionnaire-enableWhenExpression"
	extCalculatedExpr   = sdcExt + "sdc-questionnaire-calculatedExpression"
	extVariable         = coreExt + "variable"
)

// extensions returns the extensions of el with url.
func extensions(el map[string]any, url string) []map[string]any {
	var out []map[string]any
	list, _ := el["extension"].([]any)
	for _, x := range list {
		if e, ok := x.(map[string]any); ok && e["url"] == url {
			out = append(out, e)
		}
	}
	return out
}

// extension returns the first extension of el with url, nil when none.
func extension(el map[string]any, url string) map[string]any {
	list, _ := el["extension"].([]any)
	for _, x := range list {
		if e, ok := x.(map[string]any); ok && e["url"] == url {
			return e
		}
	}
	return nil
}

// extValue returns the value[x] of the first extension of el with url: its
// type suffix (Integer, Decimal…) and value.
func extValue(el map[string]any, url string) (typ string, v any, ok bool) {
	e := extension(el, url)
	if e == nil {
		return "", nil, false
	}
	return valueOf(e)
}

// valueOf returns the value[x] of an element: its type suffix and value.
func valueOf(el map[string]any) (typ string, v any, ok bool) {
	for k, v := range el {
		if strings.HasPrefix(k, "value") && len(k) > len("value") {
			return k[len("value"):], v, true
		}
	}
	return "", nil, false
}

// answerOf is valueOf for an answer of a response or an option of a form:
// value[x] or answer[x].
func answerOf(el map[string]any, prefix string) (typ string, v any, ok bool) {
	for k, v := range el {
		if strings.HasPrefix(k, prefix) && len(k) > len(prefix) {
			return k[len(prefix):], v, true
		}
	}
	return "", nil, false
}
