package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// History paging limits, as for search.
const (
	defaultCount = 10
	maxCount     = 100
	cursorParam  = "_cursor"
)

// history serves instance (type and id), type (type) and system history.
func (s *Server) history(c *gin.Context, typ, id string) {
	q, err := parseHistoryQuery(c, typ, id)
	if err != nil {
		s.abort(c, err)
		return
	}
	tenant := c.GetString(tenantKey)
	page, err := s.store.History(c.Request.Context(), tenant, q)
	if err != nil {
		s.abort(c, err)
		return
	}
	if id != "" && page.Total == 0 { // an unknown resource has no history: 404
		if _, err := s.store.Read(c.Request.Context(), tenant, typ, id); err != nil && !errors.Is(err, store.ErrGone) {
			s.abort(c, err)
			return
		}
	}
	total := page.Total
	narrowed := s.narrowHistory(c, typ, page)
	if narrowed && id != "" && len(page.Entries) == 0 && total > 0 {
		s.abort(c, outsideCompartment(typ, id))
		return
	}
	b := historyBundle(c, page)
	if narrowed {
		b.Total = nil // the count would include what the caller may not see
	}
	writeJSON(c, http.StatusOK, b)
}

// narrowHistory drops the versions a patient-scoped caller may not see
// and tells whether it had to look (the page is then a subset).
func (s *Server) narrowHistory(c *gin.Context, typ string, page *store.HistoryPage) bool {
	a := accessOf(c.Request.Context())
	if typ == "" {
		typ = "*"
	}
	if a == nil || max(a.grant(typ, auth.Read), a.grant(typ, auth.Search)) == auth.Full {
		return false
	}
	page.Entries = s.visibleOnly(c, page.Entries)
	return true
}

func parseHistoryQuery(c *gin.Context, typ, id string) (store.HistoryQuery, error) {
	q := store.HistoryQuery{Type: typ, ID: id, Count: defaultCount}
	if v := c.Query("_count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxCount {
			return q, fail(http.StatusBadRequest, "value", fmt.Sprintf("_count must be an integer from 1 to %d, not %q", maxCount, v), "_count")
		}
		q.Count = n
	}
	if v := c.Query("_since"); v != "" {
		r, err := search.ParseDateRange(v)
		if err != nil {
			return q, fail(http.StatusBadRequest, "value", "_since: "+err.Error(), "_since")
		}
		q.Since = &r.Lo
	}
	if v := c.Query("_at"); v != "" {
		r, err := search.ParseDateRange(v)
		if err != nil {
			return q, fail(http.StatusBadRequest, "value", "_at: "+err.Error(), "_at")
		}
		q.At = &store.TimeRange{Lo: r.Lo, Hi: r.Hi}
	}
	if v := c.Query(cursorParam); v != "" {
		cur, err := decodeCursor(v)
		if err != nil {
			return q, fail(http.StatusBadRequest, "value", "the paging cursor is not valid; start again from the first page", cursorParam)
		}
		if cur.backward {
			q.Before = cur.pos
		} else {
			q.After = cur.pos
		}
		q.Until = &cur.until
	}
	return q, nil
}

// bundleEntry is one entry of a history Bundle.
type bundleEntry struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource,omitempty"`
	Request  map[string]any  `json:"request"`
	Response map[string]any  `json:"response"`
}

type bundleLink struct {
	Relation string `json:"relation"`
	URL      string `json:"url"`
}

type bundle struct {
	ResourceType string         `json:"resourceType"`
	ID           string         `json:"id"`
	Meta         map[string]any `json:"meta"`
	Type         string         `json:"type"`
	Total        *int64         `json:"total,omitempty"`
	Link         []bundleLink   `json:"link"`
	Entry        []bundleEntry  `json:"entry,omitempty"`
}

func historyBundle(c *gin.Context, page *store.HistoryPage) *bundle {
	base := baseURL(c)
	b := &bundle{
		ResourceType: "Bundle",
		ID:           uuid.NewString(),
		Meta:         map[string]any{"lastUpdated": time.Now().UTC().Format(store.InstantLayout)},
		Type:         "history",
		Total:        &page.Total,
		Link:         []bundleLink{{Relation: "self", URL: pageURL(c, c.Query(cursorParam))}},
	}
	if page.HasNext && page.Last != nil {
		b.Link = append(b.Link, bundleLink{Relation: "next", URL: pageURL(c, encodeCursor(historyCursor{page.Last, false, page.Until}))})
	}
	if page.HasPrevious && page.First != nil {
		b.Link = append(b.Link, bundleLink{Relation: "previous", URL: pageURL(c, encodeCursor(historyCursor{page.First, true, page.Until}))})
	}
	for _, r := range page.Entries {
		b.Entry = append(b.Entry, historyEntry(base, r))
	}
	return b
}

func historyEntry(base string, r *store.Resource) bundleEntry {
	e := bundleEntry{
		FullURL:  base + "/" + r.Type + "/" + r.ID,
		Resource: r.JSON,
		Request:  map[string]any{"method": r.Method, "url": r.Type + "/" + r.ID},
		Response: map[string]any{"etag": etag(r.VersionID), "lastModified": r.LastUpdated.UTC().Format(store.InstantLayout)},
	}
	switch {
	case r.Method == "POST":
		e.Request["url"] = r.Type
		e.Response["status"] = "201 Created"
	case r.VersionID == 1: // created by an update with the client's id
		e.Response["status"] = "201 Created"
	case r.Method == "DELETE":
		e.Response["status"] = "204 No Content"
	default:
		e.Response["status"] = "200 OK"
	}
	return e
}

// pageURL is the request URL with the paging cursor replaced (or dropped).
func pageURL(c *gin.Context, cursor string) string {
	q := c.Request.URL.Query()
	q.Del(cursorParam)
	if cursor != "" {
		q.Set(cursorParam, cursor)
	}
	u := url.URL{Path: c.Request.URL.Path, RawQuery: q.Encode()}
	return strings.TrimSuffix(baseURL(c), "/fhir/r4") + u.String()
}

// historyCursor is a position in history order, the direction to read
// from it, and the time point of the snapshot the pages show.
type historyCursor struct {
	pos      *store.HistoryPosition
	backward bool
	until    time.Time
}

// encodeCursor makes an opaque token of a history cursor.
func encodeCursor(c historyCursor) string {
	dir := "n"
	if c.backward {
		dir = "p"
	}
	raw := dir + "|" + strconv.FormatInt(c.pos.LastUpdated.UnixMilli(), 10) + "|" + strconv.FormatInt(c.until.UnixMilli(), 10) + "|" + c.pos.Key
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(s string) (historyCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return historyCursor{}, fmt.Errorf("decode cursor: %w", err)
	}
	parts := strings.SplitN(string(raw), "|", 4)
	if len(parts) != 4 || (parts[0] != "n" && parts[0] != "p") || parts[3] == "" {
		return historyCursor{}, fmt.Errorf("malformed cursor")
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return historyCursor{}, fmt.Errorf("malformed cursor time: %w", err)
	}
	until, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return historyCursor{}, fmt.Errorf("malformed cursor snapshot: %w", err)
	}
	return historyCursor{
		pos:      &store.HistoryPosition{LastUpdated: time.UnixMilli(ms).UTC(), Key: parts[3]},
		backward: parts[0] == "p",
		until:    time.UnixMilli(until).UTC(),
	}, nil
}
