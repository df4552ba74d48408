// Package store keeps FHIR resources: one database per tenant, the current
// version of each resource in a collection per type, and every version in
// the tenant's history collection. It talks to its database through the
// seam of package engine, on the embedded SQLite engine or on MongoDB.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/document"
	"fhirstore/store/engine"
)

// Errors returned by Store methods; the HTTP layers map them to statuses.
var (
	ErrNotFound           = errors.New("not found")             // 404
	ErrGone               = errors.New("deleted")               // 410
	ErrConflict           = errors.New("version conflict")      // 409
	ErrPreconditionFailed = errors.New("precondition failed")   // 412
	ErrTenantNotFound     = errors.New("tenant not found")      // 404
	ErrTenantExists       = errors.New("tenant already exists") // 409
	ErrUnavailable        = errors.New("database unavailable")  // 503
	ErrInvalidTenant      = errors.New("invalid tenant name")   // 400/404
	ErrInvalidID          = errors.New("invalid resource id")   // 400
	ErrUnknownType        = errors.New("unknown resource type") // 404
	ErrInvalidVersion     = errors.New("invalid version id")    // 404
)

// Issue is one problem found in a resource, in OperationOutcome terms.
type Issue struct {
	Severity    string // error, warning, information
	Code        string // structure, required, value, invalid, ...
	Diagnostics string
	Expression  string // FHIRPath location, e.g. Patient.name[0].given[1]
	// Key and Source name the invariant an issue of code "invariant"
	// reports: its key (per-1) and the canonical URL of the
	// StructureDefinition that defines it.
	Key, Source string
}

// InvalidError rejects a resource. Syntax marks input that is not a usable
// resource at all (400); otherwise the resource is unprocessable (422).
type InvalidError struct {
	Syntax bool
	Issues []Issue
}

func (e *InvalidError) Error() string {
	if len(e.Issues) == 0 {
		return "invalid resource"
	}
	msg := e.Issues[0].Diagnostics
	if e.Issues[0].Expression != "" {
		msg += " at " + e.Issues[0].Expression
	}
	if n := len(e.Issues) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return msg
}

// Validator checks a resource before it is stored; it returns an
// *InvalidError (or nil) and warnings to pass back to the client.
type Validator func(ctx context.Context, in Validation) (warnings []Issue, err error)

// Validation is one resource to check, with what the validator may need of
// the tenant it is written to.
type Validation struct {
	Tenant string
	Type   string
	Body   []byte
	// Resource is Body as encoding/json decodes it with UseNumber (nil
	// when the caller has none): the validator reads it instead of
	// decoding Body again. It is shared: not to be modified.
	Resource map[string]any
	// Lenient accepts unknown elements with a warning.
	Lenient bool
	// Check marks a validation that stores nothing ($validate): it reports
	// every warning, best practices included.
	Check bool
	// Find reads the tenant's current resources of a type that match a
	// search condition (at most two), such as the StructureDefinition of an
	// extension: "url=http://example.org/ext".
	Find func(ctx context.Context, typ, condition string) ([][]byte, error)
	// Profiles are checked besides those the resource claims.
	Profiles []string
	// Definitions are the tenant's conformance resources, for the profiles
	// the resource claims; the zero value knows none.
	Definitions Definitions
	// Bundle is the batch or transaction the resource is an entry of (nil
	// for a write on its own): a reference to another of its entries is
	// checked against the profiles that entry claims.
	Bundle *Bundle
}

// IsResourceType reports whether a type name may be stored.
type IsResourceType func(name string) bool

// Options configure a Store.
type Options struct {
	// DatabasePrefix is prepended to tenant names to form database names.
	DatabasePrefix string
	// MaxDepth bounds JSON nesting in stored resources.
	MaxDepth int
	// ResourceTypes decides which type names exist.
	ResourceTypes IsResourceType
	// Validate, when set, runs on every write before anything is stored.
	Validate Validator
	// Registry, when set, extracts the search index of every stored version.
	Registry *search.Registry
	// EagerIndexTypes get their search indexes when a tenant is created;
	// every other type gets them before its first document is written.
	EagerIndexTypes []string
	// Logger receives store diagnostics.
	Logger *zap.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Monitor, when set, observes every database command (metrics, tests),
	// on any engine.
	Monitor *event.CommandMonitor
	// Exclusive declares that no other process writes the database, so the
	// store may keep search results that only its own writes can change
	// (the criteria of conditional references and creates in bulk loads).
	Exclusive bool
	// Limits, when set, replace the engine's own limits (Engine.Limits):
	// a stricter deployment target, or tests.
	Limits *engine.Limits
	// ReindexBatch is how many rows one step of a re-indexing rewrites
	// (default 500); tests make it small.
	ReindexBatch int
	// Fault, when set, is called at each Fault* point of a transaction
	// commit; an error stops the commit there as a crash would (tests).
	Fault func(point string) error
	// LockTimeout bounds how long a conditional write waits for other
	// ones with the same criteria (default 30s); LockLease is how old a lock
	// must be before it is taken as abandoned by a crashed process (default
	// 2m, longer than any transaction should run).
	LockTimeout, LockLease time.Duration
	// SnapshotLifetime is how long the links of a search page stay valid
	// (default DefaultSnapshotLifetime): later pages show the matches as
	// of the first page, then answer ErrSnapshotExpired.
	SnapshotLifetime time.Duration
	// RecoveryAttempts is how many times recovery tries to apply a
	// committed transaction before it quarantines it (default 5);
	// RecoveryBackoff the wait after the first failure, doubled after
	// each further one up to an hour (default 1s).
	RecoveryAttempts int
	RecoveryBackoff  time.Duration
}

// Store is a handle on the database; it is safe for concurrent use.
type Store struct {
	eng  engine.Engine
	opts Options
	// limits are the engine's refusals known in advance (checkLimits).
	limits engine.Limits
	log    *zap.Logger
	// indexed remembers the "tenant/type" collections whose search
	// indexes this process has ensured.
	indexed sync.Map
	// indexMu serializes index creation: FerretDB fails when two clients
	// create the same index at once.
	indexMu sync.Mutex
	// matches caches condition searches when Options.Exclusive is set.
	matches matchCache
	// live holds the transactions this process is committing; recovery
	// leaves them alone however old they are.
	live sync.Map
	// rolledForward and rolledBack count what recovery has done since
	// Open, failedTotal its failed attempts, quarantinedTotal and
	// abandonedTotal the transactions it gave up and operators undid
	// (metrics).
	rolledForward, rolledBack                     atomic.Int64
	failedTotal, quarantinedTotal, abandonedTotal atomic.Int64
	// held are the resources of committed transactions not yet applied.
	held held
	// outbox, when set, decides which writes announce their changes
	// (outbox.go); probeMu serializes subscription matching.
	outbox  atomic.Pointer[Outbox]
	probeMu sync.Mutex
	// writes are the writes under way in this process (Snapshot waits
	// for those stamped up to its point in time).
	writes inflight
	// batches are Snapshot's row batches, kept with their buffers grown
	// from one snapshot to the next.
	batches sync.Pool
	// bulk admits one large transaction at a time to its preparation
	// (txn.go), which then uses every core.
	bulk chan struct{}
	// bulkWriting counts the large transactions being written.
	bulkWriting atomic.Int32
	// definitions caches each tenant's conformance look-ups by generation
	// (conformance.go).
	definitions sync.Map
	// registries holds each tenant's search registry (searchparams.go);
	// searchIndex runs the re-indexing its changes call for
	// (searchindex.go).
	registries  sync.Map
	searchIndex searchIndexer
}

// Open returns a store on eng, which it owns from then on (Close closes
// it), and checks that the database answers.
func Open(ctx context.Context, eng engine.Engine, opts Options) (*Store, error) {
	if opts.DatabasePrefix == "" {
		opts.DatabasePrefix = "fhirstore_"
	}
	if opts.MaxDepth == 0 {
		opts.MaxDepth = document.DefaultMaxDepth
	}
	if opts.ResourceTypes == nil {
		return nil, errors.New("open store: Options.ResourceTypes is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 30 * time.Second
	}
	if opts.RecoveryAttempts <= 0 {
		opts.RecoveryAttempts = defaultRecoveryAttempts
	}
	if opts.RecoveryBackoff <= 0 {
		opts.RecoveryBackoff = defaultRecoveryBackoff
	}
	if opts.LockLease == 0 {
		opts.LockLease = 2 * time.Minute
	}
	s := &Store{eng: engine.Monitored(eng, opts.Monitor), opts: opts, log: opts.Logger, bulk: make(chan struct{}, 1)}
	if err := s.Ping(ctx); err != nil {
		_ = eng.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if opts.Limits != nil {
		s.limits = *opts.Limits
	} else {
		s.limits = s.eng.Limits(ctx)
	}
	return s, nil
}

// Engine names the database engine under the store ("sqlite", "mongodb").
func (s *Store) Engine() string { return s.eng.Name() }

// Close closes the database engine.
func (s *Store) Close(ctx context.Context) error {
	s.stopSearchIndex()
	if err := s.eng.Close(ctx); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.eng.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// dbError adds op to a database error and marks those that mean the
// database is out of reach (ErrUnavailable).
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, engine.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
