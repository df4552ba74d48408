package server

import (
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
	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/document"
	"fhirstore/store/terminology"
)

// terminologyOps are the terminology operations on stored resources: the
// resource type each is defined on and its OperationDefinition.
var terminologyOps = map[string]struct{ typ, definition string }{
	"$expand":        {"ValueSet", "http://hl7.org/fhir/OperationDefinition/ValueSet-expand"},
	"$validate-code": {"ValueSet", "http://hl7.org/fhir/OperationDefinition/ValueSet-validate-code"},
	"$lookup":        {"CodeSystem", "http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup"},
}

// maxExpansion bounds an $expand answer without count.
const maxExpansion = 10000

// terminologyOperations lists the terminology operations of typ for the
// CapabilityStatement.
func terminologyOperations(typ string) []map[string]string {
	var out []map[string]string
	for _, name := range []string{"$expand", "$validate-code", "$lookup"} {
		if op := terminologyOps[name]; op.typ == typ {
			out = append(out, map[string]string{"name": name[1:], "definition": op.definition})
		}
	}
	return out
}

// terminologyRoute serves a terminology operation by type
// ([type]/$op) or by id ([type]/[id]/$op), GET and POST.
var terminologyRoute = map[string]route{http.MethodGet: serveTerminologyOp, http.MethodPost: serveTerminologyOp}

func serveTerminologyOp(s *Server, c *gin.Context, segs []string) {
	id := ""
	if len(segs) == 3 {
		id = segs[1]
	}
	s.terminologyOp(c, segs[0], id, segs[len(segs)-1])
}

// terminologyOp serves GET and POST [type]/$op and [type]/[id]/$op.
func (s *Server) terminologyOp(c *gin.Context, typ, id, op string) {
	if terminologyOps[op].typ != typ {
		s.abort(c, fail(http.StatusNotFound, "not-supported", fmt.Sprintf("%s is an operation on %s, not %s", op, terminologyOps[op].typ, typ), ""))
		return
	}
	in, err := s.operationInput(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	var out any
	switch op {
	case "$expand":
		out, err = s.expand(c, id, in)
	case "$validate-code":
		out, err = s.validateCode(c, id, in)
	default:
		out, err = s.lookup(c, id, in)
	}
	if err != nil {
		s.abort(c, terminologyError(err))
		return
	}
	writeJSON(c, http.StatusOK, out)
}

// opInput are an operation's parameters: simple values by name, and the
// Coding, CodeableConcept and resource parameters of a POST.
type opInput struct {
	values   url.Values
	coding   *coding
	concept  []coding
	resource []byte
}

type coding struct {
	System  string `json:"system"`
	Version string `json:"version"`
	Code    string `json:"code"`
	Display string `json:"display"`
}

// parametersIn is what an operation reads of a Parameters body.
type parametersIn struct {
	ResourceType string `json:"resourceType"`
	Parameter    []struct {
		Name                 string                     `json:"name"`
		ValueInteger         *int                       `json:"valueInteger"`
		ValueBoolean         *bool                      `json:"valueBoolean"`
		ValueCoding          *coding                    `json:"valueCoding"`
		ValueCodeableConcept *struct{ Coding []coding } `json:"valueCodeableConcept"`
		Resource             json.RawMessage            `json:"resource"`
	} `json:"parameter"`
}

// stringValues are the value[x] types an operation takes as text.
var stringValues = []string{"valueString", "valueUri", "valueCode", "valueCanonical", "valueUrl", "valueDateTime"}

// operationInput reads the URL's parameters and, for POST, a Parameters body.
func (s *Server) operationInput(c *gin.Context) (*opInput, error) {
	in := &opInput{values: c.Request.URL.Query()}
	if c.Request.Method != http.MethodPost {
		return in, nil
	}
	body, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	var params parametersIn
	if err := json.Unmarshal(body, &params); err != nil || params.ResourceType != "Parameters" {
		return nil, fail(http.StatusBadRequest, "structure", "the body of an operation must be a Parameters resource", "")
	}
	var raw struct {
		Parameter []map[string]json.RawMessage `json:"parameter"`
	}
	_ = json.Unmarshal(body, &raw)
	for i, p := range params.Parameter {
		switch {
		case p.ValueInteger != nil:
			in.values.Set(p.Name, strconv.Itoa(*p.ValueInteger))
		case p.ValueBoolean != nil:
			in.values.Set(p.Name, strconv.FormatBool(*p.ValueBoolean))
		case p.ValueCoding != nil:
			in.coding = p.ValueCoding
		case p.ValueCodeableConcept != nil:
			in.concept = p.ValueCodeableConcept.Coding
		case len(p.Resource) > 0:
			in.resource = p.Resource
		}
		for _, k := range stringValues {
			var v string
			if json.Unmarshal(raw.Parameter[i][k], &v) == nil && v != "" {
				in.values.Set(p.Name, v)
			}
		}
	}
	return in, nil
}

// terminologyError maps terminology failures: what is not stored is 404,
// what cannot be expanded 400.
func terminologyError(err error) error {
	var te *terminology.Error
	switch {
	case errors.As(err, &te):
		return fail(http.StatusBadRequest, "processing", "cannot expand: "+te.Msg, "")
	case errors.Is(err, terminology.ErrNotFound), errors.Is(err, terminology.ErrUnknownCode):
		return fail(http.StatusNotFound, "not-found", err.Error(), "")
	}
	return err
}

// valueSetOf is the value set an operation works on: ValueSet/id, the url
// (and valueSetVersion) parameter, or a valueSet resource parameter.
func (s *Server) valueSetOf(c *gin.Context, id string, in *opInput) ([]byte, error) {
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	switch {
	case id != "":
		res, err := s.store.Read(ctx, tenant, "ValueSet", id)
		if err != nil {
			return nil, err
		}
		return res.JSON, nil
	case in.resource != nil:
		return in.resource, nil
	case in.values.Get("url") != "":
		ref := in.values.Get("url")
		if v := in.values.Get("valueSetVersion"); v != "" {
			ref += "|" + v
		}
		return s.store.Terminology(tenant).ValueSet(ctx, ref)
	}
	return nil, fail(http.StatusBadRequest, "required", "name the value set: ValueSet/[id]/$op, the url parameter, or a valueSet resource", "url")
}

// expand serves $expand: the value set with an expansion, filtered and paged.
func (s *Server) expand(c *gin.Context, id string, in *opInput) (json.RawMessage, error) {
	vs, err := s.valueSetOf(c, id, in)
	if err != nil {
		return nil, err
	}
	codes, err := s.store.Terminology(c.GetString(tenantKey)).Expand(c.Request.Context(), vs)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(in.values, "offset", 0)
	if err != nil {
		return nil, err
	}
	count, err := intParam(in.values, "count", -1)
	if err != nil {
		return nil, err
	}
	filter := in.values.Get("filter")
	codes = filterCodes(codes, filter)
	total := len(codes)
	if count < 0 && total-offset > maxExpansion {
		return nil, fail(http.StatusBadRequest, "too-costly", fmt.Sprintf("the expansion has %d codes; page it with count (at most %d) and offset", total, maxExpansion), "count")
	}
	codes = codes[min(offset, total):]
	if count >= 0 {
		codes = codes[:min(count, len(codes))]
	}
	return withExpansion(vs, expansionOf(codes, total, offset, filter, count))
}

func intParam(v url.Values, name string, def int) (int, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fail(http.StatusBadRequest, "value", fmt.Sprintf("%s must be a non-negative integer, not %q", name, s), name)
	}
	return n, nil
}

// filterCodes keeps the codes whose code or display holds every word of
// filter (case- and accent-insensitive).
func filterCodes(codes []terminology.Concept, filter string) []terminology.Concept {
	words := strings.Fields(search.Fold(filter))
	if len(words) == 0 {
		return codes
	}
	var out []terminology.Concept
	for _, c := range codes {
		text := search.Fold(c.Code + " " + c.Display)
		all := true
		for _, w := range words {
			all = all && strings.Contains(text, w)
		}
		if all {
			out = append(out, c)
		}
	}
	return out
}

// expansionOf is the ValueSet.expansion element.
func expansionOf(codes []terminology.Concept, total, offset int, filter string, count int) bson.D {
	exp := bson.D{
		{Key: "identifier", Value: "urn:uuid:" + uuid.NewString()},
		{Key: "timestamp", Value: time.Now().UTC().Format(store.InstantLayout)},
		{Key: "total", Value: int32(total)},
		{Key: "offset", Value: int32(offset)},
	}
	var params bson.A
	if filter != "" {
		params = append(params, bson.D{{Key: "name", Value: "filter"}, {Key: "valueString", Value: filter}})
	}
	if count >= 0 {
		params = append(params, bson.D{{Key: "name", Value: "count"}, {Key: "valueInteger", Value: int32(count)}})
	}
	if offset > 0 {
		params = append(params, bson.D{{Key: "name", Value: "offset"}, {Key: "valueInteger", Value: int32(offset)}})
	}
	if len(params) > 0 {
		exp = append(exp, bson.E{Key: "parameter", Value: params})
	}
	if len(codes) > 0 {
		contains := make(bson.A, len(codes))
		for i, c := range codes {
			entry := bson.D{{Key: "system", Value: c.System}}
			if c.Version != "" {
				entry = append(entry, bson.E{Key: "version", Value: c.Version})
			}
			entry = append(entry, bson.E{Key: "code", Value: c.Code})
			if c.Display != "" {
				entry = append(entry, bson.E{Key: "display", Value: c.Display})
			}
			contains[i] = entry
		}
		exp = append(exp, bson.E{Key: "contains", Value: contains})
	}
	return exp
}

// withExpansion is the value set with its expansion replaced, key order
// and number text kept.
func withExpansion(vs []byte, exp bson.D) (json.RawMessage, error) {
	dec, err := document.FromJSON(vs, 0)
	if err != nil {
		return nil, fail(http.StatusBadRequest, "structure", "the value set is not valid JSON", "valueSet")
	}
	out := bson.D{}
	for _, e := range dec.Doc {
		if e.Key != "expansion" {
			out = append(out, e)
		}
	}
	out = append(out, bson.E{Key: "expansion", Value: exp})
	raw, err := bson.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("render expansion: %w", err)
	}
	body, err := document.ToJSON(raw, dec.NumText)
	return json.RawMessage(body), err
}

// parametersOut is a Parameters resource an operation answers with.
type parametersOut struct {
	ResourceType string           `json:"resourceType"`
	Parameter    []map[string]any `json:"parameter"`
}

func (p *parametersOut) add(name, valueKey string, value any) {
	p.Parameter = append(p.Parameter, map[string]any{"name": name, valueKey: value})
}

// validateCode serves ValueSet $validate-code: is the code (system and
// code, a coding, or any coding of a codeableConcept) in the value set,
// and is its display right.
func (s *Server) validateCode(c *gin.Context, id string, in *opInput) (*parametersOut, error) {
	candidates := in.concept
	switch {
	case in.coding != nil:
		candidates = append(candidates, *in.coding)
	case in.values.Get("code") != "":
		candidates = append(candidates, coding{System: in.values.Get("system"), Code: in.values.Get("code"), Display: in.values.Get("display")})
	}
	if len(candidates) == 0 {
		return nil, fail(http.StatusBadRequest, "required", "give code (and system), coding or codeableConcept", "code")
	}
	vs, err := s.valueSetOf(c, id, in)
	if err != nil {
		return nil, err
	}
	codes, err := s.store.Terminology(c.GetString(tenantKey)).Expand(c.Request.Context(), vs)
	if err != nil {
		return nil, err
	}
	out := &parametersOut{ResourceType: "Parameters"}
	for _, cand := range candidates {
		for _, m := range codes {
			if m.Code != cand.Code || cand.System != "" && m.System != cand.System {
				continue
			}
			if cand.Display != "" && m.Display != "" && cand.Display != m.Display {
				out.add("result", "valueBoolean", false)
				out.add("message", "valueString", fmt.Sprintf("the display %q is not the display of %s|%s, %q", cand.Display, m.System, m.Code, m.Display))
				out.add("display", "valueString", m.Display)
				return out, nil
			}
			out.add("result", "valueBoolean", true)
			if m.Display != "" {
				out.add("display", "valueString", m.Display)
			}
			return out, nil
		}
	}
	out.add("result", "valueBoolean", false)
	out.add("message", "valueString", fmt.Sprintf("%s|%s is not in the value set", candidates[0].System, candidates[0].Code))
	return out, nil
}

// lookup serves CodeSystem $lookup: name, version, display, designations
// and properties (with parent and child) of a code.
func (s *Server) lookup(c *gin.Context, id string, in *opInput) (*parametersOut, error) {
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	want := coding{System: in.values.Get("system"), Version: in.values.Get("version"), Code: in.values.Get("code")}
	if in.coding != nil {
		want = *in.coding
	}
	if want.Code == "" || want.System == "" && id == "" {
		return nil, fail(http.StatusBadRequest, "required", "give system and code, or a coding", "code")
	}
	var cs *terminology.CodeSystem
	if id != "" {
		res, err := s.store.Read(ctx, tenant, "CodeSystem", id)
		if err != nil {
			return nil, err
		}
		if cs, err = terminology.ParseCodeSystem(res.JSON); err != nil {
			return nil, err
		}
	} else {
		var err error
		if cs, err = s.store.Terminology(tenant).CodeSystem(ctx, want.System, want.Version); err != nil {
			return nil, err
		}
	}
	concept, err := cs.Lookup(want.Code)
	if err != nil {
		return nil, err
	}
	return lookupResult(cs, concept), nil
}

func lookupResult(cs *terminology.CodeSystem, concept *terminology.CodeConcept) *parametersOut {
	out := &parametersOut{ResourceType: "Parameters"}
	name := cs.Name
	if name == "" {
		name = cs.URL
	}
	out.add("name", "valueString", name)
	if cs.Version != "" {
		out.add("version", "valueString", cs.Version)
	}
	if concept.Display != "" {
		out.add("display", "valueString", concept.Display)
	}
	for _, d := range concept.Designation {
		out.Parameter = append(out.Parameter, map[string]any{"name": "designation", "part": designationParts(d)})
	}
	property := func(code string, value map[string]any) {
		part := []map[string]any{{"name": "code", "valueCode": code}}
		for k, v := range value {
			part = append(part, map[string]any{"name": "value", k: v})
		}
		out.Parameter = append(out.Parameter, map[string]any{"name": "property", "part": part})
	}
	if concept.Definition != "" {
		property("definition", map[string]any{"valueString": concept.Definition})
	}
	for _, p := range cs.Parents(concept.Code) {
		property("parent", map[string]any{"valueCode": p})
	}
	for _, ch := range cs.Children(concept.Code) {
		property("child", map[string]any{"valueCode": ch})
	}
	for _, raw := range concept.Property {
		var p map[string]any
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		code, _ := p["code"].(string)
		delete(p, "code")
		property(code, p)
	}
	return out
}

// designationParts renders a CodeSystem designation as $lookup parts.
func designationParts(raw json.RawMessage) []map[string]any {
	var d struct {
		Language string          `json:"language"`
		Use      json.RawMessage `json:"use"`
		Value    string          `json:"value"`
	}
	_ = json.Unmarshal(raw, &d)
	var parts []map[string]any
	if d.Language != "" {
		parts = append(parts, map[string]any{"name": "language", "valueCode": d.Language})
	}
	if len(d.Use) > 0 {
		parts = append(parts, map[string]any{"name": "use", "valueCoding": d.Use})
	}
	return append(parts, map[string]any{"name": "value", "valueString": d.Value})
}
