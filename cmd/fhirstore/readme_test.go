package main

import (
	"os"
	"regexp"
	"testing"
)

// readmeRow is a row of the README's configuration table.
var readmeRow = regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `([A-Z_]+)` \\| (?:`([^`]*)`|\\(empty\\)) \\|")

// TestREADMEConfigurationTableMatchesSettings: every setting has its README
// row with the same environment variable and default, and the README
// lists nothing else.
func TestREADMEConfigurationTableMatchesSettings(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]string{}
	for _, m := range readmeRow.FindAllStringSubmatch(string(raw), -1) {
		rows[m[1]] = [2]string{m[2], m[3]}
	}
	for _, s := range settings {
		row, ok := rows[s.flag]
		if !ok {
			t.Errorf("--%s has no row in README's configuration table", s.flag)
			continue
		}
		if row[0] != s.env || row[1] != s.def {
			t.Errorf("--%s: README says %s default %q, the code %s default %q", s.flag, row[0], row[1], s.env, s.def)
		}
		delete(rows, s.flag)
	}
	for flag := range rows {
		t.Errorf("README lists --%s, which no command accepts", flag)
	}
}
