package restadapter_test

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// restDocument reads the REST document, which must exist.
func restDocument(e *env, id string) map[string]any {
	e.t.Helper()
	r := e.api(http.MethodGet, "/documents/"+id, "")
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET /documents/%s: %d %s", id, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func TestDocumentReadProjectsTheDocumentReference(t *testing.T) {
	e := newEnv(t)
	text := base64.StdEncoding.EncodeToString([]byte("Patient discharged home.\n"))
	id := e.create("DocumentReference", `{"resourceType":"DocumentReference",
		"meta":{"source":"https://intake.example/fax"},
		"masterIdentifier":{"value":"DOC-77"},
		"status":"current","docStatus":"final",
		"type":{"coding":[{"system":"http://loinc.org","code":"18842-5","display":"Discharge summary"}],"text":"Discharge Summary"},
		"category":[{"text":"clinical"},{"coding":[{"system":"http://example.org/tags","code":"intake","display":"Intake"}]}],
		"subject":{"reference":"Patient/p1"},
		"date":"2024-03-01T10:00:00Z",
		"author":[{"reference":"Practitioner/pr1","display":"Dr. Jane Doe"}],
		"custodian":{"reference":"Organization/agency1"},
		"description":"Discharge summary, March",
		"content":[{"attachment":{"contentType":"text/plain; charset=utf-8","language":"en","data":"`+text+`","url":"https://files.example/d.txt","size":25,"title":"discharge.txt","creation":"2024-02-28T09:00:00Z"},
			"format":{"code":"urn:ihe:iti:xds:2017:mimeTypeSufficient"}}],
		"context":{"encounter":[{"reference":"Encounter/enc1"},{"reference":"EpisodeOfCare/ep1"}],"period":{"start":"2024-02-01T08:00:00Z"}}}`)
	got := restDocument(e, id)
	meta := fhirRead(e, "DocumentReference", id)["meta"].(map[string]any)
	checkFields(t, got, map[string]any{
		"documentId": id, "episodeId": "ep1", "patientId": "p1", "agencyId": "agency1",
		"documentType": "Discharge Summary", "title": "Discharge summary, March", "fileName": "discharge.txt",
		"mimeType": "text/plain; charset=utf-8", "fileSize": 25, "status": "final", "description": "Discharge summary, March",
		"source": "https://intake.example/fax", "textContent": "Patient discharged home.\n",
		"uploadedAt": "2024-03-01T10:00:00Z", "documentDate": "2024-02-01T08:00:00Z",
		"tags":       []any{"clinical", "intake"},
		"uploadedBy": map[string]any{"resourceType": "Practitioner", "id": "pr1", "display": "Dr. Jane Doe"},
		"metadata": map[string]any{"versionId": "1", "lastUpdated": meta["lastUpdated"], "fhirStatus": "current", "docStatus": "final",
			"masterIdentifier": "DOC-77", "url": "https://files.example/d.txt", "language": "en", "format": "urn:ihe:iti:xds:2017:mimeTypeSufficient"},
		"priority": nil, "pageCount": nil, "expirationDate": nil, "extractedData": nil,
	})
}

func TestDocumentReadFallsBackWhenElementsAreMissing(t *testing.T) {
	e := newEnv(t)
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4"))
	latin := base64.StdEncoding.EncodeToString([]byte{'c', 'a', 'f', 0xe9})
	const att = `"content":[{"attachment":{"contentType":"application/pdf","title":"scan.pdf"}}]`
	tests := []struct {
		name string
		body string
		want map[string]any
	}{
		{"the title is the attachment's without a description", `"status":"current",` + att,
			map[string]any{"title": "scan.pdf", "fileName": "scan.pdf", "description": nil}},
		{"the type is its coding's display without text", `"status":"current","type":{"coding":[{"code":"X1","display":"Referral"}]},` + att,
			map[string]any{"documentType": "Referral"}},
		{"the type is its coding's code without text or display", `"status":"current","type":{"coding":[{"code":"X1"}]},` + att,
			map[string]any{"documentType": "X1"}},
		{"the status is status without docStatus", `"status":"superseded",` + att,
			map[string]any{"status": "superseded", "metadata.docStatus": nil}},
		{"the episode may be in context.related", `"status":"current","context":{"related":[{"reference":"Patient/x"},{"reference":"EpisodeOfCare/ep2"}]},` + att,
			map[string]any{"episodeId": "ep2"}},
		{"an encounter alone is no episode", `"status":"current","context":{"encounter":[{"reference":"Encounter/enc1"}]},` + att,
			map[string]any{"episodeId": nil}},
		{"the document date is the attachment's creation without a context period",
			`"status":"current","content":[{"attachment":{"contentType":"application/pdf","creation":"2023-12-31T23:00:00Z"}}]`,
			map[string]any{"documentDate": "2023-12-31T23:00:00Z"}},
		{"a PDF has no text content",
			`"status":"current","content":[{"attachment":{"contentType":"application/pdf","data":"` + pdf + `","size":8}}]`,
			map[string]any{"textContent": nil, "fileSize": 8, "mimeType": "application/pdf"}},
		{"text in another charset is not decoded",
			`"status":"current","content":[{"attachment":{"contentType":"text/plain; charset=iso-8859-1","data":"` + latin + `"}}]`,
			map[string]any{"textContent": nil}},
		{"a second, plain-text content is decoded",
			`"status":"current","content":[{"attachment":{"contentType":"application/pdf","title":"a.pdf"}},{"attachment":{"contentType":"text/plain","data":"` + base64.StdEncoding.EncodeToString([]byte("note")) + `"}}]`,
			map[string]any{"textContent": "note", "fileName": "a.pdf", "mimeType": "application/pdf"}},
		{"no categories are no tags and no author is no uploader", `"status":"current",` + att,
			map[string]any{"tags": []any{}, "uploadedBy": nil, "fileSize": nil, "patientId": nil, "agencyId": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.create("DocumentReference", `{"resourceType":"DocumentReference",`+tt.body+`}`)
			got := restDocument(e, id)
			checkFields(t, got, tt.want)
			if _, ok := tt.want["uploadedAt"]; !ok {
				// Without a date the upload is when the resource was stored.
				meta := fhirRead(e, "DocumentReference", id)["meta"].(map[string]any)
				checkFields(t, got, map[string]any{"uploadedAt": meta["lastUpdated"]})
			}
		})
	}
}

func TestDocumentReadOfAnUnknownOrDeletedDocumentIs404(t *testing.T) {
	e := newEnv(t)
	deleted := e.create("DocumentReference", `{"resourceType":"DocumentReference","status":"current","content":[{"attachment":{"title":"x"}}]}`)
	if r := e.fhir(http.MethodDelete, "/DocumentReference/"+deleted, ""); r.Status >= 300 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	for _, id := range []string{"nope", deleted, patient} {
		wantError(t, e.api(http.MethodGet, "/documents/"+id, ""), http.StatusNotFound, "")
	}
}
