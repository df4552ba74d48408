package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/store/engine"
)

// ErrCorrupt rejects reading a stored version that cannot be read back as
// it was written (a damaged or torn database file): 500, naming the
// version, never the damaged bytes.
var ErrCorrupt = errors.New("stored version is damaged")

// CorruptError names the version of a resource that cannot be read back;
// it is ErrCorrupt. Version is 0 when even that is unknown.
type CorruptError struct {
	Type, ID string
	Version  int
	Err      error // the engine's account, for logs
}

func (e *CorruptError) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("%s/%s is damaged in storage and cannot be read; restore it from a backup", e.Type, e.ID)
	}
	return fmt.Sprintf("%s/%s version %d is damaged in storage and cannot be read; restore it from a backup", e.Type, e.ID, e.Version)
}

// Unwrap is ErrCorrupt and the engine's error.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// damaged turns the engine's report of a damaged document behind err into
// a *CorruptError naming the resource and version, logged at error level;
// other errors are returned as they are.
func (s *Store) damaged(ctx context.Context, tenant string, err error) error {
	var ce *engine.CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	out := &CorruptError{Type: ce.Collection, ID: ce.ID, Err: err}
	if ce.Collection == historyCollection {
		parts := strings.Split(ce.ID, "/")
		if len(parts) == 3 {
			out.Type, out.ID = parts[0], parts[1]
			out.Version, _ = strconv.Atoi(parts[2])
		}
	} else {
		out.Version = s.newestVersion(ctx, tenant, ce.Collection, ce.ID)
	}
	s.log.Error("a stored version cannot be read back", zap.String("tenant", tenant), zap.String("resource", out.Type+"/"+out.ID),
		zap.Int("version", out.Version), zap.Error(err))
	return out
}

// newestVersion is the newest version of typ/id in history (0 when it
// cannot be read): the current row's version.
func (s *Store) newestVersion(ctx context.Context, tenant, typ, id string) int {
	var h struct {
		VID int `bson:"vid"`
	}
	opts := &engine.FindOptions{Sort: bson.D{{Key: "vid", Value: -1}}, Projection: bson.D{{Key: "vid", Value: 1}}}
	filter := bson.D{{Key: "type", Value: typ}, {Key: "id", Value: id}}
	if err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(historyCollection), filter, opts, &h); err != nil {
		return 0
	}
	return h.VID
}
