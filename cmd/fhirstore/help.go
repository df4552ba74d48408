package main

import (
	"fmt"
	"io"
	"strings"
)

// commands are the sub-commands in the order the top-level help lists them.
var commands = []struct{ name, does string }{
	{"serve", "run the server (the default when no command is given)"},
	{"token", "print a dev bearer token signed with the data dir's key"},
	{"tenant", "create, list or delete tenants"},
	{"client", "create, list or delete OAuth clients of /oauth2/token"},
	{"load", "load FHIR Bundles and ndjson files into a server"},
	{"export", "export a server's resources as ndjson files with Bulk Data $export"},
	{"migrate", "move a data dir of the previous embedded engine (FerretDB) into the indexed one"},
	{"recover", "list unfinished transactions; retry or abandon those recovery could not apply"},
	{"fhirpath", "evaluate a FHIRPath expression against a JSON or XML resource; prints the result as JSON"},
	{"view", "run SQL on FHIR ViewDefinitions over a server's data; rows as csv, ndjson, json or parquet"},
	{"validate", "validate JSON or XML resources without a server, against the profiles of FHIR packages"},
	{"backup", "back up the embedded database online, with a manifest of checksums"},
	{"restore", "restore a backup into a new data dir, after verifying its checksums"},
	{"check", "check a stopped data dir or a backup: integrity, documents, index entries"},
}

// examples are printed by COMMAND -h after the flags; each is a command
// line a user can paste, with what it does.
var examples = map[string][]string{
	"serve": {
		"fhirstore serve",
		"    embedded database in ./data, tenant demo, http://demo.localhost:8080/fhir/r4",
		"fhirstore serve --addr 127.0.0.1:9090 --data-dir /var/lib/fhirstore",
		"FHIRSTORE_MONGODB_URI='mongodb://db1,db2,db3/?replicaSet=rs0' fhirstore serve --addr :8080 --base-domain fhir.example.com",
		"    production: MongoDB replica set, tenants at https://TENANT.fhir.example.com",
		"fhirstore serve --metrics=false --log-level warn",
	},
	"token": {
		"fhirstore token --data-dir ./data --tenant demo --scope 'system/*.*'",
		"fhirstore token --tenant acme --scope 'user/Patient.rs user/Observation.rs' --ttl 15m",
		"curl -H \"Authorization: Bearer $(fhirstore token --tenant demo)\" http://demo.localhost:8080/fhir/r4/Patient",
	},
	"tenant": {
		"fhirstore tenant create acme --data-dir ./data",
		"fhirstore tenant list --data-dir ./data",
		"fhirstore tenant delete acme --data-dir ./data      # drops all of acme's data",
		"fhirstore tenant list --mongodb-uri 'mongodb://db1,db2,db3/?replicaSet=rs0'",
	},
	"migrate": {
		"fhirstore migrate --data-dir ./data",
		"    copies ./data/db (FerretDB, fhirstore before its indexed engine) into ./data/sqlite; stop the server first",
	},
	"recover": {
		"fhirstore recover --data-dir ./data",
		"    lists every unfinished transaction: state (pending, retrying, quarantined), attempts, resources, last error",
		"fhirstore recover --retry all --data-dir ./data",
		"    applies every committed transaction recovery could not apply; stop the server first on the embedded database",
		"fhirstore recover --abandon 0b9c3c1e-0e6f-4c9e-9d1e-4b1f1f0a2c51 --mongodb-uri 'mongodb://db1,db2,db3/?replicaSet=rs0'",
		"    undoes that committed transaction: its versions leave history, its resources are back at the versions before it",
	},
	"fhirpath": {
		"fhirstore fhirpath --resource patient.json 'Patient.name.given'",
		"    prints the result collection as one JSON array: [\"Peter\",\"James\"]",
		"fhirstore fhirpath --resource observation.xml 'Observation.value.as(Quantity).value > 100'",
		"fhirstore fhirpath \"(@2024-01-31 + 1 month) = @2024-02-29\"",
		"    no resource: the expression has no input",
		"fhirstore fhirpath --lenient --resource patient.json 'Patient.nmae.exists()'",
		"    an element the model does not know is empty instead of an error",
		"    exit status: 0 a result, 1 an evaluation error, 2 a syntax error or bad usage",
	},
	"validate": {
		"fhirstore validate --ig hl7.fhir.us.core-6.1.0.tgz patient.json observations.xml",
		"    checks each resource against R4 and the US Core profiles it claims; prints each issue and a summary",
		"fhirstore validate --ig hl7.fhir.us.core-6.1.0.tgz --profile http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient patient.json",
		"fhirstore validate synthea/output/fhir/*.json",
		"    validates each entry of the Bundles",
		"    exit status: 0 no error, 1 an error in a resource, 2 bad usage or a file that cannot be read",
	},
	"view": {
		"fhirstore view --data-dir ./data patient_names.json",
		"    the rows of tenant demo's Patients at http://localhost:8080/fhir/r4 as CSV on standard output, with a dev token",
		"fhirstore view --url https://acme.fhir.example/fhir/r4 --token \"$TOKEN\" --format parquet --out ./views bp.json visits.json",
		"    ./views/bp.parquet and ./views/visits.parquet, a progress line on standard error",
		"fhirstore view --direct --data-dir ./data --format ndjson --out ./views observations.json",
		"    reads the database of ./data in this process, beside a running server or not",
	},
	"backup": {
		"fhirstore backup --data-dir ./data --out /backup/fhirstore-$(date +%F)",
		"    a consistent copy of every tenant and the system database, while the server keeps serving",
		"fhirstore backup --data-dir ./data --tenant acme --out /backup/acme-$(date +%F)",
		"fhirstore serve --backup-dir /backup --backup-every 24h --backup-keep 7",
		"    the server backs itself up every day and keeps the last seven",
		"    with MongoDB (--mongodb-uri) use mongodump or the cluster's backup instead",
	},
	"restore": {
		"fhirstore restore --from /backup/fhirstore-2025-06-01 --data-dir ./data-restored",
		"fhirstore serve --data-dir ./data-restored",
	},
	"check": {
		"fhirstore check --data-dir /backup/fhirstore-2025-06-01",
		"fhirstore check --full --data-dir ./data     # a stopped server's data dir; every document",
		"    exit status: 0 clean, 1 problems found (one line each), 2 the check could not run",
	},
	"client": {
		"fhirstore client create --data-dir ./data --tenant demo --scope 'system/*.read' --name reporting",
		"    prints client_id and client_secret for POST /oauth2/token (grant_type=client_credentials)",
		"fhirstore client list --data-dir ./data --tenant demo",
		"fhirstore client delete CLIENT_ID --data-dir ./data",
	},
}

// printExamples writes the examples of a command, if it has any.
func printExamples(w io.Writer, cmd string) {
	ex := examples[cmd]
	if len(ex) == 0 {
		return
	}
	fmt.Fprintln(w, "\nexamples:")
	for _, line := range ex {
		fmt.Fprintln(w, "  "+line)
	}
}

// usageError is the one-line answer to a command line the flag package
// refused: what is wrong and where the flags are listed.
func usageError(cmd string, err error) error {
	msg := err.Error()
	hint := fmt.Sprintf("see fhirstore %s -h", cmd)
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		return fmt.Errorf("unknown flag --%s for fhirstore %s (%s for its flags)", name, cmd, hint)
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		return fmt.Errorf("flag --%s needs a value, as in --%s=VALUE (%s)", name, name, hint)
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// errUnknownCommand says which commands exist.
func errUnknownCommand(cmd string) error {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return fmt.Errorf("unknown command %q: want one of %s (see fhirstore help)", cmd, strings.Join(names, ", "))
}

// topUsage is what fhirstore help and fhirstore -h print.
func topUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: fhirstore [COMMAND] [flags]")
	fmt.Fprintln(w, "\nFHIR R4 server for home-health agencies.\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.does)
	}
	fmt.Fprintln(w, "\nfhirstore COMMAND -h lists a command's flags, each with its environment variable, and examples.")
	fmt.Fprintln(w, "\nexamples:")
	fmt.Fprintln(w, "  fhirstore                    # serve on 127.0.0.1:8080 with an embedded database in ./data")
	fmt.Fprintln(w, "  fhirstore load --data-dir ./data testdata/synthea")
	fmt.Fprintln(w, "  fhirstore token --tenant demo")
}
