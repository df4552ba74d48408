package fhirschema_test

import (
	"reflect"
	"strings"
	"testing"

	"fhirstore/fhirschema"
)

// host places a primitive value of one type in a resource: the body with
// %s where the JSON value goes, and the FHIRPath of the value.
type host struct{ typ, body, expr string }

// primitiveHosts gives each primitive type an element of its own type and,
// through an extension of an unknown definition, a value[x] of that type.
func primitiveHosts(typ string) []host {
	direct := map[string]host{
		"boolean":      {"Patient", `{"resourceType":"Patient","active":%s}`, "Patient.active"},
		"integer":      {"Questionnaire", `{"resourceType":"Questionnaire","status":"draft","item":[{"linkId":"1","type":"string","maxLength":%s}]}`, "Questionnaire.item[0].maxLength"},
		"unsignedInt":  {"Patient", `{"resourceType":"Patient","photo":[{"size":%s}]}`, "Patient.photo[0].size"},
		"positiveInt":  {"Patient", `{"resourceType":"Patient","telecom":[{"rank":%s}]}`, "Patient.telecom[0].rank"},
		"decimal":      {"Location", `{"resourceType":"Location","position":{"longitude":0,"latitude":%s}}`, "Location.position.latitude"},
		"string":       {"Patient", `{"resourceType":"Patient","name":[{"family":%s}]}`, "Patient.name[0].family"},
		"markdown":     {"Questionnaire", `{"resourceType":"Questionnaire","status":"draft","description":%s}`, "Questionnaire.description"},
		"code":         {"Patient", `{"resourceType":"Patient","language":%s}`, "Patient.language"},
		"id":           {"Patient", `{"resourceType":"Patient","id":%s}`, "Patient.id"},
		"uri":          {"Patient", `{"resourceType":"Patient","implicitRules":%s}`, "Patient.implicitRules"},
		"url":          {"Patient", `{"resourceType":"Patient","photo":[{"url":%s}]}`, "Patient.photo[0].url"},
		"canonical":    {"Patient", `{"resourceType":"Patient","meta":{"profile":[%s]}}`, "Patient.meta.profile[0]"},
		"base64Binary": {"Patient", `{"resourceType":"Patient","photo":[{"contentType":"image/png","data":%s}]}`, "Patient.photo[0].data"},
		"date":         {"Patient", `{"resourceType":"Patient","birthDate":%s}`, "Patient.birthDate"},
		"dateTime":     {"Patient", `{"resourceType":"Patient","name":[{"period":{"start":%s}}]}`, "Patient.name[0].period.start"},
		"instant":      {"Patient", `{"resourceType":"Patient","meta":{"lastUpdated":%s}}`, "Patient.meta.lastUpdated"},
		"time":         {"HealthcareService", `{"resourceType":"HealthcareService","availableTime":[{"availableStartTime":%s}]}`, "HealthcareService.availableTime[0].availableStartTime"},
	}
	suffix := strings.ToUpper(typ[:1]) + typ[1:]
	hosts := []host{{"Patient", `{"resourceType":"Patient","extension":[{"url":"http://example.org/any","value` + suffix + `":%s}]}`,
		"Patient.extension[0].value.ofType(" + typ + ")"}}
	if h, ok := direct[typ]; ok {
		hosts = append(hosts, h)
	}
	return hosts
}

// primitiveDomains lists, per primitive type, JSON values the R4 datatypes
// page allows and values it forbids.
var primitiveDomains = []struct {
	typ            string
	valid, invalid []string
}{
	{"boolean", []string{`true`, `false`}, []string{`"true"`, `1`, `null`}},
	{"integer", []string{`0`, `-1`, `2147483647`, `-2147483648`}, []string{`2147483648`, `-2147483649`, `3.1`, `2.5`, `3.0`, `1e2`, `-0`, `"1"`}},
	{"unsignedInt", []string{`0`, `1`, `2147483647`}, []string{`-1`, `2147483648`, `1.5`, `"0"`}},
	{"positiveInt", []string{`1`, `2147483647`}, []string{`0`, `-1`, `2147483648`, `1.5`, `"1"`}},
	{"decimal", []string{`0`, `-1.50`, `3.14159`, `1e-3`, `1E+10`}, []string{`"1.5"`, `true`}},
	{"string", []string{`"x"`, `" padded "`, `"no\u00a0break"`, `"line\nbreak\ttab"`}, []string{`""`, `"   "`, `"bell\u0007"`, `1`, `{}`}},
	{"markdown", []string{`"**bold**"`, `"a\n\nb"`}, []string{`""`, `" "`, `"nul\u0000"`, `true`}},
	{"code", []string{`"en"`, `"two words"`, `"a-b_c.d"`}, []string{`""`, `" en"`, `"en "`, `"two  spaces"`, `"tab\tinside"`, `"line\nbreak"`, `1`}},
	{"id", []string{`"a"`, `"A-1.b"`, `"` + strings.Repeat("x", 64) + `"`}, []string{`""`, `"a b"`, `"a_b"`, `"` + strings.Repeat("x", 65) + `"`, `"é"`, `7`}},
	{"oid", []string{`"urn:oid:1.2.3"`, `"urn:oid:2.16.840.1.113883"`}, []string{`"1.2.3"`, `"urn:oid:3.1"`, `"urn:oid:1.02"`, `"urn:oid:1"`}},
	{"uuid", []string{`"urn:uuid:c757873d-ec9a-4326-a141-556f43239520"`}, []string{`"c757873d-ec9a-4326-a141-556f43239520"`, `"urn:uuid:C757873D-EC9A-4326-A141-556F43239520"`, `"urn:uuid:c757873d"`}},
	{"uri", []string{`"http://example.org/a?b=c"`, `"urn:x"`, `"a"`}, []string{`""`, `"a b"`, `"http://x/\u00a0"`, `1`}},
	{"url", []string{`"http://example.org/p.png"`}, []string{`""`, `"http://example.org/a b"`}},
	{"canonical", []string{`"http://example.org/StructureDefinition/x|1.0"`}, []string{`""`, `"http://example.org/ x"`}},
	{"base64Binary", []string{`"AAAA"`, `"aGVsbG8="`, `"aGk="`, `"aGVs\nbG8="`}, []string{`""`, `"abc"`, `"a=bc"`, `"aGk=="`, `"aGVsbG8*"`, `"===="`}},
	{"date", []string{`"2000"`, `"2000-02"`, `"2000-02-29"`, `"2024-02-29"`, `"1999-12-31"`}, []string{`"1900-02-29"`, `"2023-02-29"`, `"2000-02-30"`, `"2000-04-31"`, `"1999-13-01"`, `"1999-00-10"`, `"1999-01-00"`, `"0000"`, `"2000-01-01T00:00:00Z"`, `"20000101"`, `"2000-1-1"`}},
	{"dateTime", []string{`"2000"`, `"2000-02-29"`, `"2000-02-29T23:59:59Z"`, `"2000-01-01T00:00:00.123456789+14:00"`, `"2000-01-01T10:00:00-05:30"`}, []string{`"1900-02-29"`, `"2000-02-29T24:00:00Z"`, `"2000-01-01T10:00:00"`, `"2000-01-01T10:00Z"`, `"2000-01-01 10:00:00Z"`, `"1970-01-01T10:00:00.1234567890Z"`, `"2000-01-01T10:00:00+15:00"`, `"2000-01-01T10:00:00+14:30"`, `"2000-01-01T10:61:00Z"`}},
	{"instant", []string{`"2000-02-29T10:00:00Z"`, `"2000-01-01T10:00:00.5+01:00"`}, []string{`"2000-01-01"`, `"2000-01-01T10:00:00"`, `"2023-02-29T10:00:00Z"`, `"2000-01-01T10:00:00.0000000001Z"`, `"2000"`}},
	{"time", []string{`"00:00:00"`, `"23:59:59.999999999"`}, []string{`"24:00:00"`, `"10:00"`, `"10:00:00Z"`, `"10:00:00+01:00"`, `"10:60:00"`, `"10:00:00.1234567890"`}},
}

func TestPrimitiveValuesMustBeInTheirTypesDomain(t *testing.T) {
	v := mustValidator(t)
	for _, d := range primitiveDomains {
		for _, h := range primitiveHosts(d.typ) {
			for _, value := range d.valid {
				t.Run(d.typ+" accepts "+value+" at "+h.expr, func(t *testing.T) {
					body := strings.Replace(h.body, "%s", value, 1)
					if r := v.Validate(h.typ, []byte(body), fhirschema.Options{}); !r.Valid() {
						t.Fatalf("rejected %s: %+v", body, r.Issues)
					}
				})
			}
			for _, value := range d.invalid {
				t.Run(d.typ+" refuses "+value+" at "+h.expr, func(t *testing.T) {
					wantOneIssueAt(t, v, h.typ, strings.Replace(h.body, "%s", value, 1), h.expr)
				})
			}
		}
	}
}

// TestPrimitiveRepresentationRulesOverEveryType applies the JSON rules of a
// single primitive — null is no value, _name is an object with content —
// to an element of every primitive type.
func TestPrimitiveRepresentationRulesOverEveryType(t *testing.T) {
	v := mustValidator(t)
	const ext = `{"extension":[{"url":"http://example.org/why","valueCode":"unknown"}]}`
	rules := []struct {
		name, value, twin string // twin "" leaves _name out; value "" leaves the value out
		valid             bool
	}{
		{"null without _name is refused", `null`, "", false},
		{"null with _name is refused", `null`, ext, false},
		{"_name as a string is refused", "", `"x"`, false},
		{"_name as a number is refused", "", `1`, false},
		{"_name as null is refused", "", `null`, false},
		{"_name as an empty object is refused", "", `{}`, false},
		{"_name as an array is refused", "", `[` + ext + `]`, false},
		{"_name beside a bad value is one issue", "bad", ext, false},
		{"_name without a value is accepted", "", ext, true},
		{"_name with an id and a value is accepted", "good", `{"id":"a"}`, true},
	}
	for _, d := range primitiveDomains {
		for _, h := range primitiveHosts(d.typ) {
			i := strings.Index(h.body, `":%s`)
			if i < 0 {
				continue // a repeated element
			}
			prop := h.body[strings.LastIndex(h.body[:i], `"`)+1 : i]
			if prop == "id" {
				continue // Resource.id has no _id
			}
			for _, rule := range rules {
				t.Run(d.typ+" at "+h.expr+": "+rule.name, func(t *testing.T) {
					value := rule.value
					switch value {
					case "good":
						value = d.valid[0]
					case "bad":
						value = d.invalid[0]
					}
					var members []string
					if value != "" {
						members = append(members, `"`+prop+`":`+value)
					}
					if rule.twin != "" {
						members = append(members, `"_`+prop+`":`+rule.twin)
					}
					body := strings.Replace(h.body, `"`+prop+`":%s`, strings.Join(members, ","), 1)
					if rule.valid {
						if r := v.Validate(h.typ, []byte(body), fhirschema.Options{}); !r.Valid() {
							t.Fatalf("rejected %s: %+v", body, r.Issues)
						}
						return
					}
					wantOneIssueAt(t, v, h.typ, body, h.expr)
				})
			}
		}
	}
}

// wantOneIssueAt validates body and expects exactly one error, at expr.
func wantOneIssueAt(t *testing.T, v *fhirschema.Validator, typ, body, expr string) {
	t.Helper()
	r := v.Validate(typ, []byte(body), fhirschema.Options{})
	if r.Valid() {
		t.Fatalf("accepted %s", body)
	}
	if len(r.Issues) != 1 || r.Issues[0].Expression != expr || r.Issues[0].Diagnostics == "" {
		t.Fatalf("%s: want one issue at %s, got %+v", body, expr, r.Issues)
	}
}

// TestJSONRepresentationRules walks the rules of the R4 JSON format that
// are about the shape of the JSON rather than the values.
func TestJSONRepresentationRules(t *testing.T) {
	v := mustValidator(t)
	tests := []struct {
		name, typ, body, expr string
	}{
		{"null for a single primitive", "Patient", `{"resourceType":"Patient","birthDate":null}`, "Patient.birthDate"},
		{"null for a single primitive that has an extension", "Patient", `{"resourceType":"Patient","birthDate":null,"_birthDate":{"extension":[{"url":"http://x","valueString":"y"}]}}`, "Patient.birthDate"},
		{"null for a complex element", "Patient", `{"resourceType":"Patient","maritalStatus":null}`, "Patient.maritalStatus"},
		{"null for an array", "Patient", `{"resourceType":"Patient","telecom":null}`, "Patient.telecom"},
		{"null in an array of complex elements", "Patient", `{"resourceType":"Patient","telecom":[null]}`, "Patient.telecom[0]"},
		{"null in an array of primitives without _name", "Patient", `{"resourceType":"Patient","name":[{"given":["A",null]}]}`, "Patient.name[0].given[1]"},
		{"null in an array of primitives whose _name is null there", "Patient", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[{"id":"a"},null]}]}`, "Patient.name[0].given[1]"},
		{"null in an array of primitives whose _name entry is empty", "Patient", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{}]}]}`, "Patient.name[0].given[1]"},
		{"empty array", "Patient", `{"resourceType":"Patient","telecom":[]}`, "Patient.telecom"},
		{"empty array of primitives", "Patient", `{"resourceType":"Patient","name":[{"given":[]}]}`, "Patient.name[0].given"},
		{"empty object in an array", "Patient", `{"resourceType":"Patient","telecom":[{"system":"phone"},{}]}`, "Patient.telecom[1]"},
		{"empty object", "Patient", `{"resourceType":"Patient","maritalStatus":{}}`, "Patient.maritalStatus"},
		{"string for a complex element", "Patient", `{"resourceType":"Patient","maritalStatus":"married"}`, "Patient.maritalStatus"},
		{"object for a repeating element", "Patient", `{"resourceType":"Patient","telecom":{"system":"phone"}}`, "Patient.telecom"},
		{"array for a single element", "Patient", `{"resourceType":"Patient","birthDate":["2000-01-01"]}`, "Patient.birthDate"},
		{"_name as a string", "Patient", `{"resourceType":"Patient","_birthDate":"x"}`, "Patient.birthDate"},
		{"_name as a number", "Patient", `{"resourceType":"Patient","gender":"male","_gender":1}`, "Patient.gender"},
		{"_name as null", "Patient", `{"resourceType":"Patient","gender":"male","_gender":null}`, "Patient.gender"},
		{"_name as an empty object", "Patient", `{"resourceType":"Patient","gender":"male","_gender":{}}`, "Patient.gender"},
		{"_name as an array for a single primitive", "Patient", `{"resourceType":"Patient","_gender":[{"id":"a"}]}`, "Patient.gender"},
		{"_name as an object for a repeated primitive", "Patient", `{"resourceType":"Patient","name":[{"given":["A"],"_given":{"id":"a"}}]}`, "Patient.name[0].given"},
		{"_name array of another length", "Patient", `{"resourceType":"Patient","name":[{"given":["A","B"],"_given":[{"id":"a"}]}]}`, "Patient.name[0].given"},
		{"_name array entry that is a string", "Patient", `{"resourceType":"Patient","name":[{"given":["A"],"_given":["x"]}]}`, "Patient.name[0].given[0]"},
		{"_name array entry that is empty", "Patient", `{"resourceType":"Patient","name":[{"given":["A"],"_given":[{}]}]}`, "Patient.name[0].given[0]"},
		{"_name array without values that has a null", "Patient", `{"resourceType":"Patient","name":[{"_given":[{"extension":[{"url":"http://x","valueString":"y"}]},null]}]}`, "Patient.name[0].given[1]"},
		{"_name of a complex element", "Patient", `{"resourceType":"Patient","_maritalStatus":{"id":"a"}}`, "Patient._maritalStatus"},
		{"unknown element inside _name", "Patient", `{"resourceType":"Patient","gender":"male","_gender":{"nosuch":1}}`, "Patient.gender.nosuch"},
		{"bad extension inside _name of a repeated primitive", "Patient", `{"resourceType":"Patient","name":[{"given":["A"],"_given":[{"extension":[{"url":"http://x"}]}]}]}`, "Patient.name[0].given[0].extension[0]"},
		{"two types of one choice element", "Patient", `{"resourceType":"Patient","deceasedBoolean":true,"deceasedDateTime":"2000-01-01"}`, "Patient.deceased"},
		{"choice element of the wrong JSON type", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueBoolean":"yes"}`, "Observation.value.ofType(boolean)"},
		{"complex choice element with a bad value", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":"1"}}`, "Observation.value.ofType(Quantity).value"},
		{"unknown element in a complex choice element", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"nosuch":1}}`, "Observation.value.ofType(Quantity).nosuch"},
		{"required element missing in a complex choice element", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueRatio":{"numerator":{"value":1}},"effectivePeriod":{"start":"2000-13"}}`, "Observation.effective.ofType(Period).start"},
		{"_name of a choice element", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueString":"a","_valueString":"b"}`, "Observation.value.ofType(string)"},
		{"bad value deep in a Bundle entry", "Bundle", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueInteger":2.5}}]}`, "Bundle.entry[0].resource.value.ofType(integer)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneIssueAt(t, v, tt.typ, tt.body, tt.expr) })
	}
}

func TestJSONRepresentationAllows(t *testing.T) {
	v := mustValidator(t)
	for _, body := range []string{
		`{"resourceType":"Patient","_birthDate":{"extension":[{"url":"http://x","valueString":"y"}]}}`,
		`{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://x","valueString":"y"}]}]}]}`,
		`{"resourceType":"Patient","name":[{"_given":[{"id":"a","extension":[{"url":"http://x","valueString":"y"}]},{"extension":[{"url":"http://x","valueString":"z"}]}]}]}`,
		`{"resourceType":"Patient","name":[{"given":["A","B"],"_given":[{"id":"a"},null]}]}`,
		`{"resourceType":"Patient","gender":"male","_gender":{"id":"g"}}`,
		`{"resourceType":"Observation","status":"final","code":{"text":"x"},"_valueString":{"extension":[{"url":"http://x","valueCode":"unknown"}]}}`,
	} {
		if r := v.Validate(strings.SplitN(body[17:], `"`, 2)[0], []byte(body), fhirschema.Options{}); !r.Valid() {
			t.Errorf("rejected %s: %+v", body, r.Issues)
		}
	}
}

func TestExtensionRules(t *testing.T) {
	v := mustValidator(t)
	tenant := fhirschema.ExtensionTypes(func(url string) ([]string, bool) {
		switch url {
		case "http://example.org/fhir/StructureDefinition/shoe-size":
			return []string{"decimal", "Quantity"}, true
		case "http://example.org/fhir/StructureDefinition/address-history":
			return []string{}, true
		case "http://example.org/fhir/StructureDefinition/address-history#from":
			return []string{"date"}, true
		}
		return nil, false
	})
	tests := []struct {
		name, extension, expr string
	}{
		{"no url", `{"valueString":"x"}`, "Patient.extension[0].url"},
		{"neither a value nor nested extensions", `{"url":"http://example.org/x"}`, "Patient.extension[0]"},
		{"both a value and nested extensions", `{"url":"http://example.org/x","valueString":"x","extension":[{"url":"a","valueString":"b"}]}`, "Patient.extension[0]"},
		{"two values", `{"url":"http://example.org/x","valueString":"x","valueBoolean":true}`, "Patient.extension[0].value"},
		{"a nested extension without value", `{"url":"http://example.org/x","extension":[{"url":"a"}]}`, "Patient.extension[0].extension[0]"},
		{"a core extension with a value of a type it does not allow", `{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDate":"2000-01-01"}`, "Patient.extension[0].value.ofType(date)"},
		{"a core extension of nested extensions given a value", `{"url":"http://hl7.org/fhir/StructureDefinition/patient-nationality","valueString":"x"}`, "Patient.extension[0].value.ofType(string)"},
		{"a core extension that takes a value given nested extensions", `{"url":"http://hl7.org/fhir/StructureDefinition/patient-mothersMaidenName","extension":[{"url":"a","valueString":"b"}]}`, "Patient.extension[0]"},
		{"a tenant's extension with a value of a type it does not allow", `{"url":"http://example.org/fhir/StructureDefinition/shoe-size","valueString":"44"}`, "Patient.extension[0].value.ofType(string)"},
		{"a tenant's extension of nested extensions given a value", `{"url":"http://example.org/fhir/StructureDefinition/address-history","valueString":"x"}`, "Patient.extension[0].value.ofType(string)"},
		{"a nested extension with a value of a type its definition does not allow", `{"url":"http://example.org/fhir/StructureDefinition/address-history","extension":[{"url":"to","valueString":"x"},{"url":"from","valueString":"x"}]}`, "Patient.extension[0].extension[1].value.ofType(string)"},
		{"a nested core extension with a value of a type its definition does not allow", `{"url":"http://hl7.org/fhir/StructureDefinition/geolocation","extension":[{"url":"latitude","valueString":"north"},{"url":"longitude","valueDecimal":1}]}`, "Patient.extension[0].extension[0].value.ofType(string)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"resourceType":"Patient","extension":[` + tt.extension + `]}`
			r := v.Validate("Patient", []byte(body), fhirschema.Options{Extensions: tenant})
			if r.Valid() || len(r.Issues) != 1 || r.Issues[0].Expression != tt.expr {
				t.Fatalf("%s: want one issue at %s, got %+v", body, tt.expr, r.Issues)
			}
		})
	}
	for _, ext := range []string{
		`{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"2000-01-01T10:00:00Z"}`,
		`{"url":"http://example.org/fhir/StructureDefinition/shoe-size","valueDecimal":44.5}`,
		`{"url":"http://example.org/fhir/StructureDefinition/shoe-size","valueQuantity":{"value":44}}`,
		`{"url":"http://example.org/fhir/StructureDefinition/address-history","extension":[{"url":"from","valueDate":"2000"}]}`,
		`{"url":"http://example.org/unknown","valueAddress":{"city":"X"}}`,
	} {
		body := `{"resourceType":"Patient","extension":[` + ext + `]}`
		if r := v.Validate("Patient", []byte(body), fhirschema.Options{Extensions: tenant}); !r.Valid() {
			t.Errorf("rejected %s: %+v", body, r.Issues)
		}
	}
}

func TestExtensionDefinitionsReadTheAllowedValueTypes(t *testing.T) {
	tests := []struct {
		name, sd string
		want     map[string][]string
	}{
		{"value types from the differential", `{"resourceType":"StructureDefinition","url":"http://x/e","type":"Extension","differential":{"element":[{"path":"Extension.value[x]","type":[{"code":"string"},{"code":"Coding"}]}]}}`,
			map[string][]string{"http://x/e": {"string", "Coding"}}},
		{"value prohibited", `{"resourceType":"StructureDefinition","url":"http://x/e","type":"Extension","snapshot":{"element":[{"path":"Extension.value[x]","max":"0"}]}}`,
			map[string][]string{"http://x/e": {}}},
		{"nested extensions by slice and fixed url", `{"resourceType":"StructureDefinition","url":"http://x/race","type":"Extension","differential":{"element":[
			{"id":"Extension.extension:omb","path":"Extension.extension","sliceName":"omb"},
			{"id":"Extension.extension:omb.url","path":"Extension.extension.url","fixedUri":"ombCategory"},
			{"id":"Extension.extension:omb.value[x]","path":"Extension.extension.value[x]","type":[{"code":"Coding"}]},
			{"id":"Extension.extension:text","path":"Extension.extension","sliceName":"text"},
			{"id":"Extension.extension:text.value[x]","path":"Extension.extension.value[x]","type":[{"code":"string"}]},
			{"id":"Extension.value[x]","path":"Extension.value[x]","max":"0"}]}}`,
			map[string][]string{"http://x/race": {}, "http://x/race#ombCategory": {"Coding"}, "http://x/race#text": {"string"}}},
		{"the snapshot before the differential", `{"resourceType":"StructureDefinition","url":"http://x/e","type":"Extension","snapshot":{"element":[{"path":"Extension.value[x]","type":[{"code":"code"}]}]},"differential":{"element":[{"path":"Extension.value[x]","type":[{"code":"string"}]}]}}`,
			map[string][]string{"http://x/e": {"code"}}},
		{"value unconstrained", `{"resourceType":"StructureDefinition","url":"http://x/e","type":"Extension","differential":{"element":[{"path":"Extension.url"}]}}`,
			map[string][]string{}},
		{"not an extension", `{"resourceType":"StructureDefinition","url":"http://x/p","type":"Patient"}`, map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fhirschema.ExtensionDefinitions([]byte(tt.sd))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v %v, want %#v", got, err, tt.want)
			}
		})
	}
}
