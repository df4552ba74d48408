package sdc_test

import (
	"context"
	"strings"
	"testing"

	"fhirstore/fhirschema/sdc"
)

const subQ = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-subQuestionnaire"

func TestAssembleInlinesModules(t *testing.T) {
	module := decode(t, `{"resourceType":"Questionnaire","id":"pain","url":"http://example.org/q/pain","version":"1","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"name":"score","language":"text/fhirpath","expression":"%resource.item.answer.value"}},
	   {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-child"}],
	 "item":[{"linkId":"pain","type":"integer","text":"Pain score"},
	  {"linkId":"where","type":"string","enableWhen":[{"question":"pain","operator":">","answerInteger":0}],"item":[{"linkId":"nested","type":"display","extension":[{"url":"`+subQ+`","valueCanonical":"http://example.org/q/tiny"}]}]}]}`)
	tiny := decode(t, `{"resourceType":"Questionnaire","id":"tiny","url":"http://example.org/q/tiny","status":"active","item":[{"linkId":"t","type":"boolean"}]}`)
	root := decode(t, `{"resourceType":"Questionnaire","id":"root","url":"http://example.org/q/root","version":"2","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-root"}],
	 "item":[{"linkId":"first","type":"string"},
	  {"linkId":"m1","type":"display","extension":[{"url":"`+subQ+`","valueCanonical":"http://example.org/q/pain|1"},{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-linkIdPrefix","valueString":"a."}]},
	  {"linkId":"g","type":"group","item":[{"linkId":"m2","type":"display","extension":[{"url":"`+subQ+`","valueCanonical":"http://example.org/q/pain"},{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-linkIdPrefix","valueString":"b."}]}]}]}`)
	rec := newRecords(module, tiny, root)
	out, issues, err := sdc.Assemble(context.Background(), rec, sdc.AssembleRequest{Questionnaire: root})
	if err != nil || out == nil {
		t.Fatalf("assemble: %v\n%s", err, issuesText(issues))
	}
	got := jsonText(out)
	if strings.Contains(got, subQ) || strings.Contains(got, "assemble-expectation") {
		t.Errorf("sub-questionnaire or expectation left: %s", got)
	}
	wantItems := `[{"linkId":"first","type":"string"},` +
		`{"linkId":"a.pain","text":"Pain score","type":"integer"},{"enableWhen":[{"answerInteger":0,"operator":"\u003e","question":"a.pain"}],"item":[{"linkId":"a.t","type":"boolean"}],"linkId":"a.where","type":"string"},` +
		`{"item":[{"linkId":"b.pain","text":"Pain score","type":"integer"},{"enableWhen":[{"answerInteger":0,"operator":"\u003e","question":"b.pain"}],"item":[{"linkId":"b.t","type":"boolean"}],"linkId":"b.where","type":"string"}],"linkId":"g","type":"group"}]`
	if items := jsonText(out["item"]); items != wantItems {
		t.Errorf("items\n got %s\nwant %s", items, wantItems)
	}
	wantExt := `[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"expression":"%resource.item.answer.value","language":"text/fhirpath","name":"score"}},` +
		`{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assembledFrom","valueCanonical":"http://example.org/q/root|2"}]`
	if ext := jsonText(out["extension"]); ext != wantExt {
		t.Errorf("extensions\n got %s\nwant %s", ext, wantExt)
	}
	if strings.Contains(jsonText(root), "a.pain") || strings.Contains(jsonText(module), "a.pain") {
		t.Error("the stored forms were changed")
	}
}

func TestAssembleRefusesWhatItCannotResolve(t *testing.T) {
	for _, row := range []struct{ name, items, wantAt string }{
		{"an unknown module", `[{"linkId":"x","type":"string"},{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/none"}]}]`, "Questionnaire.item[1]"},
		{"a module including itself", `[{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/self"}]}]`, "Questionnaire.item[0]"},
		{"a root form as a module", `[{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/root-only"}]}]`, "Questionnaire.item[0]"},
		{"a module on a question", `[{"linkId":"m","type":"string","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/none"}]}]`, "Questionnaire.item[0]"},
	} {
		t.Run(row.name, func(t *testing.T) {
			root := decode(t, `{"resourceType":"Questionnaire","url":"http://example.org/q/self","status":"active","item":`+row.items+`}`)
			rootOnly := decode(t, `{"resourceType":"Questionnaire","id":"root-only","url":"http://example.org/q/root-only","status":"active",
			 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-root"}],"item":[{"linkId":"r","type":"string"}]}`)
			out, issues, err := sdc.Assemble(context.Background(), newRecords(rootOnly), sdc.AssembleRequest{Questionnaire: root})
			if err != nil || out != nil || !sdc.Failed(issues) || issues[0].Expression != row.wantAt {
				t.Fatalf("out %v, err %v, issues:\n%s", out != nil, err, issuesText(issues))
			}
		})
	}
}

func TestAssembleIsBoundedWhenModulesMultiply(t *testing.T) {
	// Each level uses the next twice: 2^9 copies of the last one.
	var forms []map[string]any
	for i := range 10 {
		items := `[{"linkId":"q","type":"string"}]`
		if i < 9 {
			next := `{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/level` + string(rune('1'+i)) + `"}]}`
			items = "[" + next + "," + next + "]"
		}
		forms = append(forms, decode(t, `{"resourceType":"Questionnaire","id":"level`+string(rune('0'+i))+`","url":"http://example.org/q/level`+string(rune('0'+i))+`","status":"active","item":`+items+`}`))
	}
	out, issues, err := sdc.Assemble(context.Background(), newRecords(forms...), sdc.AssembleRequest{Questionnaire: forms[0], MaxModules: 100})
	if err != nil || out != nil || !strings.Contains(issuesText(issues), "more than 100 sub-questionnaires") {
		t.Fatalf("out %v, err %v, issues:\n%.500s", out != nil, err, issuesText(issues))
	}
}
