// Package store keeps FHIR resources in MongoDB: one database per tenant, the
// current version of each resource in a collection per type, and every version
// in the tenant's history collection.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/document"
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
// *InvalidError (or nil) and warnings to pass back to the client. Lenient
// validation accepts unknown elements with a warning.
type Validator func(ctx context.Context, resourceType string, body []byte, lenient bool) (warnings []Issue, err error)

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
	// SkipSearchIndexes leaves out the indexes on the idx.* search fields.
	// The embedded engine answers every query with a scan and never uses
	// them; there they would only slow down each write.
	SkipSearchIndexes bool
	// Logger receives store diagnostics.
	Logger *zap.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// ServerSelectionTimeout bounds how long an operation waits for a
	// reachable database (default 5s).
	ServerSelectionTimeout time.Duration
	// Monitor, when set, observes every database command (metrics, tests).
	Monitor *event.CommandMonitor
	// Exclusive declares that no other process writes the database, so the
	// store may keep search results that only its own writes can change
	// (the criteria of conditional references and creates in bulk loads).
	Exclusive bool
	// Fault, when set, is called at each Fault* point of a transaction
	// commit; an error stops the commit there as a crash would (tests).
	Fault func(point string) error
	// LockTimeout bounds how long a conditional write waits for other
	// ones with the same criteria (default 30s); LockLease is how old a lock
	// must be before it is taken as abandoned by a crashed process (default
	// 2m, longer than any transaction should run).
	LockTimeout, LockLease time.Duration
}

// Store is a handle on the database; it is safe for concurrent use.
type Store struct {
	client *mongo.Client
	opts   Options
	log    *zap.Logger
	// indexed remembers the "tenant/type" collections whose search
	// indexes this process has ensured.
	indexed sync.Map
	// indexMu serializes index creation: the embedded engine fails when two
	// clients create the same index at once.
	indexMu sync.Mutex
	// matches caches condition searches when Options.Exclusive is set.
	matches matchCache
	// live holds the transactions this process is committing; recovery
	// leaves them alone however old they are.
	live sync.Map
	// rolledForward and rolledBack count what recovery has done since
	// Open (metrics).
	rolledForward, rolledBack atomic.Int64
}

// Open connects to the MongoDB at uri and checks it answers.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
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
	if opts.LockLease == 0 {
		opts.LockLease = 2 * time.Minute
	}
	if opts.ServerSelectionTimeout == 0 {
		opts.ServerSelectionTimeout = 5 * time.Second
	}
	clientOpts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(opts.ServerSelectionTimeout).
		SetConnectTimeout(opts.ServerSelectionTimeout).
		SetAppName("fhirstore")
	if opts.Monitor != nil {
		clientOpts.SetMonitor(opts.Monitor)
	}
	client, err := mongo.Connect(clientOpts)
	if err != nil {
		return nil, fmt.Errorf("connect to MongoDB: %w", err)
	}
	s := &Store{client: client, opts: opts, log: opts.Logger}
	if err := s.Ping(ctx); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := s.ensureSystem(ctx); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// Close disconnects from the database.
func (s *Store) Close(ctx context.Context) error {
	if err := s.client.Disconnect(ctx); err != nil {
		return fmt.Errorf("disconnect from MongoDB: %w", err)
	}
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx, readpref.Primary()); err != nil {
		return fmt.Errorf("ping MongoDB: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// dbError marks driver errors that mean the database is out of reach.
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.Is(err, mongo.ErrClientDisconnected) ||
		isServerSelection(err) || isPoolCleared(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isServerSelection(err error) bool {
	var se mongo.ServerError
	if errors.As(err, &se) {
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "server selection error")
}

// isPoolCleared tells whether the driver refused an operation because a
// network error on another connection cleared the pool: the database is out
// of reach as surely as for a network error of its own.
func isPoolCleared(err error) bool {
	var pe driver.RetryablePoolError
	return errors.As(err, &pe) && pe.Retryable()
}
