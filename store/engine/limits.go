package engine

import "fmt"

// MiB is 2^20 bytes.
const MiB = 1 << 20

// Limits are the refusals of an engine that can be known before a write:
// the store checks every version against them before it commits anything,
// so that a write the database would refuse fails as a whole instead of
// halfway through a transaction. Zero means no bound.
type Limits struct {
	// MaxDocumentBytes bounds the BSON size of one stored document, its
	// search index included.
	MaxDocumentBytes int
	// MaxIndexKeyBytes bounds one index key: the BSON size of a value at
	// an indexed path.
	MaxIndexKeyBytes int
	// WholeArrayKeys says that an array at an indexed path is one index
	// key, all its elements together, rather than one key per element.
	WholeArrayKeys bool
	// Source names the database whose limits these are, for messages
	// ("MongoDB", "FerretDB 1.x on PostgreSQL", "the embedded engine").
	Source string
}

// DocumentLimit describes MaxDocumentBytes for a message.
func (l Limits) DocumentLimit() string {
	return fmt.Sprintf("%s stores documents of at most %s", l.Source, SizeText(l.MaxDocumentBytes))
}

// IndexKeyLimit describes MaxIndexKeyBytes for a message.
func (l Limits) IndexKeyLimit() string {
	what := "an index key"
	if l.WholeArrayKeys {
		what = "an index key (all the values of one indexed path together)"
	}
	return fmt.Sprintf("%s takes %s of at most %s", l.Source, what, SizeText(l.MaxIndexKeyBytes))
}

// SizeText renders a byte count for people, as the limits' messages do.
func SizeText(n int) string {
	if n >= MiB && n%MiB == 0 {
		return fmt.Sprintf("%d MiB", n/MiB)
	}
	if n >= MiB {
		return fmt.Sprintf("%.1f MiB", float64(n)/MiB)
	}
	return fmt.Sprintf("%d bytes", n)
}
