package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestRolledBackNumbersAreForgotten checks that the numbers a rolled-back
// transaction gave paths are not used by the next one, which numbers
// paths from what the table holds.
func TestRolledBackNumbersAreForgotten(t *testing.T) {
	ctx := context.Background()
	w, err := openConn(filepath.Join(t.TempDir(), "f.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.run(ctx, createFieldsTable); err != nil {
		t.Fatal(err)
	}
	var fc fieldCodes
	inTxn := func(fn func()) {
		t.Helper()
		if err := w.run(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		if err := fc.begin(ctx, w); err != nil {
			t.Fatal(err)
		}
		fn()
	}
	code := func(path string) int64 {
		t.Helper()
		c, err := fc.code(ctx, w, path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	inTxn(func() { code("a") })
	if err := w.run(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	fc.end(true)
	inTxn(func() { code("rolled.back") })
	if err := w.run(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	fc.end(false)
	inTxn(func() {
		b, a := code("b"), code("a")
		var stored int64
		if _, err := w.queryRow(ctx, "SELECT id FROM "+fieldsTable+" WHERE path = 'b'", nil, &stored); err != nil {
			t.Fatal(err)
		}
		if b != stored || a == b {
			t.Errorf("b numbered %d (the table says %d), a %d", b, stored, a)
		}
		if _, ok := fc.codes["rolled.back"]; ok {
			t.Errorf("the rolled-back path is still numbered: %v", fc.codes)
		}
	})
	if err := w.run(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
}
