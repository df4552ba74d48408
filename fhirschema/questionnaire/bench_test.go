package questionnaire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/questionnaire"
)

// hundredAnswers builds a form of 100 questions (ten groups of ten: decimal
// with bounds, integer, string with maxLength and regex, choice with
// options, boolean, date, and enableWhen on the booleans) and a completed
// response answering each.
func hundredAnswers() (form, response string) {
	var q, r []string
	for g := 0; g < 10; g++ {
		var qi, ri []string
		for i := 0; i < 10; i++ {
			id := fmt.Sprintf("g%d-q%d", g, i)
			switch i % 5 {
			case 0:
				qi = append(qi, `{"linkId":"`+id+`","type":"decimal","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/minValue","valueDecimal":0},{"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueDecimal":500}]}`)
				ri = append(ri, `{"linkId":"`+id+`","answer":[{"valueDecimal":72.5}]}`)
			case 1:
				qi = append(qi, `{"linkId":"`+id+`","type":"string","maxLength":40,"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/regex","valueString":"[A-Za-z ]+"}]}`)
				ri = append(ri, `{"linkId":"`+id+`","answer":[{"valueString":"steady gait"}]}`)
			case 2:
				qi = append(qi, `{"linkId":"`+id+`","type":"choice","required":true,"answerOption":[{"valueCoding":{"system":"http://loinc.org","code":"LA6568-5"}},{"valueCoding":{"system":"http://loinc.org","code":"LA6569-3"}},{"valueCoding":{"system":"http://loinc.org","code":"LA6570-1"}}]}`)
				ri = append(ri, `{"linkId":"`+id+`","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6570-1"}}]}`)
			case 3:
				qi = append(qi, `{"linkId":"`+id+`","type":"boolean","required":true}`)
				ri = append(ri, `{"linkId":"`+id+`","answer":[{"valueBoolean":true}]}`)
			case 4:
				prev := fmt.Sprintf("g%d-q%d", g, i-1)
				qi = append(qi, `{"linkId":"`+id+`","type":"integer","enableWhen":[{"question":"`+prev+`","operator":"=","answerBoolean":true}]}`)
				ri = append(ri, `{"linkId":"`+id+`","answer":[{"valueInteger":3}]}`)
			}
		}
		gid := fmt.Sprintf("g%d", g)
		q = append(q, `{"linkId":"`+gid+`","type":"group","item":[`+strings.Join(qi, ",")+`]}`)
		r = append(r, `{"linkId":"`+gid+`","item":[`+strings.Join(ri, ",")+`]}`)
	}
	form = `{"resourceType":"Questionnaire","url":"http://example.org/hundred","status":"active","item":[` + strings.Join(q, ",") + `]}`
	response = `{"resourceType":"QuestionnaireResponse","questionnaire":"http://example.org/hundred","status":"completed","subject":{"reference":"Patient/p"},"authored":"2026-12-01T10:00:00Z","item":[` + strings.Join(r, ",") + `]}`
	return form, response
}

// BenchmarkResponseOf100Answers compares the structural validation of a
// response of 100 answers (schema and invariants: what a response whose
// form is unknown gets) with the check of the same response against its
// form, and with both, which is what a write of a response pays.
func BenchmarkResponseOf100Answers(b *testing.B) {
	formJSON, respJSON := hundredAnswers()
	var form, resp map[string]any
	for s, into := range map[string]*map[string]any{formJSON: &form, respJSON: &resp} {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(into); err != nil {
			b.Fatal(err)
		}
	}
	v, err := fhirschema.NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	c := questionnaire.NewChecker()
	ctx := context.Background()
	structure := func() {
		if r := v.ValidateDecoded("QuestionnaireResponse", resp, fhirschema.Options{}); !r.Valid() {
			b.Fatalf("invalid: %+v", r.Issues)
		}
	}
	against := func() {
		issues, err := c.CheckResponse(ctx, resp, form, questionnaire.Options{})
		if err != nil || len(issues) > 0 {
			b.Fatalf("issues: %v %+v", err, issues)
		}
	}
	b.Run("structure", func(b *testing.B) {
		for b.Loop() {
			structure()
		}
	})
	b.Run("against-form", func(b *testing.B) {
		for b.Loop() {
			against()
		}
	})
	b.Run("structure+against-form", func(b *testing.B) {
		for b.Loop() {
			structure()
			against()
		}
	})
}
