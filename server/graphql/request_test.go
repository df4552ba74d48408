package graphql

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		name, method, ctype string
		query               url.Values
		body                string
		want                Request
		status              int // of the error; 0: none
	}{
		{"GET with query=", http.MethodGet, "", url.Values{"query": {"{ id }"}}, "", Request{Query: "{ id }"}, 0},
		{"GET with variables as JSON", http.MethodGet, "", url.Values{"query": {"q"}, "operationName": {"op"}, "variables": {`{"n":5}`}}, "",
			Request{Query: "q", OperationName: "op", Variables: map[string]any{"n": json.Number("5")}}, 0},
		{"POST application/graphql", http.MethodPost, "application/graphql; charset=utf-8", nil, "{ id }", Request{Query: "{ id }"}, 0},
		{"POST application/json", http.MethodPost, "application/json", nil, `{"query":"{ id }","operationName":"a","variables":{"b":true}}`,
			Request{Query: "{ id }", OperationName: "a", Variables: map[string]any{"b": true}}, 0},
		{"POST JSON with null variables", http.MethodPost, "application/json", nil, `{"query":"{ id }","variables":null}`, Request{Query: "{ id }"}, 0},
		{"POST JSON that is not JSON", http.MethodPost, "application/json", nil, `{"query":`, Request{}, http.StatusBadRequest},
		{"POST with variables that are no object", http.MethodPost, "application/json", nil, `{"query":"q","variables":[1]}`, Request{}, http.StatusBadRequest},
		{"POST of another media type", http.MethodPost, "text/plain", nil, "{ id }", Request{}, http.StatusUnsupportedMediaType},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRequest(c.method, c.ctype, c.query, []byte(c.body))
			if c.status != 0 {
				var e *Error
				if !errors.As(err, &e) || e.Status != c.status {
					t.Fatalf("want an error of status %d, got %v", c.status, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestSearchName(t *testing.T) {
	cases := []struct{ arg, want string }{
		{"name", "name"},
		{"address_city", "address-city"},
		{"family_contains", "family:contains"},
		{"code_not_in", "code:not-in"},
		{"identifier_of_type", "identifier:of-type"},
		{"subject_identifier", "subject:identifier"},
		{"clinical_status", "clinical-status"},
		{"clinical_status_not", "clinical-status:not"},
		{"_id", "_id"},
		{"_lastUpdated", "_lastUpdated"},
	}
	for _, c := range cases {
		if got := searchName(c.arg); got != c.want {
			t.Errorf("searchName(%q) = %q, want %q", c.arg, got, c.want)
		}
	}
}
