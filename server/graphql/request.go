package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
)

// ParseRequest reads a request as GraphQL over HTTP sends it: GET with
// query= (and operationName=, variables= as JSON), or POST with the query
// as the body (application/graphql) or a JSON body {query, operationName,
// variables}.
func ParseRequest(method, contentType string, query url.Values, body []byte) (Request, error) {
	req := Request{Query: query.Get("query"), OperationName: query.Get("operationName")}
	if v := query.Get("variables"); v != "" {
		if err := decodeVariables([]byte(v), &req.Variables); err != nil {
			return req, err
		}
	}
	if method != http.MethodPost || len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/graphql":
		req.Query = string(body)
		return req, nil
	case "application/json", "application/fhir+json", "":
		var in struct {
			Query         string          `json:"query"`
			OperationName string          `json:"operationName"`
			Variables     json.RawMessage `json:"variables"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return req, &Error{Msg: "the body is not a GraphQL JSON request: " + err.Error(), Status: http.StatusBadRequest, Code: "structure"}
		}
		req.Query, req.OperationName = in.Query, in.OperationName
		if len(in.Variables) > 0 && string(in.Variables) != "null" {
			if err := decodeVariables(in.Variables, &req.Variables); err != nil {
				return req, err
			}
		}
		return req, nil
	}
	return req, &Error{Msg: fmt.Sprintf("Content-Type %q is not supported; send application/graphql or application/json", contentType), Status: http.StatusUnsupportedMediaType, Code: "not-supported"}
}

// decodeVariables reads the variables object, keeping numbers as written.
func decodeVariables(data []byte, into *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		return &Error{Msg: "the variables are not a JSON object: " + err.Error(), Status: http.StatusBadRequest, Code: "structure"}
	}
	return nil
}
