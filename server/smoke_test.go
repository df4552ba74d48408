package server_test

import (
	"net/http"
	"testing"
)

func TestCreateThenReadReturnsTheSameResource(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Bar"}]}`)
	r := e.get("/Patient/" + id)
	if r.Status != http.StatusOK || r.Header.Get("ETag") != `W/"1"` {
		t.Fatalf("read: %d %v %s", r.Status, r.Header, r.Body)
	}
	if got := r.JSON(t)["name"].([]any)[0].(map[string]any)["family"]; got != "Bar" {
		t.Fatalf("family %v", got)
	}
}
