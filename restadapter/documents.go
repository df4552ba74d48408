package restadapter

import (
	"encoding/base64"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"fhirstore/store"
)

// documentRecord is the REST Document (service contract 2.12): a projection
// of a FHIR DocumentReference and its first attachment. A field without a
// FHIR value is omitted; priority, pageCount, expirationDate and
// extractedData have no FHIR source and are never set.
type documentRecord struct {
	DocumentID   string          `json:"documentId"`
	EpisodeID    string          `json:"episodeId,omitempty"`
	PatientID    string          `json:"patientId,omitempty"`
	AgencyID     string          `json:"agencyId,omitempty"`
	DocumentType string          `json:"documentType,omitempty"`
	Title        string          `json:"title,omitempty"`
	FileName     string          `json:"fileName,omitempty"`
	MimeType     string          `json:"mimeType,omitempty"`
	FileSize     *int64          `json:"fileSize,omitempty"`
	Status       string          `json:"status,omitempty"`
	Description  string          `json:"description,omitempty"`
	Source       string          `json:"source,omitempty"`
	TextContent  string          `json:"textContent,omitempty"`
	UploadedAt   string          `json:"uploadedAt,omitempty"`
	DocumentDate string          `json:"documentDate,omitempty"`
	Tags         []string        `json:"tags"`
	UploadedBy   *documentAuthor `json:"uploadedBy,omitempty"`
	Metadata     map[string]any  `json:"metadata"`
}

// documentAuthor is the first author of a DocumentReference.
type documentAuthor struct {
	ResourceType string `json:"resourceType,omitempty"`
	ID           string `json:"id,omitempty"`
	Display      string `json:"display,omitempty"`
}

// getDocument serves R5: the REST projection of a FHIR DocumentReference.
func (h *Handler) getDocument(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("documentId")
	res, d, err := h.readNode(r.Context(), h.tenant(r), "DocumentReference", id)
	if err != nil {
		h.fail(w, r, notFoundAs(err, "document", id))
		return
	}
	writeJSON(w, http.StatusOK, projectDocument(res, d))
}

// projectDocument maps the DocumentReference d (version res).
func projectDocument(res *store.Resource, d fhirNode) *documentRecord {
	att := firstNode(d.nodes("content")).node("attachment")
	title := d.str("description")
	if title == "" {
		title = att.str("title")
	}
	return &documentRecord{
		DocumentID:   res.ID,
		EpisodeID:    documentEpisode(d.node("context")),
		PatientID:    d.node("subject").refID("Patient"),
		AgencyID:     d.node("custodian").refID("Organization"),
		DocumentType: conceptText(d.node("type")),
		Title:        title,
		FileName:     att.str("title"),
		MimeType:     att.str("contentType"),
		FileSize:     attachmentSize(att),
		Status:       firstNonEmpty(d.str("docStatus"), d.str("status")),
		Description:  d.str("description"),
		Source:       d.node("meta").str("source"),
		TextContent:  plainText(d),
		UploadedAt:   firstNonEmpty(d.str("date"), formatInstant(res)),
		DocumentDate: firstNonEmpty(d.node("context").node("period").str("start"), att.str("creation")),
		Tags:         documentTags(d),
		UploadedBy:   documentAuthorOf(d),
		Metadata:     documentMetadata(res, d, att),
	}
}

// documentEpisode is the EpisodeOfCare of a DocumentReference context: R4
// allows one in context.encounter; context.related is the fallback.
func documentEpisode(ctx fhirNode) string {
	for _, key := range []string{"encounter", "related"} {
		for _, ref := range ctx.nodes(key) {
			if id := ref.refID("EpisodeOfCare"); id != "" {
				return id
			}
		}
	}
	return ""
}

// conceptText is a CodeableConcept's text, else its first coding's display,
// else that coding's code.
func conceptText(cc fhirNode) string {
	c := firstNode(cc.nodes("coding"))
	return firstNonEmpty(cc.str("text"), c.str("display"), c.str("code"))
}

// attachmentSize is the attachment's size in bytes, nil when unknown.
func attachmentSize(att fhirNode) *int64 {
	n, ok := att.int("size")
	if !ok {
		return nil
	}
	size := int64(n)
	return &size
}

// documentTags are the categories: each one's text, else its first code
// (else display).
func documentTags(d fhirNode) []string {
	tags := []string{}
	for _, cat := range d.nodes("category") {
		c := firstNode(cat.nodes("coding"))
		if t := firstNonEmpty(cat.str("text"), c.str("code"), c.str("display")); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

// plainText is the decoded data of the first text/plain attachment
// carrying UTF-8 (or unlabelled) inline data, else "".
func plainText(d fhirNode) string {
	for _, c := range d.nodes("content") {
		att := c.node("attachment")
		mt, params, err := mime.ParseMediaType(att.str("contentType"))
		if err != nil || mt != "text/plain" || att.str("data") == "" {
			continue
		}
		if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "us-ascii" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(att.str("data"))
		if err == nil && utf8.Valid(b) {
			return string(b)
		}
	}
	return ""
}

// documentAuthorOf summarises the first author, nil without one.
func documentAuthorOf(d fhirNode) *documentAuthor {
	a := firstNode(d.nodes("author"))
	if a == nil {
		return nil
	}
	typ, id := a.refTarget()
	out := &documentAuthor{ResourceType: firstNonEmpty(typ, a.str("type")), ID: id, Display: a.str("display")}
	if *out == (documentAuthor{}) {
		return nil
	}
	return out
}

// documentMetadata carries the FHIR facts with no REST field of their own:
// the version, both status elements, the attachment's url, hash, language
// and the content format.
func documentMetadata(res *store.Resource, d, att fhirNode) map[string]any {
	m := map[string]any{"versionId": strconv.Itoa(res.VersionID), "lastUpdated": formatInstant(res)}
	for k, v := range map[string]string{
		"fhirStatus":       d.str("status"),
		"docStatus":        d.str("docStatus"),
		"masterIdentifier": d.node("masterIdentifier").str("value"),
		"url":              att.str("url"),
		"hash":             att.str("hash"),
		"language":         att.str("language"),
		"format":           firstNode(d.nodes("content")).node("format").str("code"),
	} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// firstNonEmpty is the first non-empty value, or "".
func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
