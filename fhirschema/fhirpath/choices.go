package fhirpath

// choiceNames are the names of the choice elements ([x]) of FHIR R4, taken
// from the R4 JSON schema (an element is a choice when the schema has two or
// more properties name+Type and none called name). Only these names are
// looked up under a type suffix, so that Coverage.subscriber never picks
// up Coverage.subscriberId.
var choiceNames = map[string]bool{
	"abatement": true, "additive": true, "age": true, "allowed": true, "amount": true,
	"answer": true, "asNeeded": true, "author": true, "born": true, "bounds": true,
	"characteristic": true, "chargeItem": true, "code": true, "collected": true,
	"compareToSource": true, "content": true, "created": true, "date": true, "deceased": true,
	"defaultValue": true, "definingSubstance": true, "definition": true, "detail": true,
	"diagnosis": true, "dose": true, "doseNumber": true, "due": true, "effective": true,
	"entity": true, "event": true, "example": true, "fastingStatus": true, "fixed": true,
	"identified": true, "indication": true, "instantiates": true, "item": true,
	"legallyBinding": true, "location": true, "manufacturer": true, "maxValue": true,
	"medication": true, "minValue": true, "minimumVolume": true, "module": true,
	"multipleBirth": true, "name": true, "occurred": true, "occurrence": true, "offset": true,
	"onset": true, "outcome": true, "participantEffective": true, "pattern": true,
	"payment": true, "performed": true, "probability": true, "procedure": true, "product": true,
	"prognosis": true, "quantity": true, "rate": true, "reason": true, "referenceSeq": true,
	"reported": true, "scheduled": true, "seriesDoses": true, "serviced": true, "source": true,
	"start": true, "statusReason": true, "studyEffective": true, "subject": true,
	"substance": true, "target": true, "time": true, "timing": true, "topic": true, "used": true,
	"value": true, "when": true,
}

// ChoiceOf splits name, a choice element named with its type as JSON
// names it (valueDateTime, onsetPeriod), into the element and the type
// (value, dateTime); ok is false for a name that names no choice element
// so. FHIRPath navigates a choice by its element name only
// (value.ofType(dateTime)); search parameters of implementation guides
// often use the JSON name.
func ChoiceOf(name string) (element, typ string, ok bool) {
	for i := 1; i < len(name); i++ {
		if name[i] < 'A' || name[i] > 'Z' || !choiceNames[name[:i]] {
			continue
		}
		if t, ok := choiceType(name[i:]); ok {
			return name[:i], t, true
		}
	}
	return "", "", false
}
