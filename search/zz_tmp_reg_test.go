package search_test
import ("testing";"fhirstore/search";"fhirstore/fhirschema")
func TestTmpReg(t *testing.T){
 r,err:=search.NewRegistry(fhirschema.ResourceTypes()); if err!=nil{t.Fatal(err)}
 for _,q:=range [][2]string{{"Encounter","practitioner"},{"Encounter","participant"},{"Encounter","date"},{"Encounter","class"},{"Encounter","location"},{"Encounter","service-provider"},{"Observation","patient"},{"Observation","date"},{"Observation","value-quantity"},{"Observation","code"},{"Condition","onset-date"},{"Condition","abatement-date"},{"Condition","clinical-status"},{"Immunization","vaccine-code"},{"Immunization","date"},{"MedicationRequest","medication"},{"MedicationRequest","code"},{"MedicationRequest","authoredon"},{"MedicationRequest","requester"},{"RiskAssessment","probability"},{"Questionnaire","url"},{"PlanDefinition","url"},{"Patient","name"},{"Patient","address-city"},{"Practitioner","family"},{"Organization","name"}}{
  p,ok:=r.Lookup(q[0],q[1]); if !ok {t.Logf("%v MISSING",q);continue}
  t.Logf("%v %s %s",q,p.Type,p.Expression)
 }
 for _,s:=range r.Skipped(){ if s.Reason!="composite parameter" && s.Reason!="special parameter" {t.Logf("skip %v",s)}}
}
