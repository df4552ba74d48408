package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Word lists. A path named in Options.WordPaths holds a document's words
// (a full-text index of the document, such as FHIR's _content): many
// strings per document, searched by equality and prefix only. Its
// strings are kept in a full-text table of the collection, not as x_C
// entries:
//
//	"w_C" USING fts5(t, content='', contentless_delete=1, detail=none)
//
// one row per document with words (rowid = rid), t its words as tokens.
// FTS5 collects a transaction's tokens in memory and writes them as one
// sorted segment, merged with the others in the background of later
// writes; x_C's B-tree takes each entry where its key falls, which for a
// document's dozens of words means dozens of pages written. Any other
// value at a word path (null, an empty array) stays an x_C entry. Filters
// on a word path may ask for equality ($eq, $in, $ne, $nin), an anchored
// prefix and $exists; comparisons, substrings and sorts are refused with
// engine.ErrUnsupported. The file's table "_words" records the paths its
// word tables hold; a file opened with other word paths is converted
// (syncWords).

// wordsTable lists the word paths of the file's w tables.
const wordsTable = `"_words"`

// maxWordBytes is the longest string a word path takes: longer ones fail
// the write. Words are short; a token is up to three times as long as its
// word, and FTS5 compares and stores whole terms.
const maxWordBytes = 1000

// wordPaths are the engine's word paths, each with the tag starting its
// tokens (its position in the sorted list, then "_").
type wordPaths struct {
	paths []string
	tags  map[string]string
}

// newWordPaths checks and indexes the word paths of Options.
func newWordPaths(paths []string) (*wordPaths, error) {
	ws := &wordPaths{paths: slices.Sorted(slices.Values(paths)), tags: map[string]string{}}
	ws.paths = slices.Compact(ws.paths)
	for i, p := range ws.paths {
		if err := checkPath(p); err != nil || p == "_id" || strings.Contains(p, "\x00") {
			return nil, fmt.Errorf("word path %q: not a path with index entries: %w", p, engine.ErrUnsupported)
		}
		ws.tags[p] = strconv.Itoa(i) + "_"
	}
	return ws, nil
}

// any tells whether there are word paths.
func (ws *wordPaths) any() bool { return len(ws.paths) > 0 }

// isWord tells whether e goes to the word table: a string at a word path.
func (ws *wordPaths) isWord(e entry) bool {
	if _, ok := e.v.(string); !ok {
		return false
	}
	_, ok := ws.tags[e.f]
	return ok
}

// split separates the word entries of entries (sorted) from those x_C
// holds: the others, but those only a row keeps (rowkeys.go).
func (ws *wordPaths) split(entries []entry) (rest, words []entry) {
	if !slices.ContainsFunc(entries, func(e entry) bool { return ws.isWord(e) || rowOnly(e.f) }) {
		return entries, nil
	}
	for _, e := range entries {
		switch {
		case ws.isWord(e):
			words = append(words, e)
		case !rowOnly(e.f):
			rest = append(rest, e)
		}
	}
	return rest, words
}

// text is the word table's text of a document's word entries: their
// tokens separated by spaces.
func (ws *wordPaths) text(words []entry) (string, error) {
	var b strings.Builder
	for i, e := range words {
		s := e.v.(string)
		if len(s) > maxWordBytes {
			return "", fmt.Errorf("%s: a word of %d bytes (at most %d): %w", e.f, len(s), maxWordBytes, engine.ErrUnsupported)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ws.tags[e.f])
		escapeWord(&b, s)
	}
	return b.String(), nil
}

// escapeWord writes s as the rest of one token of FTS5's ascii tokenizer
// (with "_" a token character): lower-case ASCII letters and digits as
// they are, every other byte as "_" and two hex digits. A prefix of s is
// written as a prefix of s's token, so that prefix queries carry over.
func escapeWord(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

// wordExpr holds when the document's words at path include one equal to
// one of the condition's values (opEq, opIn) or one starting with its
// value (opPrefix); match is the FTS5 query saying so.
type wordExpr struct {
	path  string
	op    op
	match string
}

// rewrite turns x's conditions on word paths into wordExprs, refusing
// those the word table cannot answer.
func (ws *wordPaths) rewrite(x expr) (expr, error) {
	if !ws.any() {
		return x, nil
	}
	switch y := x.(type) {
	case *fieldExpr:
		if _, ok := ws.tags[y.path]; !ok {
			return x, nil
		}
		return ws.wordCond(y)
	case notExpr:
		k, err := ws.rewrite(y.x)
		return notExpr{k}, err
	case andExpr:
		kids, err := ws.rewriteAll(y)
		return andExpr(kids), err
	case orExpr:
		kids, err := ws.rewriteAll(y)
		return orExpr(kids), err
	}
	return x, nil
}

func (ws *wordPaths) rewriteAll(xs []expr) ([]expr, error) {
	out := make([]expr, len(xs))
	for i, k := range xs {
		var err error
		if out[i], err = ws.rewrite(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wordCond is the condition on a word path fe becomes: equality with
// strings and prefixes ask the word table; a null or other non-string is
// an x_C entry there, so conditions on those stay as they are; a value
// ($exists, or a scalar) is either.
func (ws *wordPaths) wordCond(fe *fieldExpr) (expr, error) {
	switch {
	case fe.op == opNull || (fe.op == opEq || fe.op == opIn) && fe.kind != kindString:
		return fe, nil
	case fe.op == opExists || fe.op == opScalar:
		anyWord, err := ws.wordCond(&fieldExpr{path: fe.path, op: opPrefix, kind: kindString, vals: []any{""}})
		return orExpr{fe, anyWord}, err
	case fe.op != opEq && fe.op != opIn && fe.op != opPrefix:
		return nil, fmt.Errorf("%s holds words: only equality with strings and prefixes can be asked of it: %w", fe.path, engine.ErrUnsupported)
	}
	var b strings.Builder
	for i, v := range fe.vals {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString(`"` + ws.tags[fe.path])
		escapeWord(&b, v.(string))
		b.WriteString(`"`)
		if fe.op == opPrefix {
			b.WriteString("*")
		}
	}
	return &wordExpr{path: fe.path, op: fe.op, match: b.String()}, nil
}

// compile translates a filter on the collection, its conditions on word
// paths into wordExprs.
func (c *collection) compile(filter bson.D) (expr, error) {
	x, err := compileFilter(filter)
	if err != nil {
		return nil, err
	}
	if x, err = c.e.words.rewrite(x); err != nil {
		return nil, fmt.Errorf("filter %v: %w", filter, err)
	}
	return x, nil
}

// checkSort refuses sorting by a word path.
func (ws *wordPaths) checkSort(keys []sortKey) error {
	for _, k := range keys {
		if _, ok := ws.tags[k.path]; ok {
			return fmt.Errorf("sort by %s, which holds words: %w", k.path, engine.ErrUnsupported)
		}
	}
	return nil
}

// wordRids writes a SELECT of the rids whose words satisfy we. Its LIMIT
// keeps SQLite from pushing the conditions of an enclosing query into it:
// given a disjunction of rid lookups there, it would plan the word table
// by those instead of by MATCH, which then fails ("unable to use function
// MATCH in the requested context").
func (p *planner) wordRids(b *builder, we *wordExpr) {
	b.WriteString("SELECT rowid AS rid FROM " + p.n.w + " WHERE " + p.n.w + " MATCH ")
	b.arg(we.match)
	b.WriteString(" LIMIT -1")
}

// createWordTable is the statement creating a collection's word table.
func createWordTable(n names) string {
	return "CREATE VIRTUAL TABLE IF NOT EXISTS " + n.w + " USING fts5(t, content='', contentless_delete=1, detail=none, tokenize=\"ascii tokenchars '_'\")"
}

// putWords adds the word row of document rid, text (none when empty).
func putWords(ctx context.Context, w *conn, n names, rid int64, text string) error {
	if text == "" {
		return nil
	}
	if _, err := w.exec(ctx, "INSERT INTO "+n.w+" (rowid, t) VALUES (?, ?)", rid, text); err != nil {
		return fmt.Errorf("insert words: %w", err)
	}
	return nil
}

// dropWords deletes the word row of document rid when it had words.
func dropWords(ctx context.Context, w *conn, n names, rid int64, had []entry) error {
	if len(had) == 0 {
		return nil
	}
	if _, err := w.exec(ctx, "DELETE FROM "+n.w+" WHERE rowid = ?", rid); err != nil {
		return fmt.Errorf("delete words: %w", err)
	}
	return nil
}

// syncWords makes the file's word tables hold the engine's word paths:
// when the file recorded others (or none, being older), every collection
// is indexed again at the word paths before and after, from its
// documents. It returns how many collections it converted.
func syncWords(ctx context.Context, w *conn, ws *wordPaths, cd *codec) (int, error) {
	if err := w.run(ctx, createWordsTable); err != nil {
		return 0, fmt.Errorf("create %s: %w", wordsTable, err)
	}
	had, err := queryStrings(ctx, w, "SELECT path FROM "+wordsTable+" ORDER BY path")
	if err != nil {
		return 0, fmt.Errorf("read the word paths: %w", err)
	}
	if slices.Equal(had, ws.paths) {
		return 0, nil
	}
	colls, err := queryStrings(ctx, w, "SELECT substr(name, 3) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'd\\_%' ESCAPE '\\' ORDER BY name")
	if err != nil {
		return 0, fmt.Errorf("list the collections: %w", err)
	}
	involved := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(had), ws.paths...))))
	for _, coll := range colls {
		if err := reindexWords(ctx, w, namesOf(coll), ws, involved, cd); err != nil {
			return 0, fmt.Errorf("index the words of %s: %w", coll, err)
		}
	}
	if err := w.run(ctx, "DELETE FROM "+wordsTable); err != nil {
		return 0, fmt.Errorf("record the word paths: %w", err)
	}
	for _, p := range ws.paths {
		if _, err := w.exec(ctx, "INSERT INTO "+wordsTable+" (path) VALUES (?)", p); err != nil {
			return 0, fmt.Errorf("record the word paths: %w", err)
		}
	}
	return len(colls), nil
}

// syncWords runs syncWords in a write transaction when the file's word
// paths are not ws's.
func (f *file) syncWords(ctx context.Context, ws *wordPaths) (int, error) {
	had, err := queryStrings(ctx, f.w, "SELECT path FROM "+wordsTable+" ORDER BY path")
	if err == nil && slices.Equal(had, ws.paths) {
		return 0, nil
	}
	var n int
	err = f.write(ctx, func(ctx context.Context, w *conn) (err error) {
		n, err = syncWords(ctx, w, ws, f.codec)
		return err
	})
	return n, err
}

// createWordsTable is the statement creating wordsTable.
const createWordsTable = "CREATE TABLE IF NOT EXISTS " + wordsTable + " (path TEXT PRIMARY KEY) WITHOUT ROWID"

// reindexBatch is how many documents reindexWords reads at a time.
const reindexBatch = 500

// reindexWords rebuilds a collection's word table, and its x_C entries at
// the paths involved (the word paths before and after), from its
// documents; a collection whose documents hold no string at those paths
// only gets an empty word table.
func reindexWords(ctx context.Context, w *conn, n names, ws *wordPaths, involved []string, cd *codec) error {
	stmts := []string{"DROP TABLE IF EXISTS " + n.w}
	if ws.any() {
		stmts = append(stmts, createWordTable(n))
	}
	for _, s := range stmts {
		if err := w.run(ctx, s); err != nil {
			return err
		}
	}
	if held, err := holdsScalars(ctx, w, n, involved); err != nil || !held {
		return err
	}
	for _, p := range involved {
		if _, err := w.exec(ctx, "DELETE FROM "+n.x+" WHERE f = (SELECT id FROM "+fieldsTable+" WHERE path = ?)", p); err != nil {
			return err
		}
	}
	pending := &entryRows{n: n}
	for after := int64(-1 << 63); ; {
		docs, err := readDocs(ctx, w, n, after, cd)
		if err != nil || len(docs) == 0 {
			return errors.Join(err, pending.flush(ctx, w))
		}
		for _, d := range docs {
			entries, err := docEntries(d.doc)
			if err != nil {
				return err
			}
			rest, words := ws.split(entries)
			rest = slices.DeleteFunc(slices.Clone(rest), func(e entry) bool { return !slices.Contains(involved, e.f) })
			if err := pending.add(ctx, w, d.rid, rest); err != nil {
				return err
			}
			text, err := ws.text(words)
			if err != nil {
				return err
			}
			if err := putWords(ctx, w, n, d.rid, text); err != nil {
				return err
			}
		}
		after = docs[len(docs)-1].rid
	}
}

// holdsScalars tells whether a document of the collection holds a scalar
// at one of paths, from the path counts.
func holdsScalars(ctx context.Context, w *conn, n names, paths []string) (bool, error) {
	if err := w.settlePaths(ctx); err != nil {
		return false, err
	}
	var b builder
	b.WriteString("SELECT coalesce(sum(n), 0) FROM " + pathsTable + " WHERE c = ")
	b.arg(n.coll)
	b.WriteString(" AND f IN ")
	b.list(toAny(paths))
	var count int64
	_, err := w.queryRow(ctx, b.String(), b.args, &count)
	if noTable(err) {
		return false, nil
	}
	return count > 0, err
}

// toAny converts strings to SQL arguments.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// readDocs reads the next reindexBatch documents after rid after,
// without their shared field (which has no index entries).
func readDocs(ctx context.Context, w *conn, n names, after int64, cd *codec) ([]*stored, error) {
	r, err := w.query(ctx, "SELECT rid, id, doc FROM "+n.d+" WHERE rid > ? ORDER BY rid LIMIT ?", []any{after, reindexBatch})
	if err != nil {
		return nil, err
	}
	defer r.close()
	var out []*stored
	for r.next() {
		s := &stored{rid: r.int64(0), id: r.text(1)}
		if s.doc, err = cd.decode(storedParts{id: s.id, doc: r.view(2)}, "", true, nil); err != nil {
			return nil, docError("", n.coll, s.id, err)
		}
		out = append(out, s)
	}
	return out, r.err
}
