package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"fhirstore/store"
)

// AuditLogFile is the name of the audit trail's log in
// Config.AuditSpoolDir.
const AuditLogFile = "audit-spool.log"

// auditLogTruncateAt is the size past which the log starts over once
// every record it holds is an audit row.
const auditLogTruncateAt = 4 << 20

// auditLog is the audit trail's append-only log of records not yet
// stored as audit rows (Config.AuditSpoolDir): a request's record is
// appended, with the records of the requests that end meanwhile, in one
// write of a few hundred bytes each before the request ends, which makes
// it as durable as a commit of the embedded database (the operating
// system holds it when the process dies). The converter stores the
// records as audit rows from memory, in large batches; once every
// record the log holds is stored, the log starts over. After a crash, the
// records the log holds are stored at the next start (a record stored
// already is not stored twice: its key is its row's id). Each line is a
// record's key, a space and its JSON (with its tenant).
type auditLog struct {
	path string
	log  *zap.Logger

	mu       sync.Mutex
	f        *os.File
	size     int64
	appended int64 // records appended since the log started over
	stored   int64 // of those, records stored as audit rows
}

// openAuditLog opens (creating it if need be) the log in dir and returns
// the records it holds from before.
func openAuditLog(dir string, log *zap.Logger) (*auditLog, []store.AuditRecord, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("audit log: %w", err)
	}
	path := filepath.Join(dir, AuditLogFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("audit log: %w", err)
	}
	left, torn, err := readAuditLog(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	if torn > 0 {
		log.Warn("audit log: a record cut short by a crash (its request was not answered) is skipped", zap.String("file", path), zap.Int("bytes", torn))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("audit log: %w", err)
	}
	return &auditLog{path: path, log: log, f: f, size: st.Size()}, left, nil
}

// readAuditLog reads every whole line of the log; torn is the length of a
// last line without its newline.
func readAuditLog(r io.Reader) ([]store.AuditRecord, int, error) {
	var out []store.AuditRecord
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, len(line), nil
		}
		if err != nil {
			return nil, 0, err
		}
		key, data, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(" "))
		if !ok {
			continue
		}
		rec, err := store.DecodeAuditRecord(string(key), data)
		if err != nil {
			continue
		}
		out = append(out, rec)
	}
}

// append writes records to the log in one write; they are durable when it
// returns nil.
func (l *auditLog) append(records []store.AuditRecord) error {
	var buf bytes.Buffer
	for i := range records {
		r := &records[i]
		if r.Key == "" {
			key, err := store.NewAuditKey()
			if err != nil {
				return err
			}
			r.Key = key
		}
		data, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode audit record: %w", err)
		}
		buf.WriteString(r.Key)
		buf.WriteByte(' ')
		buf.Write(data)
		buf.WriteByte('\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("audit log: closed")
	}
	n, err := l.f.Write(buf.Bytes())
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	l.appended += int64(len(records))
	return nil
}

// storedRecords notes that n appended records are stored as audit rows;
// once every appended record is, the log starts over when it has grown
// past auditLogTruncateAt.
func (l *auditLog) storedRecords(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stored += int64(n)
	if l.f == nil || l.stored < l.appended || l.size < auditLogTruncateAt {
		return
	}
	if err := l.f.Truncate(0); err != nil {
		l.log.Warn("audit log: cannot start over", zap.String("file", l.path), zap.Error(err))
		return
	}
	l.size, l.appended, l.stored = 0, 0, 0
}

// close empties the log when every record it holds is stored, and closes
// it.
func (l *auditLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	var err error
	if l.stored >= l.appended {
		err = l.f.Truncate(0)
	}
	err = errors.Join(err, l.f.Close())
	l.f = nil
	return err
}

// storeAuditRecords stores records (of any tenants) as audit rows, a
// tenant at a time; it reports how many it stored before a failure.
func storeAuditRecords(ctx context.Context, st *store.Store, records []store.AuditRecord) (int, error) {
	byTenant := map[string][]store.AuditRecord{}
	var order []string
	for _, r := range records {
		if _, ok := byTenant[r.Site]; !ok {
			order = append(order, r.Site)
		}
		byTenant[r.Site] = append(byTenant[r.Site], r)
	}
	stored := 0
	for _, tenant := range order {
		err := st.Audit(ctx, tenant, byTenant[tenant])
		if errors.Is(err, store.ErrTenantNotFound) || errors.Is(err, store.ErrInvalidTenant) {
			err = nil // a tenant deleted meanwhile: its records go with it
		}
		if err != nil {
			return stored, err
		}
		stored += len(byTenant[tenant])
	}
	return stored, nil
}
