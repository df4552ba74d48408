package server_test

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// damage overwrites the stored form of document id of collection coll of
// the env's tenant with other bytes, as a damaged disk would, through a
// connection of its own; the test is skipped on other engines than the
// embedded one.
func damage(t *testing.T, e *env, coll, id string) {
	t.Helper()
	if db.Kind != "sqlite" {
		t.Skip("damages the embedded engine's files")
	}
	path := filepath.Join(db.Dir, db.Options().DatabasePrefix+e.tenant+".db")
	conn, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.Exec(`UPDATE "d_`+coll+`" SET doc = substr(doc, 1, 10) || x'00112233' || substr(doc, 15) WHERE id = ?`, id)
	if err != nil {
		t.Fatalf("damage %s %s: %v", coll, id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("damage %s %s: %d rows", coll, id, n)
	}
}

func TestADamagedStoredVersionIsReportedNotServed(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Intact"}]}`)
	if r := e.put("/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","name":[{"family":"Damaged"}]}`); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	other := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Intact"}]}`)
	damage(t, e, "Patient", id)
	damage(t, e, "history", "Patient/"+id+"/1")
	for _, tc := range []struct{ name, path, want string }{
		{"a read names the current version", "/Patient/" + id, "Patient/" + id + " version 2 is damaged"},
		{"a vread names its version", "/Patient/" + id + "/_history/1", "Patient/" + id + " version 1 is damaged"},
		{"a search reaching it names it", "/Patient?_id=" + id, "Patient/" + id + " version 2 is damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.get(tc.path)
			if r.Status != http.StatusInternalServerError || !strings.Contains(string(r.Body), tc.want) || strings.Contains(string(r.Body), "Damaged") {
				t.Fatalf("%d %s; want 500 saying %q", r.Status, r.Body, tc.want)
			}
		})
	}
	t.Run("other resources still read", func(t *testing.T) {
		if r := e.get("/Patient/" + other); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
}
