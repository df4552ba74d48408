package profile_test

// ext finds the extension of r with url.
func ext(r obj, url string) obj {
	for _, x := range r["extension"].(list) {
		if e := x.(obj); e["url"] == url {
			return e
		}
	}
	return nil
}

// mutations: one or more per rule, each a sentence a FHIR user would
// recognise, refused at the exact element.
var mutations = []mutation{
	// Cardinality, at every level.
	{"US Core Patient without identifier", "6.1.0", "Patient-example.json", "",
		func(r obj) { delete(r, "identifier") }, "Patient.identifier", "minimum required = 1"},
	{"an identifier without a system", "6.1.0", "Patient-example.json", "",
		func(r obj) { delete(r["identifier"].(list)[0].(obj), "system") }, "Patient.identifier[0].system", "minimum required = 1"},
	{"an implantable device with two UDI carriers", "6.1.0", "Device-udi-1.json", "",
		func(r obj) { r["udiCarrier"] = append(r["udiCarrier"].(list), r["udiCarrier"].(list)[0]) }, "Device.udiCarrier", "maximum allowed = 1"},
	{"blood pressure with one component", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) { r["component"] = r["component"].(list)[:1] }, "Observation.component", "minimum required = 2"},

	// Types and choice types.
	{"pregnancy intent with a string value", "6.1.0", "Observation-pregnancy-intent.json", "",
		func(r obj) { delete(r, "valueCodeableConcept"); r["valueString"] = "yes" }, "Observation.valueString", "type string is not allowed"},
	{"pregnancy intent dated by a period", "6.1.0", "Observation-pregnancy-intent.json", "",
		func(r obj) {
			r["effectivePeriod"] = obj{"start": r["effectiveDateTime"]}
			delete(r, "effectiveDateTime")
		}, "Observation.effectivePeriod", "type Period is not allowed"},

	// Reference targets.
	{"lab Observation about a Device", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) { r["subject"] = obj{"reference": "Device/udi-1"} }, "Observation.subject", "only Patient may be referenced"},
	{"lab Observation about an absolute Group URL", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) { r["subject"] = obj{"reference": "https://example.org/fhir/Group/g1/_history/2"} }, "Observation.subject", "points to a Group"},
	{"lab Observation about a contained Patient that is not US Core", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) {
			r["contained"] = list{obj{"resourceType": "Patient", "id": "p", "name": list{obj{"family": "Doe"}}, "gender": "female"}}
			r["subject"] = obj{"reference": "#p"}
		}, "Observation.subject", "conforms to none of http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"},

	// fixed[x] and pattern[x].
	{"a systolic pressure not in UCUM", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) {
			r["component"].(list)[0].(obj)["valueQuantity"].(obj)["system"] = "http://example.org/units"
		}, "Observation.component[0].valueQuantity.system", "fixedUri"},
	{"blood pressure coded as heart rate", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) { r["code"] = obj{"coding": list{obj{"system": "http://loinc.org", "code": "8867-4"}}} }, "Observation.code", "patternCodeableConcept"},

	// Slicing: value (extension url), pattern, type and slice cardinality.
	{"two race extensions", "6.1.0", "Patient-example.json", "",
		func(r obj) { r["extension"] = append(r["extension"].(list), r["extension"].(list)[0]) }, "Patient.extension", "slice race allows at most 1"},
	{"blood pressure without its diastolic slice", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) { r["component"] = r["component"].(list)[:1] }, "Observation.component", "slice diastolic requires at least 1"},
	{"lab Observation whose category lacks the laboratory coding", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) { r["category"] = list{obj{"text": "lab"}} }, "Observation.category", "slice us-core requires at least 1"},
	{"a BMI quantity without its unit (type slice)", "6.1.0", "Observation-bmi.json", "",
		func(r obj) { delete(r["valueQuantity"].(obj), "unit") }, "Observation.valueQuantity.unit", "minimum required = 1"},

	// Extensions by their definitions.
	{"race on an Observation, outside its context", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) {
			r["extension"] = list{obj{"url": uc + "us-core-race", "extension": list{obj{"url": "text", "valueString": "x"}}}}
		}, "Observation.extension[0]", "is not allowed on Observation"},
	{"birth sex as a string", "6.1.0", "Patient-example.json", "",
		func(r obj) { e := ext(r, uc+"us-core-birthsex"); delete(e, "valueCode"); e["valueString"] = "F" }, "Patient.extension[3].valueString", "type string is not allowed"},
	{"a race category outside the OMB categories", "3.1.1", "Patient-example.json", "",
		func(r obj) {
			c := ext(r, uc+"us-core-race")["extension"].(list)[0].(obj)["valueCoding"].(obj)
			c["code"] = "9999-9"
		}, "Patient.extension[0].extension[0].valueCoding", "not in the required value set http://hl7.org/fhir/us/core/ValueSet/omb-race-category"},
	{"race without its text", "6.1.0", "Patient-example.json", "",
		func(r obj) {
			e := ext(r, uc+"us-core-race")
			e["extension"] = e["extension"].(list)[:len(e["extension"].(list))-1]
		}, "Patient.extension[0].extension", "slice text requires at least 1"},
	{"an unknown modifier extension", "6.1.0", "Patient-example.json", "",
		func(r obj) {
			r["modifierExtension"] = list{obj{"url": "http://example.org/unknown", "valueBoolean": true}}
		}, "Patient.modifierExtension[0]", "modifier extension http://example.org/unknown is not known"},

	// Bindings.
	{"a gender outside administrative-gender", "6.1.0", "Patient-example.json", "",
		func(r obj) { r["gender"] = "woman" }, "Patient.gender", `the code "woman" is not in the required value set http://hl7.org/fhir/ValueSet/administrative-gender`},
	{"an Observation status outside observation-status", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) { r["status"] = "done" }, "Observation.status", "required value set http://hl7.org/fhir/ValueSet/observation-status"},
	{"a birth sex code outside birthsex", "3.1.1", "Patient-example.json", "",
		func(r obj) { ext(r, uc+"us-core-birthsex")["valueCode"] = "X" }, "Patient.extension[2].valueCode", "not in the required value set http://hl7.org/fhir/us/core/ValueSet/birthsex"},

	// The profile's own invariants.
	{"a name with only text breaks us-core-6", "6.1.0", "Patient-example.json", "",
		func(r obj) { r["name"] = list{obj{"text": "Amy"}} }, "Patient.name[0]", "us-core-6"},

	{"a 3.1.1 lab result dated to the year breaks us-core-1", "3.1.1", "Observation-hemoglobin.json", "",
		func(r obj) { r["effectiveDateTime"] = "2005" }, "Observation.effectiveDateTime", "us-core-1"},
	{"a BMI dated to the month breaks vs-1 of the vital signs", "6.1.0", "Observation-bmi.json", "",
		func(r obj) { r["effectiveDateTime"] = "1999-07" }, "Observation.effectiveDateTime", "vs-1: if Observation.effective[x] is dateTime"},

	// A resource of another type than the profile's.
	{"a Patient against a lab profile", "6.1.0", "Patient-example.json", uc + "us-core-observation-lab",
		func(r obj) {}, "Patient", "the profile constrains Observation, not Patient"},

	// US Core 3.1.1.
	{"3.1.1 Patient without a name", "3.1.1", "Patient-example.json", "",
		func(r obj) { delete(r, "name") }, "Patient.name", "minimum required = 1"},
	{"3.1.1 smoking status without a value", "3.1.1", "Observation-some-day-smoker.json", "",
		func(r obj) { delete(r, "valueCodeableConcept") }, "Observation.value", "minimum required = 1"},
}

// cautions: changes a profile warns about without refusing them.
var cautions = []mutation{
	{"an identifier type outside the extensible identifier-type", "6.1.0", "Patient-example.json", "",
		func(r obj) {
			r["identifier"].(list)[0].(obj)["type"] = obj{"coding": list{obj{"system": "http://example.org/types", "code": "XX"}}}
		}, "Patient.identifier[0].type", "is not in the extensible value set http://hl7.org/fhir/ValueSet/identifier-type"},
	{"a birth sex code the VSAC value set would tell", "6.1.0", "Patient-example.json", "",
		func(r obj) { ext(r, uc+"us-core-birthsex")["valueCode"] = "X" }, "Patient.extension[3].valueCode", "is not available"},
	{"an unknown extension", "6.1.0", "Patient-example.json", "",
		func(r obj) {
			r["extension"] = append(r["extension"].(list), obj{"url": "http://example.org/favourite-colour", "valueString": "blue"})
		}, "Patient.extension[6]", "http://example.org/favourite-colour is not known"},
}
