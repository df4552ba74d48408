package fhirxml

import (
	"errors"
	"strings"
	"testing"
)

const ns = ` xmlns="http://hl7.org/fhir"`

func TestXMLReadsAsCanonicalJSON(t *testing.T) {
	cases := []struct{ name, xml, json string }{
		{"booleans and integers take their JSON types from the schema",
			`<Patient` + ns + `><active value="true"/><multipleBirthInteger value="2"/></Patient>`,
			`{"resourceType":"Patient","active":true,"multipleBirthInteger":2}`},
		{"decimals keep their exact text",
			`<Observation` + ns + `><status value="final"/><code><text value="x"/></code><valueQuantity><value value="1.50"/></valueQuantity></Observation>`,
			`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50}}`},
		{"elements out of order come out in definition order, resourceType first",
			`<Patient` + ns + `><gender value="male"/><name><given value="A"/><family value="B"/></name><id value="p1"/></Patient>`,
			`{"resourceType":"Patient","id":"p1","name":[{"family":"B","given":["A"]}],"gender":"male"}`},
		{"a primitive id and extension become the _name sibling",
			`<Patient` + ns + `><birthDate id="b1" value="1970-01-01"><extension url="u"><valueString value="s"/></extension></birthDate></Patient>`,
			`{"resourceType":"Patient","birthDate":"1970-01-01","_birthDate":{"id":"b1","extension":[{"url":"u","valueString":"s"}]}}`},
		{"repeating primitives align ids with values by nulls",
			`<Patient` + ns + `><name><given value="A"/><given id="g2"><extension url="u"><valueCode value="c"/></extension></given><given value="C"/></name></Patient>`,
			`{"resourceType":"Patient","name":[{"given":["A",null,"C"],"_given":[null,{"id":"g2","extension":[{"url":"u","valueCode":"c"}]},null]}]}`},
		{"element id and extension url are attributes, url first in JSON",
			`<Patient` + ns + `><extension id="e1" url="http://x"><valueBoolean value="false"/></extension></Patient>`,
			`{"resourceType":"Patient","extension":[{"id":"e1","url":"http://x","valueBoolean":false}]}`},
		{"the narrative div is kept as raw markup",
			`<Patient` + ns + `><text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml"><p>a &amp; <b>b</b>&#160;</p></div></text></Patient>`,
			`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>a &amp; <b>b</b>&#160;</p></div>"}}`},
		{"contained resources are unwrapped",
			`<Patient` + ns + `><contained><Organization><id value="o"/><name value="N"/></Organization></contained></Patient>`,
			`{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","name":"N"}]}`},
		{"escaped newlines and quotes in values survive",
			`<Patient` + ns + `><name><text value="a&#xA;b &quot;c&quot; &lt;d&gt;"/></name></Patient>`,
			`{"resourceType":"Patient","name":[{"text":"a\nb \"c\" <d>"}]}`},
		{"prolog, comments and xsi:schemaLocation are fine",
			"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- c -->\n<Patient" + ns + ` xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://hl7.org/fhir x.xsd"><!-- c --><active value="true"/></Patient>` + "\n",
			`{"resourceType":"Patient","active":true}`},
		{"a property named resourceType is not the resource's",
			`<ExampleScenario` + ns + `><status value="draft"/><instance><resourceId value="r"/><resourceType value="Patient"/></instance></ExampleScenario>`,
			`{"resourceType":"ExampleScenario","status":"draft","instance":[{"resourceId":"r","resourceType":"Patient"}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ToJSON([]byte(c.xml))
			if err != nil {
				t.Fatalf("ToJSON: %v", err)
			}
			if string(got) != c.json {
				t.Fatalf("got  %s\nwant %s", got, c.json)
			}
			x, err := FromJSON(got, WriteOptions{})
			if err != nil {
				t.Fatalf("FromJSON: %v", err)
			}
			again, err := ToJSON(x)
			if err != nil || string(again) != c.json {
				t.Fatalf("re-read %s: %v\n%s", x, err, again)
			}
		})
	}
}

func TestBadXMLIsRejectedAtItsElement(t *testing.T) {
	deep := `<Patient` + ns + `>` + strings.Repeat(`<extension url="u">`, 120) + strings.Repeat(`</extension>`, 120) + `</Patient>`
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><Patient` + ns + `><name><family value="&lol2;"/></name></Patient>`
	cases := []struct{ name, xml, path, msg string }{
		{"not well-formed", `<Patient` + ns + `><name><family value="x"/></Patient>`, "Patient.name[0]", "not well-formed"},
		{"truncated", `<Patient` + ns + `><name>`, "Patient.name[0]", "not well-formed"},
		{"no namespace", `<Patient><active value="true"/></Patient>`, "Patient", "no namespace"},
		{"wrong namespace", `<Patient xmlns="http://hl7.org/fhir/x"><active value="true"/></Patient>`, "Patient", "namespace"},
		{"child in another namespace", `<Patient` + ns + `><active xmlns="urn:x" value="true"/></Patient>`, "Patient.active", "namespace"},
		{"unknown resource type", `<Patient2` + ns + `/>`, "Patient2", "unknown resource type"},
		{"unknown element", `<Patient` + ns + `><nickname value="x"/></Patient>`, "Patient.nickname", "unknown element"},
		{"unknown element deep", `<Patient` + ns + `><name><first value="x"/></name></Patient>`, "Patient.name[0].first", "unknown element"},
		{"unknown attribute", `<Patient` + ns + `><active value="true" foo="1"/></Patient>`, "Patient.active", "unknown attribute"},
		{"value attribute on a complex element", `<Patient` + ns + `><name value="x"/></Patient>`, "Patient.name[0]", "unknown attribute"},
		{"id attribute on a resource", `<Patient` + ns + ` id="x"/>`, "Patient", "unknown attribute"},
		{"DOCTYPE", `<!DOCTYPE Patient><Patient` + ns + `/>`, "", "DOCTYPE"},
		{"external entity (XXE)", `<!DOCTYPE p [<!ENTITY x SYSTEM "file:///etc/passwd">]><Patient` + ns + `><name><family value="&x;"/></name></Patient>`, "", "DOCTYPE"},
		{"undeclared entity", `<Patient` + ns + `><name><family value="&x;"/></name></Patient>`, "Patient.name[0]", "entity"},
		{"billion laughs", laughs, "", "DOCTYPE"},
		{"nesting deeper than 100", deep, "Patient" + strings.Repeat(".extension[0]", 100), "deeper than 100"},
		{"text content instead of a value attribute", `<Patient` + ns + `><gender>male</gender></Patient>`, "Patient.gender", "text is not allowed"},
		{"a boolean that is not true or false", `<Patient` + ns + `><active value="yes"/></Patient>`, "Patient.active", "not true or false"},
		{"a decimal that is not a number", `<Observation` + ns + `><valueQuantity><value value="1,5"/></valueQuantity></Observation>`, "Observation.valueQuantity.value", "not a number"},
		{"a decimal with a leading zero", `<Observation` + ns + `><valueQuantity><value value="01.5"/></valueQuantity></Observation>`, "Observation.valueQuantity.value", "not a number"},
		{"a single element repeated", `<Patient` + ns + `><gender value="male"/><gender value="female"/></Patient>`, "Patient.gender", "only once"},
		{"a primitive without value, id or extension", `<Patient` + ns + `><gender/></Patient>`, "Patient.gender", "no value"},
		{"a div without the XHTML namespace", `<Patient` + ns + `><text><status value="generated"/><div>x</div></text></Patient>`, "Patient.text.div", "namespace"},
		{"two roots", `<Patient` + ns + `/><Patient` + ns + `/>`, "Patient", "more than one root"},
		{"text after the root", `<Patient` + ns + `/>x`, "", "text outside"},
		{"empty document", ``, "", "no resource element"},
		{"a wrapper without a resource", `<Patient` + ns + `><contained/></Patient>`, "Patient.contained[0]", "holds no resource"},
		{"a wrapper with a non-resource", `<Patient` + ns + `><contained><name/></contained></Patient>`, "Patient.contained[0]", "not a FHIR resource"},
		{"a non-UTF-8 encoding", `<?xml version="1.0" encoding="ISO-8859-1"?><Patient` + ns + `/>`, "", "not well-formed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := ToJSON([]byte(c.xml))
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("want an *Error, got %v (%s)", err, out)
			}
			if xe.Path != c.path || !strings.Contains(xe.Error(), c.msg) {
				t.Fatalf("got path %q, %q; want path %q and %q", xe.Path, xe.Error(), c.path, c.msg)
			}
		})
	}
}

func TestJSONThatXMLCannotCarryIsAnError(t *testing.T) {
	cases := []struct{ name, json, path string }{
		{"unknown property", `{"resourceType":"Patient","nickname":"x"}`, "Patient.nickname"},
		{"unknown resource type", `{"resourceType":"Patient2"}`, ""},
		{"a number where a string belongs", `{"resourceType":"Patient","gender":1}`, "Patient.gender"},
		{"an array where one value belongs", `{"resourceType":"Patient","gender":["male"]}`, "Patient.gender"},
		{"an extension of Extension.url", `{"resourceType":"Patient","extension":[{"url":"u","_url":{"id":"x"},"valueString":"s"}]}`, "Patient.extension[0]._url"},
		{"a malformed narrative", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p></div>"}}`, "Patient.text.div"},
		{"an undefined entity in the narrative", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">&bogus;</div>"}}`, "Patient.text.div"},
		{"null in a single value", `{"resourceType":"Patient","gender":null}`, "Patient.gender"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := FromJSON([]byte(c.json), WriteOptions{})
			var xe *Error
			if !errors.As(err, &xe) || xe.Path != c.path {
				t.Fatalf("want an *Error at %q, got %v (%s)", c.path, err, out)
			}
		})
	}
}

func TestANarrativeWithoutItsNamespaceGetsIt(t *testing.T) {
	in := `{"resourceType":"Patient","text":{"status":"generated","div":"<div><p>x</p></div>"}}`
	x, err := FromJSON([]byte(in), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(x), `<div xmlns="http://www.w3.org/1999/xhtml"><p>x</p></div>`) {
		t.Fatalf("div without namespace: %s", x)
	}
}

func TestXHTMLNamedEntitiesOfAJSONNarrativeAreWrittenAsNumericReferences(t *testing.T) {
	in := `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Caf&eacute;&nbsp;&reg; &amp; co</div>"}}`
	x, err := FromJSON([]byte(in), WriteOptions{})
	if err != nil {
		t.Fatalf("named entities in the narrative: %v", err)
	}
	if !strings.Contains(string(x), `Caf&#233;&#160;&#174; &amp; co</div>`) {
		t.Fatalf("the XML written keeps named entities an XML reader cannot resolve: %s", x)
	}
	if _, err := ToJSON(x); err != nil {
		t.Fatalf("the XML written does not read back: %v", err)
	}
	// An XML document declares no entity beyond XML's five.
	if _, err := ToJSON([]byte(strings.Replace(string(x), "&#174;", "&reg;", 1))); err == nil {
		t.Fatal("an XML document using an undeclared entity is accepted")
	}
}

func TestPrettyXMLReadsBackTheSame(t *testing.T) {
	for name, in := range examples(t) {
		x, err := FromJSON(in, WriteOptions{Indent: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := ToJSON(x)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !sameJSON(t, got, canonical(t, in)) {
			t.Fatalf("%s: indented XML reads back differently", name)
		}
	}
}
