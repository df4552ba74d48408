// Package bulkexport runs FHIR Bulk Data exports ($export, Bulk Data
// Access IG v2): durable jobs kept in the tenant's database, each writing a
// consistent snapshot of the selected resources as ndjson files, one type
// per file and split at a configurable size. The HTTP interface (kick-off,
// status, files) lives in package server; this package owns the jobs.
package bulkexport

import (
	"errors"
	"fmt"
	"time"
)

// Job states. A job is accepted, then running, then completed or failed;
// a cancelled or expired job is deleted with its files.
const (
	StateAccepted  = "accepted"
	StateRunning   = "running"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// Export levels: the whole system, every patient, or a group's patients.
const (
	LevelSystem  = "system"
	LevelPatient = "patient"
	LevelGroup   = "group"
)

// Errors of Manager methods; the HTTP layer maps them to statuses.
var (
	// ErrTooManyJobs: the tenant already runs its maximum of jobs (429).
	ErrTooManyJobs = errors.New("too many export jobs running")
	// ErrNotFound: no such job, or it expired or was cancelled (404).
	ErrNotFound = errors.New("export job not found")
)

// ParamError rejects a kick-off parameter (400, with the parameter as the
// issue's expression).
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Msg }

func paramError(param, format string, args ...any) *ParamError {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Request is a validated kick-off: what to export.
type Request struct {
	// URL is the kick-off request as the client sent it (the manifest's request).
	URL   string
	Level string
	// Group is the Group id of a group-level export.
	Group string
	// Patients limits a patient-level export to these Patient ids.
	Patients []string
	// Types are the resource types to export, in order.
	Types []string
	// Since keeps the resources written at or after it.
	Since *time.Time
	// TypeFilters are the _typeFilter search queries per type ("Type?query").
	TypeFilters []string
	// Elements are the _elements to keep ("element" or "Type.element").
	Elements []string
	// Notes are issues to report in the error files (types left out, ignored
	// parameters), as OperationOutcome diagnostics.
	Notes []string
	// Views, when set, make the job a $viewdefinition-export: a file set per
	// view, of its rows in Format, in place of resources (Types[i] is the
	// resource type Views[i] reads).
	Views []View
	// Format is json, ndjson, csv or parquet (package view); NoHeader
	// leaves out the header row of CSV.
	Format   string
	NoHeader bool
}

// View is one view of a $viewdefinition-export.
type View struct {
	// Name names the view's files and its entry in the manifest.
	Name string `bson:"name"`
	// Definition is the ViewDefinition, JSON.
	Definition string `bson:"definition"`
}

// File is one finished output file.
type File struct {
	Type string `bson:"type"`
	// View is the view whose rows the file holds, in a view export.
	View  string `bson:"view,omitempty"`
	Name  string `bson:"name"`
	Count int64  `bson:"count"`
	// synced delivers the outcome of syncing a file just written (finalize).
	synced <-chan error
}

// Cursor is where a job stands: the types before Type are done, the
// resources of Type up to After are in finished files, Part numbers the
// next file of Type.
type Cursor struct {
	Type  int    `bson:"type"`
	After string `bson:"after"`
	Part  int    `bson:"part"`
}

// Job is the durable state of one export, stored in the tenant's database.
type Job struct {
	ID              string     `bson:"_id"`
	State           string     `bson:"state"`
	Request         string     `bson:"request"`
	Level           string     `bson:"level"`
	Group           string     `bson:"group,omitempty"`
	Patients        []string   `bson:"patients,omitempty"`
	Types           []string   `bson:"types"`
	Since           *time.Time `bson:"since,omitempty"`
	TypeFilters     []string   `bson:"typeFilters,omitempty"`
	Elements        []string   `bson:"elements,omitempty"`
	Notes           []string   `bson:"notes,omitempty"`
	Views           []View     `bson:"views,omitempty"`
	Format          string     `bson:"format,omitempty"`
	NoHeader        bool       `bson:"noHeader,omitempty"`
	TransactionTime time.Time  `bson:"transactionTime"`
	CreatedAt       time.Time  `bson:"createdAt"`
	Heartbeat       time.Time  `bson:"heartbeat"`
	ExpiresAt       time.Time  `bson:"expiresAt"`
	Owner           string     `bson:"owner"`
	Attempts        int        `bson:"attempts"`
	Cursor          Cursor     `bson:"cursor"`
	// Exported counts the resources in finished files.
	Exported int64  `bson:"exported"`
	Output   []File `bson:"output"`
	Errors   []File `bson:"errors"`
	Failure  string `bson:"failure,omitempty"`
}

// Active tells whether the job still has work to do.
func (j *Job) Active() bool { return j.State == StateAccepted || j.State == StateRunning }

// Progress describes a running job for the X-Progress header.
func (j *Job) Progress() string {
	if j.State == StateAccepted {
		return "accepted, waiting to start"
	}
	n := len(j.Types)
	if j.Cursor.Type >= n {
		return fmt.Sprintf("writing the manifest, %d resources exported", j.Exported)
	}
	return fmt.Sprintf("exporting %s (type %d of %d), %d resources exported", j.Types[j.Cursor.Type], j.Cursor.Type+1, n, j.Exported)
}
