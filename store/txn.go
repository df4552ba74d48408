package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Op is one write of a transaction.
type Op struct {
	// Method is POST (create), PUT (update or create), PATCH or DELETE.
	Method string
	Type   string
	// ID is the resource a PUT, PATCH or DELETE changes; empty when
	// Condition selects it.
	ID string
	// Condition is a search query (no leading '?'): If-None-Exist for a
	// POST, the conditional target of a PUT, PATCH or DELETE.
	Condition string
	// Body is the resource of a POST or PUT, the JSON Patch of a PATCH.
	Body []byte
	// FullURL names the entry in its Bundle: references to it in the other
	// entries are rewritten to the Type/id it is stored as.
	FullURL string
	// Options are the preconditions (If-Match) and validation handling.
	Options WriteOptions
}

// Outcome says what an Op did.
type Outcome int

// Outcomes of an Op.
const (
	Created  Outcome = iota + 1 // a new resource (201)
	Updated                     // a new version of an existing resource (200)
	Deleted                     // a deletion version (204)
	Existing                    // a conditional create found its match; nothing written (200)
	NoChange                    // a delete found nothing to delete (204)
)

// Result is the outcome of one Op.
type Result struct {
	Outcome Outcome
	// Resource is the version written, the match of a conditional create,
	// or nil for NoChange.
	Resource *Resource
}

// OpError is the failure of one Op, which fails the whole transaction.
type OpError struct {
	Index int
	Err   error
}

func (e *OpError) Error() string { return fmt.Sprintf("entry %d: %v", e.Index, e.Err) }

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// processOrder ranks methods as FHIR processes a transaction: DELETE, then
// POST, then PUT and PATCH.
var processOrder = map[string]int{"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 2}

// txnOp is an Op on its way through Transaction.
type txnOp struct {
	Op
	index  int
	prep   *prepared
	cur    *storedDoc
	result Result
	write  *version
}

func (o *txnOp) fail(err error) error { return &OpError{Index: o.index, Err: err} }

func (o *txnOp) key() string { return o.Type + "/" + o.ID }

// txn is one Transaction call.
type txn struct {
	s      *Store
	tenant string
	ops    []*txnOp // in processing order
	// refs maps fullUrls to the Type/id they are stored as.
	refs map[string]string
	// resolved caches conditional references (Type?query → Type/id);
	// resolving holds its lock, so that every entry of the transaction
	// sees one answer.
	resolving sync.Mutex
	resolved  map[string]string
	// hints are a batch's prefetched condition matches (nil outside Batch).
	hints *conditionHints
	// bundle holds the resources of every entry of the batch or
	// transaction, for the validation of references between them.
	bundle *Bundle
	// turn ends the transaction's turn of preparation (admit); nil when
	// it took none.
	turn func()
}

// Transaction applies ops all or nothing: conditions are resolved through
// search, references between entries rewritten, every resource validated,
// and the versions committed through the journal (see journal.go). Any
// failure is an *OpError naming the op; nothing is stored then.
func (s *Store) Transaction(ctx context.Context, tenant string, ops []Op) ([]Result, error) {
	return s.transaction(ctx, tenant, ops, nil, bundleOf(ops))
}

func (s *Store) transaction(ctx context.Context, tenant string, ops []Op, hints *conditionHints, bundle *Bundle) ([]Result, error) {
	t := &txn{s: s, tenant: tenant, refs: map[string]string{}, resolved: map[string]string{}, hints: hints, bundle: bundle}
	for i, op := range ops {
		t.ops = append(t.ops, &txnOp{Op: op, index: i})
	}
	sort.SliceStable(t.ops, func(i, j int) bool { return processOrder[t.ops[i].Method] < processOrder[t.ops[j].Method] })
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := t.matchExisting(ctx); err != nil {
		return nil, err
	}
	unlock, err := t.lockConditions(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := t.admit(ctx); err != nil {
		return nil, err
	}
	defer t.finished()
	defer t.started()
	defer s.beginWrite()()
	for _, step := range []func(context.Context) error{t.resolve, t.loadCurrent, t.prefetchReferences, t.prepare, t.plan, t.commit} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	results := make([]Result, len(ops))
	for _, o := range t.ops {
		results[o.index] = o.result
		if o.write != nil {
			t.hints.observe(s, tenant, o.write)
		}
	}
	return results, nil
}

// bulkOps is the size from which a transaction is large: large ones are
// prepared one at a time.
const bulkOps = 64

// admit waits for a large transaction's turn of preparation. Large
// transactions are prepared in turn, each on every core (eachOp), and
// hold their turn until the database starts writing them (started):
// several arriving together (a loader's Bundles) then reach the single
// writer one after another, each written while the next is prepared,
// rather than all at once after sharing the cores, which left the writer
// idle and then busy alone, and held every Bundle's rows in memory at
// once. A transaction waiting for its turn is not yet a write under way
// (beginWrite): searches and exports do not wait for it.
func (t *txn) admit(ctx context.Context) error {
	if len(t.ops) < bulkOps {
		return nil
	}
	select {
	case t.s.bulk <- struct{}{}:
		t.turn = sync.OnceFunc(func() {
			<-t.s.bulk
			t.s.bulkWriting.Add(1)
		})
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// started tells that the transaction's writes have begun: its turn of
// preparation, if it took one, is over.
func (t *txn) started() {
	if t.turn != nil {
		t.turn()
	}
}

// finished tells that the transaction's writes, if it took a turn of
// preparation, are over.
func (t *txn) finished() {
	if t.turn != nil {
		t.s.bulkWriting.Add(-1)
	}
}

// check rejects ops that cannot be processed at all.
func (t *txn) check() error {
	fullURLs := map[string]bool{}
	for _, o := range t.ops {
		if _, ok := processOrder[o.Method]; !ok {
			return o.fail(invalid(fmt.Sprintf("method %q cannot change a resource", o.Method), "request.method"))
		}
		if err := t.s.checkType(o.Type); err != nil {
			return o.fail(err)
		}
		if o.ID != "" {
			if err := ValidateID(o.ID); err != nil {
				return o.fail(err)
			}
		}
		if o.ID == "" && o.Condition == "" && o.Method != "POST" {
			return o.fail(invalid(o.Method+" needs an id or search criteria", "request.url"))
		}
		if o.FullURL == "" {
			continue
		}
		if fullURLs[o.FullURL] {
			return o.fail(invalid(fmt.Sprintf("fullUrl %s is also the fullUrl of another entry", o.FullURL), "fullUrl"))
		}
		fullURLs[o.FullURL] = true
	}
	return nil
}

// invalid is a 400 for a malformed op.
func invalid(msg, expr string) *InvalidError {
	return syntaxIssue("invalid", msg, expr)
}

// resolve fixes the id every op works on: conditions through search, new
// ids for creates; it maps fullUrls and rejects two ops on one resource.
func (t *txn) resolve(ctx context.Context) error {
	targets := map[string]bool{}
	for _, o := range t.ops {
		if err := t.resolveOne(ctx, o); err != nil {
			return o.fail(err)
		}
		if o.ID == "" { // a conditional delete that matched nothing
			continue
		}
		if targets[o.key()] {
			return o.fail(invalid(fmt.Sprintf("another entry changes %s too; a transaction changes each resource once", o.key()), "request.url"))
		}
		targets[o.key()] = true
		if o.FullURL != "" {
			t.refs[o.FullURL] = o.key()
		}
	}
	return nil
}

func (t *txn) resolveOne(ctx context.Context, o *txnOp) error {
	if o.result.Outcome == Existing { // matched before the locks (matchExisting)
		return nil
	}
	if o.Condition == "" {
		if o.Method == "POST" {
			o.ID = uuid.NewString()
		}
		return nil
	}
	matches, err := t.match(ctx, o)
	if err != nil {
		return err
	}
	if len(matches) > 1 {
		return fmt.Errorf("%w: the criteria %s?%s match more than one resource", ErrPreconditionFailed, o.Type, o.Condition)
	}
	switch o.Method {
	case "POST":
		if len(matches) == 1 {
			o.ID, o.result = matches[0].ID, Result{Outcome: Existing, Resource: matches[0]}
			return nil
		}
		o.ID = uuid.NewString()
	case "PUT":
		bodyID := peekID(o.Body)
		if len(matches) == 1 {
			if bodyID != "" && bodyID != matches[0].ID {
				return syntaxIssue("invalid", fmt.Sprintf("id %q in the body is not the id %q the criteria match", bodyID, matches[0].ID), o.Type+".id")
			}
			o.ID = matches[0].ID
			return nil
		}
		o.ID = bodyID
		if o.ID == "" {
			o.ID = uuid.NewString()
		}
		return ValidateID(o.ID)
	case "PATCH":
		if len(matches) == 0 {
			return fmt.Errorf("%w: no %s matches %s", ErrNotFound, o.Type, o.Condition)
		}
		o.ID = matches[0].ID
	case "DELETE":
		if len(matches) == 0 {
			o.result = Result{Outcome: NoChange}
			return nil
		}
		o.ID = matches[0].ID
	}
	return nil
}

// match lists the current resources o's condition matches.
func (t *txn) match(ctx context.Context, o *txnOp) ([]*Resource, error) {
	if matches, ok := t.hints.lookup(t.s, t.tenant, o.Type, o.Condition); ok {
		return matches, nil
	}
	return t.s.matchCondition(ctx, t.tenant, o.Type, o.Condition)
}

// matchExisting settles the conditional creates whose criteria already
// match one resource: they write nothing, so they need no criteria lock
// (a lock is two writes), and what a concurrent writer does afterwards
// cannot change their outcome. The others are resolved under the locks.
func (t *txn) matchExisting(ctx context.Context) error {
	for _, o := range t.ops {
		if o.Method != "POST" || o.Condition == "" {
			continue
		}
		matches, err := t.match(ctx, o)
		if err != nil {
			return o.fail(err)
		}
		if len(matches) == 1 {
			o.ID, o.result = matches[0].ID, Result{Outcome: Existing, Resource: matches[0]}
		}
	}
	return nil
}

// loadCurrent reads the current rows of every op that changes an existing
// resource, one query per type, and checks If-Match.
func (t *txn) loadCurrent(ctx context.Context) error {
	ids := map[string][]string{}
	for _, o := range t.ops {
		if o.ID != "" && o.result.Outcome == 0 && o.Method != "POST" {
			ids[o.Type] = append(ids[o.Type], o.ID)
		}
	}
	current := map[string]*storedDoc{}
	for typ, list := range ids {
		docs, err := t.s.currentRows(ctx, t.tenant, typ, list)
		if err != nil {
			return err
		}
		for _, d := range docs {
			current[typ+"/"+d.ID] = d
		}
	}
	for _, o := range t.ops {
		if o.Method == "POST" || o.ID == "" || o.result.Outcome != 0 {
			continue
		}
		if err := t.s.checkHeld(t.tenant, o.Type, o.ID); err != nil {
			return o.fail(err)
		}
		o.cur = current[o.key()]
		if err := t.checkCurrent(o); err != nil {
			return o.fail(err)
		}
	}
	return nil
}

func (t *txn) checkCurrent(o *txnOp) error {
	if err := checkIfMatch(o.Options, o.cur); err != nil {
		return err
	}
	gone := o.cur == nil || o.cur.Deleted
	switch {
	case o.Method == "PATCH" && o.cur == nil:
		return fmt.Errorf("%s: %w", o.key(), ErrNotFound)
	case o.Method == "PATCH" && gone:
		return fmt.Errorf("%s: %w", o.key(), ErrGone)
	case o.Method == "DELETE" && gone: // deleting what is not there succeeds, writing nothing
		o.result = Result{Outcome: NoChange}
	}
	return nil
}

// currentRows reads the current rows of ids of one type.
func (s *Store) currentRows(ctx context.Context, tenant, typ string, ids []string) ([]*storedDoc, error) {
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
	noIndex := &engine.FindOptions{Projection: bson.D{{Key: "idx", Value: 0}, {Key: "sort", Value: 0}}}
	cur, err := s.tenantDB(tenant).Collection(typ).Find(ctx, filter, noIndex)
	if err != nil {
		return nil, dbError("find current versions", err)
	}
	var docs []*storedDoc
	if err := engine.All(ctx, cur, &docs); err != nil {
		return nil, dbError("find current versions", err)
	}
	return docs, nil
}

// prepare parses, patches and validates each body and rewrites its
// references to other entries and its conditional references.
// The entries are prepared on several goroutines; the first to fail in
// processing order fails the transaction.
func (t *txn) prepare(ctx context.Context) error {
	ctx = withGenerationMemo(ctx)
	return t.eachOp(func(o *txnOp) error {
		if o.result.Outcome != 0 || o.Method == "DELETE" {
			return nil
		}
		return t.prepareOne(ctx, o)
	})
}

// eachOp calls fn for every op, on up to GOMAXPROCS goroutines for many,
// and returns the failure of the first op in processing order.
func (t *txn) eachOp(fn func(o *txnOp) error) error {
	errs := make([]error, len(t.ops))
	if t.turn != nil {
		t.s.yielding(len(t.ops), func(i int) { errs[i] = fn(t.ops[i]) })
	} else {
		inParallel(len(t.ops), func(i int) { errs[i] = fn(t.ops[i]) })
	}
	for i, err := range errs {
		if err != nil {
			return t.ops[i].fail(err)
		}
	}
	return nil
}

func (t *txn) prepareOne(ctx context.Context, o *txnOp) error {
	body, checkID := o.Body, o.ID
	switch {
	case o.Method == "POST":
		checkID = ""
	case o.Method == "PATCH":
		patched, err := t.s.applyPatch(o.Type, o.cur, o.Body)
		if err != nil {
			return err
		}
		body = patched
	case o.Condition != "" && peekID(o.Body) == "":
		checkID = "" // a conditional update may leave the id out
	}
	opts := o.Options
	opts.bundle = t.bundle
	p, err := t.s.prepare(ctx, t.tenant, o.Type, checkID, body, opts, false)
	if err != nil {
		return err
	}
	o.prep = p
	return t.rewriteReferences(ctx, p)
}

// plan builds the versions to write, all stamped with one instant.
func (t *txn) plan(context.Context) error {
	ts := t.s.now()
	return t.eachOp(func(o *txnOp) error {
		if o.result.Outcome != 0 {
			return nil
		}
		in := o.prep
		if o.Method == "DELETE" {
			in = &prepared{typ: o.Type}
		}
		v, err := t.s.buildVersion(in, o.ID, o.cur, methodOf(o), ts, o.Options.Guard)
		if err != nil {
			return err
		}
		o.write = v
		o.result = Result{Outcome: outcomeOf(o), Resource: v.res}
		return nil
	})
}

// methodOf is the history method of an op: PATCH is stored as PUT.
func methodOf(o *txnOp) string {
	if o.Method == "PATCH" {
		return "PUT"
	}
	return o.Method
}

func outcomeOf(o *txnOp) Outcome {
	switch {
	case o.Method == "DELETE":
		return Deleted
	case o.cur == nil:
		return Created
	default:
		return Updated
	}
}

// commit stores the planned versions: one directly, several through the
// journal.
func (t *txn) commit(ctx context.Context) error {
	var versions []*version
	var exists []bool
	var owner []int
	for _, o := range t.ops {
		if o.write == nil {
			continue
		}
		if err := t.s.ensureSearchIndexes(ctx, t.tenant, o.Type); err != nil {
			return err
		}
		versions = append(versions, o.write)
		exists = append(exists, o.cur != nil)
		owner = append(owner, o.index)
	}
	if len(versions) == 0 {
		return nil
	}
	recorded, err := t.s.recordChanges(ctx, t.tenant, versions)
	if err != nil {
		return err
	}
	defer recorded()
	if len(versions) == 1 {
		if err := t.s.writeOne(ctx, t.tenant, versions[0], exists[0], nil); err != nil {
			return &OpError{Index: owner[0], Err: err}
		}
	} else if err := t.s.commitJournal(ctx, t.tenant, versions, exists, owner, t.started); err != nil {
		return err
	}
	t.s.recheckIndex(ctx, t.tenant, versions)
	return nil
}

// peekID is the id element of a JSON resource, "" if absent or unreadable.
func peekID(body []byte) string {
	var r struct {
		ID any `json:"id"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return ""
	}
	id, _ := r.ID.(string)
	return id
}
