package sqlite

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/store/engine"
)

// observe runs one operation, reporting it to the monitor (if any) as the
// MongoDB command it stands for. Finding nothing and duplicate keys are
// answers, reported as successes, as MongoDB does.
func (e *Engine) observe(ctx context.Context, db, command string, run func() error) error {
	m := e.opts.Monitor
	if m == nil {
		return run()
	}
	id := e.ids.Add(1)
	if m.Started != nil {
		m.Started(ctx, &event.CommandStartedEvent{Command: bson.Raw{}, DatabaseName: db, CommandName: command, RequestID: id, ConnectionID: "sqlite"})
	}
	start := time.Now()
	err := run()
	fin := event.CommandFinishedEvent{Duration: time.Since(start), CommandName: command, DatabaseName: db, RequestID: id, ConnectionID: "sqlite"}
	if err != nil && !engine.IsDuplicateKey(err) && !errors.Is(err, engine.ErrNoDocuments) {
		if m.Failed != nil {
			m.Failed(ctx, &event.CommandFailedEvent{CommandFinishedEvent: fin, Failure: err})
		}
		return err
	}
	if m.Succeeded != nil {
		m.Succeeded(ctx, &event.CommandSucceededEvent{CommandFinishedEvent: fin, Reply: bson.Raw{}})
	}
	return err
}
