package schemacheck

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	"fhirstore/store"
)

// vitalSign is one of the vital signs R4 defines a profile for, with the
// codes that name it.
type vitalSign struct {
	profile string
	name    string
	loinc   []string
	snomed  []string
}

// vitalSigns are the vital signs of R4's table (observation-vitalsigns):
// an Observation of one of them SHALL conform to its profile. A sign is
// known by the LOINC code its profile fixes (listed first) and the codes
// of the same observable (LOINC's methods and sites, SNOMED CT's
// observable entities); the first sign found decides.
var vitalSigns = []vitalSign{
	{"vitalspanel", "the vital signs panel", []string{"85353-1"}, []string{"46680005"}},
	{"resprate", "respiratory rate", []string{"9279-1", "76170-0", "76171-8", "76172-6", "19840-8", "33438-3"}, []string{"86290005", "271625008"}},
	{"heartrate", "heart rate", []string{"8867-4", "8889-8", "8890-6", "8891-4", "8892-2", "8893-0", "40443-4", "55425-3", "68999-2", "69000-8"}, []string{"364075005", "78564009"}},
	{"oxygensat", "oxygen saturation", []string{"2708-6", "59408-5", "2709-4", "2710-2", "2711-0", "2713-6", "19224-5", "20564-1", "51733-4", "59417-6"}, []string{"103228002", "431314004"}},
	{"bodytemp", "body temperature", []string{"8310-5", "8309-7", "8328-7", "8329-5", "8330-3", "8331-1", "8332-9", "8333-7", "8334-5", "60834-9", "60835-6", "60836-4", "60838-0", "60955-2", "61009-7", "75539-7", "75987-8", "76010-8", "76011-6", "76278-1"}, []string{"386725007", "276885007", "300076005", "415882003", "415974002", "415929009", "415945006"}},
	{"bodyheight", "body height", []string{"8302-2", "3137-7", "3138-5", "8306-3", "8308-9"}, []string{"50373000", "1153637007"}},
	{"headcircum", "head circumference", []string{"9843-4", "8287-5"}, []string{"363812007", "169876006"}},
	{"bodyweight", "body weight", []string{"29463-7", "3141-9", "3142-7", "75292-3", "79348-9", "8350-1", "8351-9"}, []string{"27113001", "363808001", "425024002", "424927000"}},
	{"bmi", "body mass index", []string{"39156-5", "59574-4", "89270-3"}, []string{"60621009"}},
	{"bp", "blood pressure", []string{"85354-9", "35094-2", "8459-0", "76534-7", "55284-4"}, []string{"75367002", "251076008", "163033001", "163035008", "386534000", "386536003"}},
}

// vitalSignCodes maps system|code to the vital sign it names.
var vitalSignCodes = func() map[string]*vitalSign {
	m := map[string]*vitalSign{}
	for i := range vitalSigns {
		s := &vitalSigns[i]
		for _, c := range s.loinc {
			m["http://loinc.org|"+c] = s
		}
		for _, c := range s.snomed {
			m["http://snomed.info/sct|"+c] = s
		}
	}
	return m
}()

// checkVitalSigns checks that an Observation of a vital sign carries
// the LOINC code that R4 requires of it: the core profile of each sign
// (bodytemp, heartrate, ...) fixes one LOINC code, which an Observation
// of the sign must have among its codings whatever other codes it has.
// Observations contained or in a Bundle's entries are checked too. (The
// core profiles themselves are not among the definitions the server is
// built with; their other rules are those of the base resource.)
func checkVitalSigns(_ context.Context, in store.Validation, _ profile.Definitions) ([]fhirschema.Issue, error) {
	if in.Type != "Observation" && in.Type != "Bundle" && !mayContain(in) {
		return nil, nil
	}
	r, err := decodeResource(in)
	if err != nil {
		return nil, nil // the base validation has said what is wrong
	}
	return vitalSignIssues(r, in.Type, nil, 0), nil
}

// mayContain tells a resource that may have contained resources, without
// decoding it.
func mayContain(in store.Validation) bool {
	if in.Resource != nil {
		_, ok := in.Resource["contained"]
		return ok
	}
	return bytes.Contains(in.Body, []byte(`"contained"`))
}

// vitalSignIssues checks the Observations of r, at the FHIRPath at.
func vitalSignIssues(r map[string]any, at string, issues []fhirschema.Issue, depth int) []fhirschema.Issue {
	if depth > 16 {
		return issues
	}
	for i, c := range objectList(r["contained"]) {
		issues = vitalSignIssues(c, at+".contained["+strconv.Itoa(i)+"]", issues, depth+1)
	}
	if r["resourceType"] == "Bundle" {
		for i, e := range objectList(r["entry"]) {
			if res, ok := e["resource"].(map[string]any); ok {
				issues = vitalSignIssues(res, at+".entry["+strconv.Itoa(i)+"].resource", issues, depth+1)
			}
		}
	}
	if r["resourceType"] != "Observation" {
		return issues
	}
	code, _ := r["code"].(map[string]any)
	var sign *vitalSign
	has := map[string]bool{}
	for _, m := range objectList(code["coding"]) {
		sys, _ := m["system"].(string)
		cd, _ := m["code"].(string)
		has[sys+"|"+cd] = true
		if s, ok := vitalSignCodes[sys+"|"+cd]; ok && sign == nil {
			sign = s
		}
	}
	if sign == nil || has["http://loinc.org|"+sign.loinc[0]] {
		return issues
	}
	return append(issues, fhirschema.Issue{Severity: "error", Code: "value", Expression: at + ".code",
		Diagnostics: fmt.Sprintf("an Observation of %s must have the LOINC code %s among its codings, as the core profile %s%s requires (other codes may be given beside it)", sign.name, sign.loinc[0], baseProfilePrefix, sign.profile)})
}
