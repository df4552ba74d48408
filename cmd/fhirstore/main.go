// Command fhirstore is a FHIR R4 server for home-health agencies.
//
//	fhirstore [serve] [flags]            run the server (the default)
//	fhirstore token --tenant NAME        print a dev bearer token
//	fhirstore tenant create|list|delete  manage tenants
//	fhirstore client create|list|delete  manage OAuth clients of /oauth2/token
//	fhirstore load [flags] PATH...       load Bundles and ndjson files
//	fhirstore export [flags] --out DIR   export resources with Bulk Data $export
//	fhirstore migrate --data-dir DIR     move a data dir of the previous embedded engine into the indexed one
//	fhirstore recover --list             list, retry or abandon transactions recovery could not apply
//	fhirstore fhirpath EXPRESSION        evaluate a FHIRPath expression, on --resource FILE or no input
//	fhirstore view [flags] VIEW.json     run SQL on FHIR views over a server's data, rows as csv, ndjson, json or parquet
//	fhirstore validate FILE...           validate resources offline, against profiles of --ig packages
//	fhirstore backup --out DIR           back up an embedded data dir while it is served
//	fhirstore restore --from DIR         restore a backup into a new data dir
//	fhirstore check --data-dir DIR       check a stopped data dir or a backup
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fhirstore:", err)
		os.Exit(exitCode(err))
	}
}

// exitError is an error that sets the process's exit status.
type exitError struct {
	code int
	err  error
}

// Error is the message on one line, as main prints it.
func (e *exitError) Error() string { return singleLine(e.err.Error()) }
func (e *exitError) Unwrap() error { return e.err }

// singleLine folds a multi-line message (one quoting an expression with line
// breaks) onto one line.
func singleLine(s string) string { return lineBreaks.Replace(s) }

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// exitCode is the exit status for err: 1 unless it is an *exitError.
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

// run executes one command line; stdout carries the command's output only.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		topUsage(stdout) // the commands first; fhirstore serve -h lists the server's flags
		return flag.ErrHelp
	}
	if cmd == "help" {
		if len(args) == 0 {
			topUsage(stdout)
			return nil
		}
		cmd, args = args[0], []string{"-h"}
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stdout, stderr)
	case "token":
		return token(args, stdout, stderr)
	case "tenant":
		return tenant(ctx, args, stdout, stderr)
	case "load":
		return load(ctx, args, stdout, stderr)
	case "export":
		return exportCmd(ctx, args, stdout, stderr)
	case "client":
		return client(ctx, args, stdout, stderr)
	case "migrate":
		return migrate(ctx, args, stdout, stderr)
	case "recover":
		return recoverCmd(ctx, args, stdout, stderr)
	case "fhirpath":
		return fhirpathCmd(ctx, args, stdout, stderr)
	case "view":
		return viewCmd(ctx, args, stdout, stderr)
	case "validate":
		return validateCmd(ctx, args, stdout, stderr)
	case "backup":
		return backupCmd(ctx, args, stdout, stderr)
	case "restore":
		return restoreCmd(ctx, args, stdout, stderr)
	case "check":
		return checkCmd(ctx, args, stdout, stderr)
	default:
		return errUnknownCommand(cmd)
	}
}
