package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// guideRow is a row of the settings table of docs/guide/configuration.md:
// flag, environment variable, default, commands.
var guideRow = regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `([A-Z_]+)` \\| (?:`([^`]*)`|\\(empty\\)) \\| ([a-z, ]+) \\|")

// helpFlag is a flag line of COMMAND -h.
var helpFlag = regexp.MustCompile(`(?m)^  -([a-z-]+)`)

// TestGuideConfigurationTableMatchesTheCommands: docs/guide/configuration.md
// lists every setting with its environment variable, its default and the
// commands whose -h shows it — and nothing any command does not accept.
func TestGuideConfigurationTableMatchesTheCommands(t *testing.T) {
	raw, err := os.ReadFile("../../docs/guide/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	accepts := map[string][]string{} // flag → commands, in the order of commands
	for _, c := range commands {
		out, _, _ := runCmd(t, c.name, "-h")
		flags := helpFlag.FindAllStringSubmatch(out, -1)
		if len(flags) == 0 {
			t.Fatalf("fhirstore %s -h lists no flags:\n%s", c.name, out)
		}
		for _, f := range flags {
			accepts[f[1]] = append(accepts[f[1]], c.name)
		}
	}
	rows := map[string][]string{}
	for _, m := range guideRow.FindAllStringSubmatch(string(raw), -1) {
		rows[m[1]] = m[2:]
	}
	for _, s := range settings {
		row, ok := rows[s.flag]
		if !ok {
			t.Errorf("--%s has no row in docs/guide/configuration.md", s.flag)
			continue
		}
		delete(rows, s.flag)
		if row[0] != s.env || row[1] != s.def {
			t.Errorf("--%s: the guide says %s default %q, the code %s default %q", s.flag, row[0], row[1], s.env, s.def)
		}
		cmds := strings.Split(strings.ReplaceAll(row[2], " ", ""), ",")
		if want := accepts[s.flag]; !slices.Equal(cmds, want) {
			t.Errorf("--%s: the guide says commands %q, their -h says %q", s.flag, cmds, want)
		}
		delete(accepts, s.flag)
	}
	for flag := range rows {
		t.Errorf("the guide lists --%s, which is no setting", flag)
	}
	for flag, cmds := range accepts {
		t.Errorf("fhirstore %s -h shows --%s, which is not in the settings table", strings.Join(cmds, ", "), flag)
	}
}

// TestGuidePagesExist: the user guide has the pages its index promises,
// and each links only to pages that exist.
func TestGuidePagesExist(t *testing.T) {
	link := regexp.MustCompile(`\]\(([a-z-]+\.md)(?:#[a-z-]+)?\)`)
	for _, page := range []string{"README.md", "configuration.md", "tenants.md", "oauth.md", "mongodb.md", "backup.md", "upgrading.md", "subscriptions.md", "profiles.md"} {
		raw, err := os.ReadFile("../../docs/guide/" + page)
		if err != nil {
			t.Errorf("docs/guide/%s: %v", page, err)
			continue
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			if _, err := os.Stat("../../docs/guide/" + m[1]); err != nil {
				t.Errorf("docs/guide/%s links to %s, which does not exist", page, m[1])
			}
		}
	}
}
