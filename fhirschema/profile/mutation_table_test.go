package profile_test

var mutations = []mutation{
	{"US Core Patient without identifier", "6.1.0", "Patient-example.json", "",
		func(r obj) { delete(r, "identifier") }, "Patient.identifier", "minimum required = 1"},
	{"a name with only text breaks us-core-6", "6.1.0", "Patient-example.json", "",
		func(r obj) { r["name"] = list{obj{"text": "Amy"}} }, "Patient.name[0]", "us-core-6"},
	{"blood pressure with one component", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) { r["component"] = r["component"].(list)[:1] }, "Observation.component", "minimum required = 2"},
	{"blood pressure without its diastolic slice", "6.1.0", "Observation-blood-pressure.json", "",
		func(r obj) { r["component"] = r["component"].(list)[:1] }, "Observation.component", "slice diastolic requires at least 1"},
	{"lab Observation whose category lacks the laboratory coding", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) { r["category"] = list{obj{"text": "lab"}} }, "Observation.category", "slice us-core requires at least 1"},
	{"lab Observation about a Device", "6.1.0", "Observation-cbc-hemoglobin.json", "",
		func(r obj) { r["subject"] = obj{"reference": "Device/udi-1"} }, "Observation.subject", "only Patient may be referenced"},
}
