package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// rewriteReferences updates the references of a resource in a transaction:
// a reference (or Attachment.url, or a link in the narrative) naming another
// entry's fullUrl becomes that entry's Type/id; a conditional reference
// (Type?criteria) becomes the one resource matching it; a urn:uuid or
// urn:oid naming no entry is an error.
func (t *txn) rewriteReferences(ctx context.Context, p *prepared) error {
	return t.rewriteDoc(ctx, p.doc, p.typ)
}

func (t *txn) rewriteDoc(ctx context.Context, doc bson.D, path string) error {
	for i := range doc {
		e := &doc[i]
		p := path + "." + e.Key
		if str, ok := e.Value.(string); ok {
			out, err := t.rewriteString(ctx, e.Key, str, p)
			if err != nil {
				return err
			}
			e.Value = out
			continue
		}
		if err := t.rewriteValue(ctx, e.Key, e.Value, p); err != nil {
			return err
		}
	}
	return nil
}

func (t *txn) rewriteValue(ctx context.Context, key string, v any, path string) error {
	switch x := v.(type) {
	case bson.D:
		return t.rewriteDoc(ctx, x, path)
	case bson.A:
		for i := range x {
			p := path + "[" + strconv.Itoa(i) + "]"
			if str, ok := x[i].(string); ok {
				out, err := t.rewriteString(ctx, key, str, p)
				if err != nil {
					return err
				}
				x[i] = out
				continue
			}
			if err := t.rewriteValue(ctx, key, x[i], p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *txn) rewriteString(ctx context.Context, key, v, path string) (string, error) {
	switch key {
	case "reference":
		return t.rewriteReference(ctx, v, path)
	case "url":
		if to, ok := t.refs[v]; ok {
			return to, nil
		}
	case "div":
		return t.rewriteNarrative(v), nil
	}
	return v, nil
}

func (t *txn) rewriteReference(ctx context.Context, ref, path string) (string, error) {
	if to, ok := t.refs[ref]; ok {
		return to, nil
	}
	if strings.HasPrefix(ref, "urn:uuid:") || strings.HasPrefix(ref, "urn:oid:") {
		return "", syntaxIssue("not-found", fmt.Sprintf("reference %s names no entry of the bundle", ref), path)
	}
	typ, query, conditional := strings.Cut(ref, "?")
	if !conditional || strings.Contains(typ, "/") || !t.s.opts.ResourceTypes(typ) {
		return ref, nil
	}
	t.resolving.Lock()
	defer t.resolving.Unlock()
	if to, ok := t.resolved[ref]; ok {
		return to, nil
	}
	matches, err := t.s.matchCondition(ctx, t.tenant, typ, query)
	if err != nil {
		return "", err
	}
	if len(matches) != 1 {
		what := "no resource"
		if len(matches) > 1 {
			what = "more than one resource"
		}
		return "", fmt.Errorf("%w: conditional reference %s at %s matches %s", ErrPreconditionFailed, ref, path, what)
	}
	to := typ + "/" + matches[0].ID
	t.resolved[ref] = to
	return to, nil
}

// rewriteNarrative replaces fullUrls (urn:uuid:… and urn:oid:…) in links of
// the narrative XHTML.
func (t *txn) rewriteNarrative(div string) string {
	if !strings.Contains(div, "urn:") {
		return div
	}
	var b strings.Builder
	rest := div
	for {
		i := strings.Index(rest, "urn:")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		end := i + strings.IndexAny(rest[i:]+"\"", "\"' <>")
		if to, ok := t.refs[rest[i:end]]; ok {
			b.WriteString(to)
		} else {
			b.WriteString(rest[i:end])
		}
		rest = rest[end:]
	}
}
