package store

import "sync"

// Bundle is the batch or transaction a resource is written in, as its
// validator sees it: the resources of the entries as posted, so that a
// reference from one entry to another (urn:uuid:…, Patient/x) can be
// checked against the profiles the other one claims.
type Bundle struct {
	Entries []BundleEntry

	once  sync.Once
	index any
}

// BundleEntry is one resource of a Bundle.
type BundleEntry struct {
	FullURL string
	// Type and ID are what a relative reference names the entry by: the
	// type and id of a PUT's URL; a POST's resource gets its id when
	// stored, so only its fullUrl names it.
	Type, ID string
	// Resource is the JSON of the entry's resource as posted.
	Resource []byte
}

// Index returns what build makes of the entries, built at the first call:
// the validator of many entries of one Bundle indexes them once for all.
func (b *Bundle) Index(build func([]BundleEntry) any) any {
	b.once.Do(func() { b.index = build(b.Entries) })
	return b.index
}

// bundleOf is the Bundle of ops: the resources their POST and PUT
// entries write (a PATCH's body is a patch, not the resource). A single
// write has none.
func bundleOf(ops []Op) *Bundle {
	if len(ops) < 2 {
		return nil
	}
	b := &Bundle{}
	for _, o := range ops {
		switch {
		case len(o.Body) == 0:
		case o.Method == "POST":
			b.Entries = append(b.Entries, BundleEntry{FullURL: o.FullURL, Type: o.Type, Resource: o.Body})
		case o.Method == "PUT":
			b.Entries = append(b.Entries, BundleEntry{FullURL: o.FullURL, Type: o.Type, ID: o.ID, Resource: o.Body})
		}
	}
	return b
}
