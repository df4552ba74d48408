package ferretdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the SQLite driver the engine itself uses
)

// catalogueTable is where the engine records its collections.
const catalogueTable = "_ferretdb_collections"

// Repair undoes catalogue changes that a crash interrupted. The engine
// creates a collection's table, and each index, before it records them in
// its catalogue; a process killed in between leaves a table or an index the
// engine does not know and later refuses to create again ("already
// exists"). Such a table never received a document and such an index is
// created again on demand, so both are dropped. It must run while no
// engine has the files open; it reports what it dropped.
func Repair(ctx context.Context, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sqlite"))
	if err != nil {
		return nil, fmt.Errorf("list database files: %w", err)
	}
	var dropped []string
	for _, f := range files {
		d, err := repairFile(ctx, f)
		dropped = append(dropped, d...)
		if err != nil {
			return dropped, fmt.Errorf("repair %s: %w", filepath.Base(f), err)
		}
	}
	return dropped, nil
}

// repairFile repairs one database file.
func repairFile(ctx context.Context, path string) ([]string, error) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	known, err := catalogue(ctx, db)
	if err != nil || known == nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')`)
	if err != nil {
		return nil, err
	}
	var drops []string
	for rows.Next() {
		var typ, name, table string
		if err := rows.Scan(&typ, &name, &table); err != nil {
			rows.Close()
			return nil, err
		}
		if strings.HasPrefix(name, "_ferretdb_") || strings.HasPrefix(name, "sqlite_") || known[name] {
			continue
		}
		if typ == "table" || known[table] {
			drops = append(drops, fmt.Sprintf("DROP %s %q", strings.ToUpper(typ), name))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, q := range drops {
		if _, err := db.ExecContext(ctx, q); err != nil && !strings.Contains(err.Error(), "no such") {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return drops, nil
}

// catalogue returns the tables and indexes the engine knows in a file
// (nil when the file has no catalogue yet).
func catalogue(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, catalogueTable).Scan(&n)
	if err != nil || n == 0 {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT table_name, settings FROM %q`, catalogueTable))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var table, settings string
		if err := rows.Scan(&table, &settings); err != nil {
			return nil, err
		}
		known[table] = true
		var s struct {
			Indexes []struct {
				Name string `json:"name"`
			} `json:"indexes"`
		}
		if err := json.Unmarshal([]byte(settings), &s); err != nil {
			return nil, fmt.Errorf("catalogue entry of %s: %w", table, err)
		}
		for _, ix := range s.Indexes {
			known[table+"_"+ix.Name] = true
		}
	}
	return known, rows.Err()
}
