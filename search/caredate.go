package search

// careDates names, for the Patient compartment types whose clinical date
// is not their "date" parameter, the date parameter that says when the
// care happened (Patient/$everything's start and end); types with neither
// an entry nor a "date" parameter have no care date.
var careDates = map[string]string{
	"Account": "period", "Basic": "created", "ChargeItem": "occurrence", "Claim": "created",
	"ClaimResponse": "created", "Communication": "sent", "CommunicationRequest": "occurrence",
	"Condition": "onset-date", "CoverageEligibilityRequest": "created", "CoverageEligibilityResponse": "created",
	"DetectedIssue": "identified", "DeviceRequest": "event-date", "DocumentManifest": "created",
	"ExplanationOfBenefit": "created", "Goal": "start-date", "ImagingStudy": "started", "Media": "created",
	"MedicationAdministration": "effective-time", "MedicationDispense": "whenhandedover",
	"MedicationRequest": "authoredon", "MedicationStatement": "effective", "NutritionOrder": "datetime",
	"Provenance": "when", "QuestionnaireResponse": "authored", "RequestGroup": "authored",
	"ServiceRequest": "occurrence", "Specimen": "collected", "VisionPrescription": "datewritten",
}

// CareDateParam is the date parameter of resourceType that dates the care
// a resource records, "" when the type has none (Patient, Coverage, Group…).
func (r *Registry) CareDateParam(resourceType string) string {
	code, ok := careDates[resourceType]
	if !ok {
		code = "date"
	}
	if p, found := r.Lookup(resourceType, code); found && p.Type == "date" {
		return code
	}
	return ""
}
