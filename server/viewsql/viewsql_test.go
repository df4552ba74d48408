package viewsql_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"fhirstore/fhirschema/view"
	"fhirstore/server/viewsql"
)

// patients is a small table of the tests: id, family, age.
func patients(t *testing.T, limits viewsql.Limits) *viewsql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := viewsql.Open(ctx, t.TempDir(), limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := db.Table(ctx, "patients", []view.Column{{Name: "id", Type: "id"}, {Name: "family", Type: "string"},
		{Name: "age", Type: "integer"}, {Name: "active", Type: "boolean"}, {Name: "given", Type: "string", Collection: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]any{
		{"p1", "Smith", json.Number("40"), true, []any{"Ann"}},
		{"p2", "Jones", json.Number("30"), false, []any{}},
		{"p3", "Smith", nil, nil, []any{"Bo", "Cy"}},
	} {
		if err := w.WriteRow(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestASelectOverAViewTableAnswers(t *testing.T) {
	db := patients(t, viewsql.Limits{})
	res, err := db.Query(context.Background(), "SELECT family, count(*) AS n, avg(age) AS age FROM patients GROUP BY family ORDER BY family", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.Rows)
	if string(got) != `[["Jones",1,30.0],["Smith",2,40.0]]` {
		t.Errorf("rows %s", got)
	}
	if res.Columns[1].Type != "integer64" || res.Columns[2].Type != "decimal" || res.Columns[0].Type != "string" {
		t.Errorf("columns %+v", res.Columns)
	}
}

func TestQueryParametersAreBoundByName(t *testing.T) {
	db := patients(t, viewsql.Limits{})
	res, err := db.Query(context.Background(), "SELECT id FROM patients WHERE family = :family AND active = :active", map[string]any{"family": "Smith", "active": int64(1)})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != "p1" {
		t.Errorf("got %v, %v", res, err)
	}
}

// TestAQueryIsReadOnlyByConstruction: every query that does anything but
// read the views' tables is refused, naming what it tried, and the tables
// stay as they were.
func TestAQueryIsReadOnlyByConstruction(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		kind      error
		says      string
	}{
		{"a delete", "DELETE FROM patients", viewsql.ErrBadQuery, "must be a SELECT"},
		{"two statements", "SELECT 1; DELETE FROM patients", viewsql.ErrBadQuery, "single SELECT"},
		{"attach", "ATTACH DATABASE '/tmp/x.db' AS x", viewsql.ErrBadQuery, "must be a SELECT"},
		{"pragma", "PRAGMA query_only=0", viewsql.ErrBadQuery, "must be a SELECT"},
		{"a table that is no view", "SELECT * FROM observations", viewsql.ErrBadQuery, "not one of its views (patients)"},
		{"the schema table", "SELECT * FROM sqlite_master", viewsql.ErrNotAllowed, "sqlite_master"},
		{"a function not allowed", "SELECT load_extension('x')", viewsql.ErrNotAllowed, "load_extension"},
		{"a pragma function", "SELECT * FROM pragma_table_info('patients')", viewsql.ErrNotAllowed, ""},
		{"a blob bomb", "SELECT zeroblob(1000000000)", viewsql.ErrNotAllowed, "zeroblob"},
		{"a write hidden in a CTE", "WITH x AS (SELECT 1) DELETE FROM patients", viewsql.ErrNotAllowed, "DELETE"},
		{"a comment hiding a second statement", "SELECT 1 /* ; */ ; -- x\n UPDATE patients SET family = 'X'", viewsql.ErrBadQuery, "single SELECT"},
		{"an empty query", " -- nothing\n", viewsql.ErrBadQuery, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := patients(t, viewsql.Limits{})
			_, err := db.Query(context.Background(), tc.sql, nil)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}

func TestAQueryPastTheRowLimitFails(t *testing.T) {
	db := patients(t, viewsql.Limits{MaxRows: 2})
	_, err := db.Query(context.Background(), "SELECT * FROM patients", nil)
	if !errors.Is(err, viewsql.ErrLimit) {
		t.Errorf("got %v, want ErrLimit", err)
	}
}

func TestAQueryPastItsTimeIsCancelled(t *testing.T) {
	db := patients(t, viewsql.Limits{Timeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := db.Query(ctx, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n", nil)
	if !errors.Is(err, viewsql.ErrLimit) || time.Since(start) > 5*time.Second {
		t.Errorf("got %v after %s, want ErrLimit at once", err, time.Since(start))
	}
}

func TestTablesPastTheSizeLimitFail(t *testing.T) {
	ctx := context.Background()
	db, err := viewsql.Open(ctx, t.TempDir(), viewsql.Limits{MaxBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Table(ctx, "big", []view.Column{{Name: "s", Type: "string"}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 1000)
	for i := 0; i < 10_000 && err == nil; i++ {
		err = w.WriteRow([]any{long})
	}
	if !errors.Is(err, viewsql.ErrLimit) {
		t.Errorf("got %v, want ErrLimit", err)
	}
}

func TestCloseRemovesTheDatabaseFiles(t *testing.T) {
	dir := t.TempDir()
	db, err := viewsql.Open(context.Background(), dir, viewsql.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d entries behind", len(entries))
	}
}
