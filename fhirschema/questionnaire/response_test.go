package questionnaire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/questionnaire"
)

// form has an item of every type and every rule a response is checked
// against.
const form = `{"resourceType":"Questionnaire","url":"http://example.org/q","status":"active","subjectType":["Patient"],"item":[
 {"linkId":"bool","type":"boolean","required":true},
 {"linkId":"dec","type":"decimal","extension":[
   {"url":"http://hl7.org/fhir/StructureDefinition/minValue","valueDecimal":1.5},
   {"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueDecimal":10},
   {"url":"http://hl7.org/fhir/StructureDefinition/maxDecimalPlaces","valueInteger":2}]},
 {"linkId":"int","type":"integer","extension":[
   {"url":"http://hl7.org/fhir/StructureDefinition/minValue","valueInteger":0},
   {"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueInteger":100}]},
 {"linkId":"date","type":"date","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueDate":"2030-01-01"}]},
 {"linkId":"dt","type":"dateTime","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/minValue","valueDateTime":"2020"}]},
 {"linkId":"time","type":"time"},
 {"linkId":"str","type":"string","maxLength":10,"extension":[
   {"url":"http://hl7.org/fhir/StructureDefinition/minLength","valueInteger":2},
   {"url":"http://hl7.org/fhir/StructureDefinition/regex","valueString":"[a-z]+"}]},
 {"linkId":"text","type":"text"},
 {"linkId":"url","type":"url"},
 {"linkId":"choice","type":"choice","answerOption":[{"valueCoding":{"system":"http://s","code":"a"}},{"valueCoding":{"system":"http://s","code":"b"}}]},
 {"linkId":"open","type":"open-choice","answerOption":[{"valueCoding":{"system":"http://s","code":"a"}}]},
 {"linkId":"vs","type":"choice","answerValueSet":"http://example.org/vs"},
 {"linkId":"att","type":"attachment","extension":[
   {"url":"http://hl7.org/fhir/StructureDefinition/mimeType","valueCode":"image/*"},
   {"url":"http://hl7.org/fhir/StructureDefinition/maxSize","valueDecimal":4}]},
 {"linkId":"ref","type":"reference","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/questionnaire-referenceResource","valueCode":"Patient"}]},
 {"linkId":"qty","type":"quantity","extension":[
   {"url":"http://hl7.org/fhir/StructureDefinition/questionnaire-unitOption","valueCoding":{"system":"http://unitsofmeasure.org","code":"kg"}},
   {"url":"http://hl7.org/fhir/StructureDefinition/questionnaire-unitOption","valueCoding":{"system":"http://unitsofmeasure.org","code":"g"}},
   {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-maxQuantity","valueQuantity":{"value":200,"system":"http://unitsofmeasure.org","code":"kg"}}]},
 {"linkId":"many","type":"string","repeats":true,"extension":[
   {"url":"http://hl7.org/fhir/StructureDefinition/questionnaire-minOccurs","valueInteger":1},
   {"url":"http://hl7.org/fhir/StructureDefinition/questionnaire-maxOccurs","valueInteger":2}]},
 {"linkId":"info","type":"display","text":"Read this"},
 {"linkId":"ro","type":"string","readOnly":true,"initial":[{"valueString":"fixed"}]},
 {"linkId":"grp","type":"group","repeats":true,"item":[
   {"linkId":"g1","type":"string","required":true},
   {"linkId":"g2","type":"integer","enableWhen":[{"question":"g1","operator":"=","answerString":"yes"}]}]},
 {"linkId":"parent","type":"boolean","item":[{"linkId":"child","type":"string"}]},
 {"linkId":"when-all","type":"string","enableBehavior":"all","enableWhen":[
   {"question":"int","operator":">=","answerInteger":10},{"question":"bool","operator":"=","answerBoolean":true}]},
 {"linkId":"when-any","type":"string","enableBehavior":"any","enableWhen":[
   {"question":"int","operator":"<","answerInteger":5},{"question":"choice","operator":"=","answerCoding":{"system":"http://s","code":"b"}}]},
 {"linkId":"when-exists","type":"string","enableWhen":[{"question":"text","operator":"exists","answerBoolean":false}]},
 {"linkId":"when-ne","type":"string","enableWhen":[{"question":"str","operator":"!=","answerString":"abc"}]},
 {"linkId":"when-le","type":"string","enableWhen":[{"question":"dec","operator":"<=","answerDecimal":2}]},
 {"linkId":"when-gt","type":"string","enableWhen":[{"question":"date","operator":">","answerDate":"2025-01-01"}]},
 {"linkId":"when-expr","type":"string","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-enableWhenExpression",
   "valueExpression":{"language":"text/fhirpath","expression":"%resource.item.where(linkId='int').answer.value > 50"}}]},
 {"linkId":"needed","type":"string","required":true,"enableWhen":[{"question":"bool","operator":"=","answerBoolean":false}]}]}`

// response answers form validly: every enableWhen above is met except
// when-all's, when-expr's and needed's.
const response = `{"resourceType":"QuestionnaireResponse","questionnaire":"http://example.org/q","status":"completed","subject":{"reference":"Patient/p1"},"item":[
 {"linkId":"bool","answer":[{"valueBoolean":true}]},
 {"linkId":"dec","answer":[{"valueDecimal":1.75}]},
 {"linkId":"int","answer":[{"valueInteger":3}]},
 {"linkId":"date","answer":[{"valueDate":"2026-02-03"}]},
 {"linkId":"dt","answer":[{"valueDateTime":"2021-05-06T10:00:00Z"}]},
 {"linkId":"time","answer":[{"valueTime":"10:30:00"}]},
 {"linkId":"str","answer":[{"valueString":"abd"}]},
 {"linkId":"url","answer":[{"valueUri":"http://example.org"}]},
 {"linkId":"choice","answer":[{"valueCoding":{"system":"http://s","code":"a"}}]},
 {"linkId":"open","answer":[{"valueString":"something else"}]},
 {"linkId":"vs","answer":[{"valueCoding":{"system":"http://s","code":"in"}}]},
 {"linkId":"att","answer":[{"valueAttachment":{"contentType":"image/png","data":"AAEC","size":3}}]},
 {"linkId":"ref","answer":[{"valueReference":{"reference":"Patient/p1"}}]},
 {"linkId":"qty","answer":[{"valueQuantity":{"value":150000,"system":"http://unitsofmeasure.org","code":"g"}}]},
 {"linkId":"many","answer":[{"valueString":"one"},{"valueString":"two"}]},
 {"linkId":"ro","answer":[{"valueString":"fixed"}]},
 {"linkId":"grp","item":[{"linkId":"g1","answer":[{"valueString":"yes"}]},{"linkId":"g2","answer":[{"valueInteger":1}]}]},
 {"linkId":"grp","item":[{"linkId":"g1","answer":[{"valueString":"no"}]}]},
 {"linkId":"parent","answer":[{"valueBoolean":true,"item":[{"linkId":"child","answer":[{"valueString":"nested"}]}]}]},
 {"linkId":"when-any","answer":[{"valueString":"x"}]},
 {"linkId":"when-exists","answer":[{"valueString":"x"}]},
 {"linkId":"when-ne","answer":[{"valueString":"x"}]},
 {"linkId":"when-le","answer":[{"valueString":"x"}]},
 {"linkId":"when-gt","answer":[{"valueString":"x"}]}]}`

// valueSet holds http://s|in, and nothing of http://s else.
type valueSet struct{}

func (valueSet) MemberOf(_ context.Context, url, system, code string) (bool, string, error) {
	if url != "http://example.org/vs" {
		return false, "the value set " + url + " is not available", nil
	}
	return system == "http://s" && code == "in", "", nil
}

func (valueSet) Displays(_ context.Context, system, code string) ([]string, bool, error) {
	if system == "http://s" && code == "in" {
		return []string{"Inside", "In"}, true, nil
	}
	return nil, false, nil
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// edit applies a jq-like change to the response: set the JSON at a path
// of keys and indexes to v, or delete it when v is nil.
func edit(t *testing.T, doc map[string]any, path []any, v any) {
	t.Helper()
	var cur any = doc
	for i, step := range path {
		last := i == len(path)-1
		switch s := step.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				if v == nil {
					delete(m, s)
				} else {
					m[s] = v
				}
				return
			}
			cur = m[s]
		case int:
			a := cur.([]any)
			if last {
				a[s] = v
				return
			}
			cur = a[s]
		}
	}
}

func errorsOf(issues []fhirschema.Issue) []fhirschema.Issue {
	var out []fhirschema.Issue
	for _, is := range issues {
		if is.Severity == "error" {
			out = append(out, is)
		}
	}
	return out
}

func check(t *testing.T, qr map[string]any) []fhirschema.Issue {
	t.Helper()
	issues, err := questionnaire.NewChecker().CheckResponse(context.Background(), qr, decode(t, form), questionnaire.Options{Terminology: valueSet{}})
	if err != nil {
		t.Fatal(err)
	}
	return issues
}

func TestAValidResponseHasNoError(t *testing.T) {
	if errs := errorsOf(check(t, decode(t, response))); len(errs) > 0 {
		t.Fatalf("errors: %+v", errs)
	}
}

func item(i int, rest ...any) []any { return append([]any{"item", i}, rest...) }

func answer(v string) []any {
	var a map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		panic(err)
	}
	return []any{a}
}

func TestEachRuleRefusesItsBreakAtTheElement(t *testing.T) {
	for _, tc := range []struct {
		name string
		path []any
		v    any
		at   string // the expression of the error, with the linkId in its text
		word string
	}{
		{"a boolean item answered with a string", item(0, "answer"), answer(`{"valueString":"true"}`), "QuestionnaireResponse.item[0].answer[0].valueString", "bool"},
		{"a decimal below its minValue", item(1, "answer"), answer(`{"valueDecimal":1.2}`), "QuestionnaireResponse.item[1].answer[0].valueDecimal", "minimum"},
		{"a decimal above its maxValue", item(1, "answer"), answer(`{"valueDecimal":10.01}`), "QuestionnaireResponse.item[1].answer[0].valueDecimal", "maximum"},
		{"a decimal with too many places", item(1, "answer"), answer(`{"valueDecimal":2.125}`), "QuestionnaireResponse.item[1].answer[0].valueDecimal", "decimal places"},
		{"an integer item answered with a decimal", item(2, "answer"), answer(`{"valueDecimal":3.5}`), "QuestionnaireResponse.item[2].answer[0].valueDecimal", "int"},
		{"an integer above its maxValue", item(2, "answer"), answer(`{"valueInteger":101}`), "QuestionnaireResponse.item[2].answer[0].valueInteger", "maximum"},
		{"a date after its maxValue", item(3, "answer"), answer(`{"valueDate":"2031-01-01"}`), "QuestionnaireResponse.item[3].answer[0].valueDate", "maximum"},
		{"a dateTime before its minValue", item(4, "answer"), answer(`{"valueDateTime":"2019-12-31"}`), "QuestionnaireResponse.item[4].answer[0].valueDateTime", "minimum"},
		{"a time item answered with a dateTime", item(5, "answer"), answer(`{"valueDateTime":"2020-01-01"}`), "QuestionnaireResponse.item[5].answer[0].valueDateTime", "time"},
		{"a string longer than maxLength", item(6, "answer"), answer(`{"valueString":"abcdefghijk"}`), "QuestionnaireResponse.item[6].answer[0].valueString", "at most 10"},
		{"a string shorter than minLength", item(6, "answer"), answer(`{"valueString":"a"}`), "QuestionnaireResponse.item[6].answer[0].valueString", "at least 2"},
		{"a string that breaks the regex", item(6, "answer"), answer(`{"valueString":"ABC"}`), "QuestionnaireResponse.item[6].answer[0].valueString", "pattern"},
		{"a url item answered with a string", item(7, "answer"), answer(`{"valueString":"http://x"}`), "QuestionnaireResponse.item[7].answer[0].valueString", "url"},
		{"a choice outside its options", item(8, "answer"), answer(`{"valueCoding":{"system":"http://s","code":"z"}}`), "QuestionnaireResponse.item[8].answer[0]", "answer options"},
		{"an open-choice coding outside its options", item(9, "answer"), answer(`{"valueCoding":{"system":"http://s","code":"z"}}`), "QuestionnaireResponse.item[9].answer[0]", "answer options"},
		{"a choice outside its value set", item(10, "answer"), answer(`{"valueCoding":{"system":"http://s","code":"out"}}`), "QuestionnaireResponse.item[10].answer[0]", "value set"},
		{"a coded answer with another display than its code system's", item(10, "answer"), answer(`{"valueCoding":{"system":"http://s","code":"in","display":"Outside"}}`), "QuestionnaireResponse.item[10].answer[0].valueCoding.display", "Inside"},
		{"an attachment of a type not allowed", item(11, "answer"), answer(`{"valueAttachment":{"contentType":"text/plain","data":"AAEC"}}`), "QuestionnaireResponse.item[11].answer[0].valueAttachment.contentType", "content type"},
		{"an attachment larger than maxSize", item(11, "answer"), answer(`{"valueAttachment":{"contentType":"image/png","data":"AAECAwQF"}}`), "QuestionnaireResponse.item[11].answer[0].valueAttachment", "bytes"},
		{"an attachment whose size is not its data's", item(11, "answer"), answer(`{"valueAttachment":{"contentType":"image/png","data":"AAEC","size":30}}`), "QuestionnaireResponse.item[11].answer[0].valueAttachment.size", "size"},
		{"a reference to a type the item does not allow", item(12, "answer"), answer(`{"valueReference":{"reference":"Practitioner/x"}}`), "QuestionnaireResponse.item[12].answer[0].valueReference.reference", "allows Patient"},
		{"a reference to no resource type", item(12, "answer"), answer(`{"valueReference":{"reference":"http://example.org/Chicken/1"}}`), "QuestionnaireResponse.item[12].answer[0].valueReference.reference", "Chicken"},
		{"a quantity in a unit not offered", item(13, "answer"), answer(`{"valueQuantity":{"value":1,"system":"http://unitsofmeasure.org","code":"lb"}}`), "QuestionnaireResponse.item[13].answer[0].valueQuantity", "allowed units"},
		{"a quantity above maxQuantity in another unit", item(13, "answer"), answer(`{"valueQuantity":{"value":250000,"system":"http://unitsofmeasure.org","code":"g"}}`), "QuestionnaireResponse.item[13].answer[0].valueQuantity", "maximum"},
		{"more answers than maxOccurs", item(14, "answer"), append(answer(`{"valueString":"a"}`), answer(`{"valueString":"b"}`)[0], answer(`{"valueString":"c"}`)[0]), "QuestionnaireResponse", "at most 2"},
		{"fewer answers than minOccurs", item(14, "answer"), []any{}, "QuestionnaireResponse", "at least 1"},
		{"a display item answered", item(15), map[string]any{"linkId": "info", "answer": answer(`{"valueString":"x"}`)}, "QuestionnaireResponse.item[15]", "display"},
		{"a read-only item changed is only a warning", item(15, "answer"), answer(`{"valueString":"changed"}`), "", ""},
		{"a required item in a repeated group missing", item(17, "item"), []any{}, "QuestionnaireResponse.item[17]", "g1"},
		{"a disabled item in a group answered", item(17, "item"), []any{map[string]any{"linkId": "g1", "answer": answer(`{"valueString":"no"}`)}, map[string]any{"linkId": "g2", "answer": answer(`{"valueInteger":1}`)}}, "QuestionnaireResponse.item[17].item[1]", "g2"},
		{"a group with answers", item(16, "answer"), answer(`{"valueString":"x"}`), "QuestionnaireResponse.item[16].answer[0]", "group"},
		{"an item nested under a question's item, not its answer", item(18), map[string]any{"linkId": "parent", "answer": answer(`{"valueBoolean":true}`), "item": []any{map[string]any{"linkId": "child"}}}, "QuestionnaireResponse.item[18].item[0]", "parent"},
		{"an unknown linkId", item(23), map[string]any{"linkId": "nope", "answer": answer(`{"valueString":"x"}`)}, "QuestionnaireResponse.item[24]", "nope"},
		{"an item out of its place", item(23), map[string]any{"linkId": "g1", "answer": answer(`{"valueString":"x"}`)}, "QuestionnaireResponse.item[24]", "g1"},
		{"items out of order", item(0), map[string]any{"linkId": "dec", "answer": answer(`{"valueDecimal":2}`)}, "QuestionnaireResponse.item[1]", "out of order"},
		{"a question answered twice without repeats", item(2, "answer"), append(answer(`{"valueInteger":1}`), answer(`{"valueInteger":2}`)[0]), "QuestionnaireResponse.item[2].answer[1]", "one answer"},
		{"a question that is not a group repeated", item(3), map[string]any{"linkId": "int", "answer": answer(`{"valueInteger":1}`)}, "QuestionnaireResponse.item[3]", "more than once"},
		{"enableBehavior any: neither condition holds", item(2, "answer"), answer(`{"valueInteger":7}`), "QuestionnaireResponse.item[19]", "when-any"},
		{"exists false: the question is answered", item(6), map[string]any{"linkId": "text", "answer": answer(`{"valueString":"t"}`)}, "QuestionnaireResponse.item[21]", "when-exists"},
		{"!=: the answer equals", item(6, "answer"), answer(`{"valueString":"abc"}`), "QuestionnaireResponse.item[21]", "when-ne"},
		{"<=: the answer is greater", item(1, "answer"), answer(`{"valueDecimal":2.01}`), "QuestionnaireResponse.item[22]", "when-le"},
		{">: the answer is earlier", item(3, "answer"), answer(`{"valueDate":"2024-01-01"}`), "QuestionnaireResponse.item[23]", "when-gt"},
		{"enableBehavior all: the item is answered when one fails", item(23), map[string]any{"linkId": "when-all", "answer": answer(`{"valueString":"x"}`)}, "QuestionnaireResponse.item[24]", "when-all"},
		{"enableWhenExpression false: the item is answered", item(23), map[string]any{"linkId": "when-expr", "answer": answer(`{"valueString":"x"}`)}, "QuestionnaireResponse.item[24]", "when-expr"},
		{"a required item enabled and missing", item(0, "answer"), answer(`{"valueBoolean":false}`), "QuestionnaireResponse", "needed"},
		{"a required item missing", item(0), map[string]any{"linkId": "bool"}, "QuestionnaireResponse", "bool"},
		{"a subject of a type the form is not for", []any{"subject"}, map[string]any{"reference": "Group/g"}, "QuestionnaireResponse.subject", "Group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qr := decode(t, response)
			if strings.HasPrefix(tc.name, "items out of order") {
				items := qr["item"].([]any)
				items[0], items[1] = items[1], items[0]
			} else if tc.name == "an unknown linkId" || tc.name == "an item out of its place" || strings.HasPrefix(tc.name, "enableBehavior all") || strings.HasPrefix(tc.name, "enableWhenExpression") {
				qr["item"] = append(qr["item"].([]any), tc.v)
			} else if tc.name == "a question that is not a group repeated" {
				items := qr["item"].([]any)
				qr["item"] = append(items[:3], append([]any{tc.v}, items[3:]...)...)
			} else if tc.name == "exists false: the question is answered" {
				items := qr["item"].([]any)
				qr["item"] = append(items[:7], append([]any{tc.v}, items[7:]...)...)
			} else {
				edit(t, qr, tc.path, tc.v)
			}
			issues := check(t, qr)
			errs := errorsOf(issues)
			if tc.at == "" {
				if len(errs) > 0 || len(issues) == 0 {
					t.Fatalf("want a warning and no error, got %+v", issues)
				}
				return
			}
			for _, e := range errs {
				if e.Expression == tc.at && strings.Contains(e.Diagnostics, tc.word) {
					return
				}
			}
			t.Fatalf("no error at %s naming %q; got %+v", tc.at, tc.word, errs)
		})
	}
}

func TestAnInProgressResponseMayBeIncomplete(t *testing.T) {
	qr := decode(t, response)
	qr["status"] = "in-progress"
	qr["item"] = qr["item"].([]any)[1:] // bool is required
	edit(t, qr, []any{"item", 13, "answer"}, []any{})
	if errs := errorsOf(check(t, qr)); len(errs) > 0 {
		t.Fatalf("errors: %+v", errs)
	}
	qr["status"] = "completed"
	if errs := errorsOf(check(t, qr)); len(errs) == 0 {
		t.Fatal("a completed response without its required answers has no error")
	}
}

func TestAnUnknownValueSetIsAWarning(t *testing.T) {
	q := decode(t, form)
	edit(t, q, []any{"item", 11, "answerValueSet"}, "http://example.org/unknown")
	issues, err := questionnaire.NewChecker().CheckResponse(context.Background(), decode(t, response), q, questionnaire.Options{Terminology: valueSet{}})
	if err != nil {
		t.Fatal(err)
	}
	if errs := errorsOf(issues); len(errs) > 0 {
		t.Fatalf("errors: %+v", errs)
	}
	for _, is := range issues {
		if is.Severity == "warning" && is.Expression == "QuestionnaireResponse.item[10].answer[0]" {
			return
		}
	}
	t.Fatalf("no warning at the answer: %+v", issues)
}

func TestFormRules(t *testing.T) {
	c := questionnaire.NewChecker()
	if issues := c.CheckForm(decode(t, form)); len(issues) > 0 {
		t.Fatalf("the test form is refused: %+v", issues)
	}
	for _, tc := range []struct {
		name, form, at string
	}{
		{"a linkId used twice", `{"item":[{"linkId":"a","type":"string"},{"linkId":"g","type":"group","item":[{"linkId":"a","type":"string"}]}]}`, "Questionnaire.item[1].item[0].linkId"},
		{"an enableWhen on a question the form lacks", `{"item":[{"linkId":"a","type":"string","enableWhen":[{"question":"b","operator":"exists","answerBoolean":true}]}]}`, "Questionnaire.item[0].enableWhen[0].question"},
		{"an enableWhen on the item itself", `{"item":[{"linkId":"a","type":"string","enableWhen":[{"question":"a","operator":"exists","answerBoolean":true}]}]}`, "Questionnaire.item[0].enableWhen[0].question"},
		{"a calculatedExpression that does not parse", `{"item":[{"linkId":"a","type":"decimal","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression","valueExpression":{"language":"text/fhirpath","expression":"1 +"}}]}]}`, "Questionnaire.item[0].extension[0].valueExpression.expression"},
		{"an x-fhir-query whose embedded FHIRPath does not parse", `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"name":"v","language":"application/x-fhir-query","expression":"Observation?patient={{%patient.id.}}"}}],"item":[{"linkId":"a","type":"string"}]}`, "Questionnaire.extension[0].valueExpression.expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			issues := c.CheckForm(decode(t, tc.form))
			for _, is := range issues {
				if is.Severity == "error" && is.Expression == tc.at {
					return
				}
			}
			t.Fatalf("no error at %s: %+v", tc.at, issues)
		})
	}
}

func TestARequiredGroupNeedsAnAnswerBelowIt(t *testing.T) {
	q := decode(t, `{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"g","type":"group","required":true,"item":[{"linkId":"a","type":"string"}]}]}`)
	for _, tc := range []struct {
		name, response string
		refused        bool
	}{
		{"an answer inside", `{"resourceType":"QuestionnaireResponse","status":"completed","item":[{"linkId":"g","item":[{"linkId":"a","answer":[{"valueString":"x"}]}]}]}`, false},
		{"only unanswered items inside", `{"resourceType":"QuestionnaireResponse","status":"completed","item":[{"linkId":"g","item":[{"linkId":"a"}]}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			issues, err := questionnaire.NewChecker().CheckResponse(context.Background(), decode(t, tc.response), q, questionnaire.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if refused := len(errorsOf(issues)) > 0; refused != tc.refused {
				t.Fatalf("refused %v, want %v: %+v", refused, tc.refused, issues)
			}
		})
	}
}
