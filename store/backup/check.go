package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"fhirstore/store/engine/sqlite"
)

// historyCollection holds every version of every resource, each with the
// _id Type/id/version.
const historyCollection = "history"

// CheckOptions configure Check.
type CheckOptions struct {
	Layout Layout
	// Full decodes every document; otherwise a sample of each collection.
	Full bool
}

// Problem is one thing wrong in a data dir or backup, as precisely as it
// is known: the file, the tenant, the table, the resource and version.
type Problem struct {
	File     string
	Tenant   string // "" for the system database or a file that is no database
	Table    string // the collection: a resource type, history, or the store's own
	Resource string // Type/id, when the problem is in a resource's row
	Version  int    // the version, when known (history rows)
	Document string // the row's _id when it is not a resource's
	Message  string
}

// String is the problem on one line.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Tenant != "" {
		b.WriteString(": tenant " + p.Tenant)
	}
	if p.Table != "" {
		b.WriteString(": table " + p.Table)
	}
	switch {
	case p.Resource != "" && p.Version > 0:
		fmt.Fprintf(&b, ": %s version %d", p.Resource, p.Version)
	case p.Resource != "":
		b.WriteString(": " + p.Resource + " (current version)")
	case p.Document != "":
		fmt.Fprintf(&b, ": document %q", p.Document)
	}
	return b.String() + ": " + p.Message
}

// Report is what Check found.
type Report struct {
	// Backup tells that the directory is a backup (it has a manifest).
	Backup bool
	// Files counts the database files checked; Documents the documents
	// decoded.
	Files     int
	Documents int64
	Problems  []Problem
}

// Clean tells that nothing is wrong.
func (r *Report) Clean() bool { return len(r.Problems) == 0 }

// Check checks the data dir or backup in dir: a backup's files against
// its manifest, then every database file: SQLite's integrity check, its
// format version, and that its documents decode (a sample of each
// collection unless opts.Full). A data dir may be served while it is
// checked: each file is checked at one instant (not the same instant
// across files). The error is for a directory that cannot be checked at
// all.
func Check(ctx context.Context, dir string, opts CheckOptions) (*Report, error) {
	l := opts.Layout
	rep := &Report{}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		rep.Backup = true
		m, err := ReadManifest(dir)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{File: ManifestFile, Message: err.Error()})
		} else {
			for _, f := range m.Files {
				if err := verifyFile(dir, f); err != nil {
					rep.Problems = append(rep.Problems, Problem{File: f.Name, Tenant: f.Tenant, Message: strings.TrimPrefix(err.Error(), ErrDamaged.Error()+": ")})
				}
			}
		}
	}
	src := filepath.Join(dir, l.DatabaseDir)
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("check: %s holds no embedded database (no %s directory)", dir, l.DatabaseDir)
	}
	dbs, err := databaseFiles(src, l)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dir, err)
	}
	for _, db := range dbs {
		name := l.DatabaseDir + "/" + db + ".db"
		tenant := l.tenantOf(db)
		res, err := sqlite.CheckFile(ctx, filepath.Join(src, db+".db"), sqlite.CheckOptions{Full: opts.Full})
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("check %s: %w", dir, ctx.Err())
			}
			rep.Problems = append(rep.Problems, Problem{File: name, Tenant: tenant, Message: err.Error()})
			continue
		}
		rep.Files++
		rep.Documents += res.Decoded
		for _, p := range res.Problems {
			rep.Problems = append(rep.Problems, problemOf(name, tenant, p))
		}
	}
	return rep, nil
}

// problemOf names the resource and version of a problem the engine
// reports in a document: history rows are Type/id/version, a resource
// type's rows are its resources' current versions.
func problemOf(file, tenant string, p sqlite.Problem) Problem {
	out := Problem{File: file, Tenant: tenant, Table: p.Collection, Message: p.Err.Error()}
	switch {
	case p.ID == "":
	case p.Collection == historyCollection:
		parts := strings.Split(p.ID, "/")
		if v, err := strconv.Atoi(parts[len(parts)-1]); len(parts) == 3 && err == nil {
			out.Resource, out.Version = parts[0]+"/"+parts[1], v
		} else {
			out.Document = p.ID
		}
	case isResourceType(p.Collection):
		out.Resource = p.Collection + "/" + p.ID
	default:
		out.Document = p.ID
	}
	return out
}

// isResourceType tells a resource type's collection (Patient) from the
// store's own (history, journal, locks …): resource types start with a
// capital letter.
func isResourceType(coll string) bool {
	return coll != "" && coll[0] >= 'A' && coll[0] <= 'Z'
}
