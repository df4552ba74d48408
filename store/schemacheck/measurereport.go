package schemacheck

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	"fhirstore/store"
)

// checkMeasureReport checks a MeasureReport against what R4 says of its
// parts and against its Measure, when the tenant holds it: subject lists
// only in a report of type subject-list; each group's populations among
// the populations its Measure group defines; a warning of a measure score
// for a cohort measure, which counts and does not score.
func checkMeasureReport(ctx context.Context, in store.Validation, _ profile.Definitions) ([]fhirschema.Issue, error) {
	if in.Type != "MeasureReport" {
		return nil, nil
	}
	r, err := decodeResource(in)
	if err != nil {
		return nil, nil // the base validation has said what is wrong
	}
	var issues []fhirschema.Issue
	listed := r["type"] == "subject-list"
	groups := objectList(r["group"])
	for i, g := range groups {
		for j, p := range objectList(g["population"]) {
			if p["subjectResults"] != nil && !listed {
				issues = append(issues, fhirschema.Issue{Severity: "error", Code: "business-rule", Expression: fmt.Sprintf("MeasureReport.group[%d].population[%d]", i, j),
					Diagnostics: "subjectResults lists the subjects of a population: only a report of type subject-list has them"})
			}
		}
	}
	measure, err := findMeasure(ctx, in, r)
	if err != nil || measure == nil {
		return issues, err
	}
	cohort := codingIs(measure["scoring"], "cohort")
	defined := objectList(measure["group"])
	for i, g := range groups {
		at := "MeasureReport.group[" + strconv.Itoa(i) + "]"
		if cohort && g["measureScore"] != nil {
			// A warning: R4 puts it in no SHALL, and its own example
			// (MeasureReport-hiv-indicators) scores a cohort.
			issues = append(issues, fhirschema.Issue{Severity: "warning", Code: "business-rule", Expression: at + ".measureScore",
				Diagnostics: "the Measure's scoring is cohort: a cohort is counted, not scored, so its report should have no measureScore"})
		}
		mg := measureGroup(defined, g, i)
		if mg == nil {
			continue
		}
		for j, p := range objectList(g["population"]) {
			if !populationDefined(mg, p) {
				issues = append(issues, fhirschema.Issue{Severity: "error", Code: "business-rule", Expression: fmt.Sprintf("%s.population[%d]", at, j),
					Diagnostics: "the code of this population is not among the populations the Measure's group defines"})
			}
		}
	}
	return issues, nil
}

// findMeasure reads the Measure a report names by canonical; nil when the
// tenant has none.
func findMeasure(ctx context.Context, in store.Validation, r map[string]any) (map[string]any, error) {
	canonical, _ := r["measure"].(string)
	if canonical == "" || in.Find == nil {
		return nil, nil
	}
	u, version, _ := strings.Cut(canonical, "|")
	cond := "url=" + url.QueryEscape(u)
	if version != "" {
		cond += "&version=" + url.QueryEscape(version)
	}
	found, err := in.Find(ctx, "Measure", cond)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return decodeJSON(found[0])
}

// measureGroup is the Measure group a report's group i reports on: the one
// with its id, else the one at its position.
func measureGroup(defined []map[string]any, g map[string]any, i int) map[string]any {
	if id, _ := g["id"].(string); id != "" {
		for _, mg := range defined {
			if mg["id"] == id {
				return mg
			}
		}
	}
	if i < len(defined) {
		return defined[i]
	}
	return nil
}

// populationDefined reports whether a report population's code is one of
// the Measure group's populations' codes.
func populationDefined(mg, p map[string]any) bool {
	code, _ := p["code"].(map[string]any)
	for _, c := range objectList(code["coding"]) {
		for _, mp := range objectList(mg["population"]) {
			mc, _ := mp["code"].(map[string]any)
			for _, d := range objectList(mc["coding"]) {
				if d["system"] == c["system"] && d["code"] == c["code"] {
					return true
				}
			}
		}
	}
	return code == nil || code["coding"] == nil
}

// codingIs reports whether a CodeableConcept has a coding with code.
func codingIs(v any, code string) bool {
	cc, _ := v.(map[string]any)
	for _, c := range objectList(cc["coding"]) {
		if c["code"] == code {
			return true
		}
	}
	return false
}
