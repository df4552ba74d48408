package bulkexport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"fhirstore/fhirschema/view"
	"fhirstore/store"
)

// exportView writes the rows of one view of a $viewdefinition-export over
// the snapshot of its resource type, from where the cursor from says,
// into files of the job's format, recording them at checkpoints like the
// files of a type.
func (r *run) exportView(ctx context.Context, from Cursor) error {
	vd := r.job.Views[from.Type]
	v, err := view.Compile([]byte(vd.Definition), view.Options{})
	if err != nil {
		return paramError("view", "%s: %v", vd.Name, err)
	}
	match, err := r.match(v.Resource, nil)
	if err != nil {
		return err
	}
	r.pmu.Lock()
	r.types[from.Type] = &typeProgress{after: from.After, part: from.Part}
	r.pmu.Unlock()
	w := &viewWriter{dir: r.dir, vd: vd, typ: v.Resource, cols: v.Columns(), format: r.job.Format,
		noHeader: r.job.NoHeader, part: from.Part, max: r.m.cfg.MaxFileBytes}
	defer w.abort()
	q := store.SnapshotQuery{Type: v.Resource, At: r.job.TransactionTime, Since: r.job.Since, Match: match, After: from.After}
	var rows [][]any
	err = r.m.st.Snapshot(ctx, r.tenant, q, func(res *store.Resource) error {
		rows = rows[:0]
		if err := viewRows(ctx, v, res, &rows); err != nil {
			var ee *view.EvalError
			if !errors.As(err, &ee) {
				return err
			}
			r.issue(fmt.Sprintf("view %s left out %s/%s: %s", vd.Name, res.Type, res.ID, ee.Msg))
			return nil
		}
		full, err := w.write(rows, res.ID)
		if err != nil || !full {
			return err
		}
		return r.finish(ctx, from.Type, w, false)
	})
	if err != nil {
		return err
	}
	return r.finish(ctx, from.Type, w, true)
}

// viewRows evaluates v over one resource into rows (copies): a resource's
// rows are written whole or not at all.
func viewRows(ctx context.Context, v *view.View, res *store.Resource, rows *[][]any) error {
	m, err := view.Decode(res.JSON)
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", res.Type, res.ID, err)
	}
	return v.Eval(ctx, m, func(row []any) error {
		*rows = append(*rows, append([]any(nil), row...))
		return nil
	})
}

// viewWriter writes the files of one view: <name>-<part>.<format>,
// written as .part and named once complete and synced.
type viewWriter struct {
	dir      string
	vd       View
	typ      string
	cols     []view.Column
	format   string
	noHeader bool
	part     int
	max      int64
	f        *os.File
	counter  *countingWriter
	buf      *bufio.Writer
	sink     view.Sink
	count    int64
	last     string
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (w *viewWriter) name() string {
	return fmt.Sprintf("%s-%d%s", w.vd.Name, w.part, view.Extension(w.format))
}

// write appends the rows of one resource, reporting whether the file is
// now full.
func (w *viewWriter) write(rows [][]any, id string) (full bool, err error) {
	if w.f == nil {
		if err := w.open(); err != nil {
			return false, err
		}
	}
	for _, row := range rows {
		if err := w.sink.WriteRow(row); err != nil {
			return false, fmt.Errorf("write view export file: %w", err)
		}
		w.count++
	}
	w.last = id
	return w.counter.n+int64(w.buf.Buffered()) >= w.max, nil
}

func (w *viewWriter) open() error {
	f, err := os.OpenFile(filepath.Join(w.dir, w.name()+partSuffix), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("create view export file: %w", err)
	}
	w.f, w.buf = f, bufio.NewWriterSize(f, 256<<10)
	w.counter = &countingWriter{w: w.buf}
	w.count = 0
	if w.sink, err = view.NewSink(w.counter, w.format, w.cols, view.SinkOptions{NoHeader: w.noHeader}); err != nil {
		_ = f.Close()
		w.f = nil
		return fmt.Errorf("view export file: %w", err)
	}
	return nil
}

func (w *viewWriter) position() (string, int) { return w.last, w.part }

// close ends the current file (finishing its format), synced and closed
// in the background as fileWriter.close does; nil when none is open.
func (w *viewWriter) close() (*File, error) {
	if w.f == nil {
		return nil, nil
	}
	f := w.f
	w.f = nil
	err := w.sink.Close()
	if err == nil {
		err = w.buf.Flush()
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("finish view export file: %w", err)
	}
	synced := make(chan error, 1)
	go func() {
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		synced <- err
	}()
	name := w.name()
	w.part++
	return &File{Type: w.typ, View: w.vd.Name, Name: name, Count: w.count, synced: synced}, nil
}

// abort closes and removes a file left open by an error.
func (w *viewWriter) abort() {
	if w.f == nil {
		return
	}
	_ = w.f.Close()
	_ = os.Remove(filepath.Join(w.dir, w.name()+partSuffix))
	w.f = nil
}
