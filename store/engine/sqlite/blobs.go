package sqlite

import (
	"context"
	"fmt"

	"fhirstore/store/engine"
)

// blobsTable holds the distinct values of documents' shared fields (see
// codec.go): id, h (a hash of the value), n (the documents holding it), z
// (its stored form).
const blobsTable = `"_blobs"`

// createBlobsTable is the statement creating blobsTable.
const createBlobsTable = "CREATE TABLE IF NOT EXISTS " + blobsTable + " (id INTEGER PRIMARY KEY, h BLOB NOT NULL UNIQUE, n INTEGER NOT NULL, z BLOB NOT NULL)"

// holdBlob stores b, or counts one more document holding it, and returns
// its id. (Plain statements: an upsert needs a statement journal, which
// cost a tenth of an ingest's time.)
func holdBlob(ctx context.Context, w *conn, b *blob) (int64, error) {
	var id int64
	found, err := w.queryRow(ctx, "SELECT id FROM "+blobsTable+" WHERE h = ?", []any{b.hash}, &id)
	if err != nil {
		return 0, fmt.Errorf("store a shared value: %w", err)
	}
	if found {
		if _, err := w.exec(ctx, "UPDATE "+blobsTable+" SET n = n + 1 WHERE id = ?", id); err != nil {
			return 0, fmt.Errorf("store a shared value: %w", err)
		}
		return id, nil
	}
	if _, err := w.exec(ctx, "INSERT INTO "+blobsTable+" (h, n, z) VALUES (?, 1, ?)", b.hash, b.z); err != nil {
		return 0, fmt.Errorf("store a shared value: %w", err)
	}
	return w.lastID(), nil
}

// releaseBlob counts one document less holding blob id, deleting the
// blob when none holds it any more.
func releaseBlob(ctx context.Context, w *conn, id nullInt64) error {
	if !id.ok {
		return nil
	}
	var n int64
	found, err := w.queryRow(ctx, "UPDATE "+blobsTable+" SET n = n - 1 WHERE id = ? RETURNING n", []any{id.v}, &n)
	if err != nil {
		return fmt.Errorf("release a shared value: %w", err)
	}
	if !found {
		return fmt.Errorf("release shared value %d: %w: no such value", id.v, engine.ErrCorrupt)
	}
	if n > 0 {
		return nil
	}
	if _, err := w.exec(ctx, "DELETE FROM "+blobsTable+" WHERE id = ?", id.v); err != nil {
		return fmt.Errorf("delete a shared value: %w", err)
	}
	return nil
}

// readBlob reads the stored form of blob id.
func readBlob(ctx context.Context, q *conn, id int64) ([]byte, error) {
	var z []byte
	found, err := q.queryRow(ctx, "SELECT z FROM "+blobsTable+" WHERE id = ?", []any{id}, &z)
	if err != nil {
		return nil, fmt.Errorf("read shared value %d: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("shared value %d: %w: no such value", id, engine.ErrCorrupt)
	}
	return z, nil
}
