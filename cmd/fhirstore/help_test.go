package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestEveryCommandHasHelpWithExamples: COMMAND -h, --help and fhirstore
// help COMMAND print the synopsis, every flag with its environment
// variable, and examples; they succeed and do nothing else.
func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			out, _, err := runCmd(t, args...)
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("fhirstore %s: %v", strings.Join(args, " "), err)
				continue
			}
			for _, want := range []string{"usage: fhirstore " + c.name, "flags:", "examples:\n  fhirstore " + c.name, "(env FHIRSTORE_"} {
				if !strings.Contains(out, want) {
					t.Errorf("fhirstore %s does not print %q:\n%s", strings.Join(args, " "), want, out)
				}
			}
		}
	}
}

// TestTopLevelHelpListsTheCommands: fhirstore -h and fhirstore help name
// every command and how to get its flags.
func TestTopLevelHelpListsTheCommands(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out, _, err := runCmd(t, args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("fhirstore %s: %v", args[0], err)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("fhirstore %s does not list %s:\n%s", args[0], c.name, out)
			}
		}
		if !strings.Contains(out, "fhirstore COMMAND -h") {
			t.Errorf("fhirstore %s does not say how to see a command's flags", args[0])
		}
	}
}

// TestUsageErrorsNameTheProblemAndTheFix: a bad command line fails with
// one line that names what is wrong and the help that lists the flags.
func TestUsageErrorsNameTheProblemAndTheFix(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--bogus"}, []string{"unknown flag --bogus", "fhirstore serve -h"}},
		{[]string{"--bogus"}, []string{"unknown flag --bogus", "fhirstore serve -h"}},
		{[]string{"token", "--tenat", "demo"}, []string{"unknown flag --tenat", "fhirstore token -h"}},
		{[]string{"tenant", "list", "--bogus"}, []string{"unknown flag --bogus", "fhirstore tenant -h"}},
		{[]string{"load", "--bogus", "x"}, []string{"unknown flag --bogus", "fhirstore load -h"}},
		{[]string{"client", "list", "--bogus"}, []string{"unknown flag --bogus", "fhirstore client -h"}},
		{[]string{"serve", "--addr"}, []string{"--addr needs a value", "fhirstore serve -h"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "serve, token, tenant, client, load", "fhirstore help"}},
		{[]string{"help", "frobnicate"}, []string{`unknown command "frobnicate"`}},
		{[]string{"tenant", "rename", "a"}, []string{"want create NAME, list or delete NAME", "fhirstore tenant -h"}},
		{[]string{"token", "demo"}, []string{`unexpected argument "demo"`, "--tenant demo", "fhirstore token -h"}},
		{[]string{"load"}, []string{"no PATH given", "fhirstore load -h"}},
	}
	for _, c := range cases {
		_, _, err := runCmd(t, c.args...)
		if err == nil {
			t.Errorf("fhirstore %s succeeded, want an error", strings.Join(c.args, " "))
			continue
		}
		checkOneLine(t, c.args, err.Error())
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("fhirstore %s: %q does not say %q", strings.Join(c.args, " "), err, w)
			}
		}
	}
}
