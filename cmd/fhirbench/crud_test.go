package main

import (
	"encoding/json"
	"testing"
)

func TestCrudCyclesWriteReadUpdateAndDeleteNineLinkedTypes(t *testing.T) {
	base, tenant, dataDir := startServer(t)
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "3", "--duration", "2s",
		"--seed", "2", "--mix", "crud", "--json")
	if err != nil {
		t.Fatalf("fhirbench: %v\nstdout:\n%s\nstderr:\n%s", err, out, log)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Total.Errors != 0 || len(rep.ErrorsByStatus) != 0 {
		t.Fatalf("%d errors %v: %v", rep.Total.Errors, rep.ErrorsByStatus, rep.ErrorSamples)
	}
	byName := map[string]opReport{}
	for _, o := range rep.Operations {
		byName[o.Name] = o
	}
	cycles := byName["crud"].OK
	if cycles == 0 || len(rep.Operations) != 5 {
		t.Fatalf("operations %+v: want crud and its four kinds of request", rep.Operations)
	}
	for _, name := range []string{"crud.create", "crud.read", "crud.update", "crud.delete"} {
		o := byName[name]
		// Every cycle that finished made nine requests of each kind; one
		// cut short by the end of the run made fewer.
		if o.OK < 9*cycles || o.OK > 9*(cycles+3) || o.Errors != 0 || o.P50Ms <= 0 || o.P50Ms > o.P99Ms {
			t.Errorf("%s: %+v for %d cycles", name, o, cycles)
		}
	}
	if rep.Total.Operations != cycles || rep.Total.Requests < 36*cycles {
		t.Errorf("total %+v for %d cycles", rep.Total, cycles)
	}
	c := rep.Check
	if c == nil || c.Resources < 9*cycles || c.Versions < 3*9*cycles {
		t.Fatalf("check %+v: want the three versions of each of the %d resources", c, 9*cycles)
	}
	if c.Lost != 0 || c.Duplicated != 0 || c.CurrentMismatch != 0 || c.Errors != 0 || c.PagingDisagreements != 0 {
		t.Errorf("check: %+v", *c)
	}
}
