package bulkexport

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/store/document"
)

// partSuffix marks a file being written; only complete files lose it.
const partSuffix = ".part"

// fileWriter writes the ndjson files of one type: <Type>-<part>.ndjson,
// written as .part and renamed once complete and synced.
type fileWriter struct {
	dir   string
	typ   string
	part  int   // number of the file being written (or next to write)
	max   int64 // size at which a file is complete
	f     *os.File
	buf   *bufio.Writer
	bytes int64
	count int64
	last  string // id of the last resource written
}

// partWriter writes the files of one type (or view) of a job, closing
// each at the end of a resource: position is the id of the last resource
// in the closed files and the number of the next file.
type partWriter interface {
	close() (*File, error)
	position() (last string, part int)
}

func (w *fileWriter) position() (string, int) { return w.last, w.part }

// name is the final name of the current file.
func (w *fileWriter) name() string { return fmt.Sprintf("%s-%d.ndjson", w.typ, w.part) }

// write appends one resource as a line, reporting whether the file is
// now full.
func (w *fileWriter) write(line []byte, id string) (full bool, err error) {
	if w.f == nil {
		f, err := os.OpenFile(filepath.Join(w.dir, w.name()+partSuffix), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
		if err != nil {
			return false, fmt.Errorf("create export file: %w", err)
		}
		w.f, w.buf, w.bytes, w.count = f, bufio.NewWriterSize(f, 256<<10), 0, 0
	}
	if _, err := w.buf.Write(line); err != nil {
		return false, fmt.Errorf("write export file: %w", err)
	}
	if err := w.buf.WriteByte('\n'); err != nil {
		return false, fmt.Errorf("write export file: %w", err)
	}
	w.bytes += int64(len(line)) + 1
	w.count++
	w.last = id
	return w.bytes >= w.max, nil
}

// close ends the current file: flushed, then synced and closed in the
// background while the export goes on (File.synced tells when), still
// under its .part name (finalize names it). It returns nil when no file
// is open.
func (w *fileWriter) close() (*File, error) {
	if w.f == nil {
		return nil, nil
	}
	f := w.f
	w.f = nil
	if err := w.buf.Flush(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("finish export file: %w", err)
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
	return &File{Type: w.typ, Name: name, Count: w.count, synced: synced}, nil
}

// finalize waits until the .part files of files are synced, names them
// with their final names and syncs the directory, so that the names
// survive a crash as well.
func finalize(dir string, files []File) error {
	for _, f := range files {
		var err error
		if f.synced != nil {
			err = <-f.synced
		} else {
			err = syncFile(filepath.Join(dir, f.Name+partSuffix))
		}
		if err != nil {
			return fmt.Errorf("finish export file %s: %w", f.Name, err)
		}
	}
	for _, f := range files {
		if err := os.Rename(filepath.Join(dir, f.Name+partSuffix), filepath.Join(dir, f.Name)); err != nil {
			return fmt.Errorf("finish export file: %w", err)
		}
	}
	return syncFile(dir)
}

// syncFile flushes a file or directory to stable storage.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	return nil
}

// abort closes and removes a file left open by an error.
func (w *fileWriter) abort() {
	if w.f == nil {
		return
	}
	_ = w.f.Close()
	_ = os.Remove(filepath.Join(w.dir, w.name()+partSuffix))
	w.f = nil
}

// writeFileSync writes a small file in one go, synced before it is named.
func writeFileSync(path string, data []byte) error {
	tmp := path + partSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return syncFile(filepath.Dir(path))
}

// alwaysKept are the elements _elements never removes.
var alwaysKept = []string{"resourceType", "id", "meta"}

// elementsOf are the _elements that apply to typ: plain names apply to
// every type, Type.name to that type only; nil keeps every element.
func elementsOf(typ string, elements []string) []string {
	var out []string
	for _, e := range elements {
		t, name, typed := strings.Cut(e, ".")
		switch {
		case !typed:
			out = append(out, e)
		case t == typ:
			out = append(out, name)
		}
	}
	if len(elements) > 0 && len(out) == 0 {
		return alwaysKept // elements were asked for, none of this type
	}
	return out
}

// subset keeps the top-level elements listed (and the mandatory ones) of a
// resource, in their order, tagged SUBSETTED; no list keeps it verbatim.
func subset(resourceJSON []byte, keep []string) ([]byte, error) {
	if len(keep) == 0 {
		return resourceJSON, nil
	}
	return document.Subset(resourceJSON, func(k string) bool { return slices.Contains(alwaysKept, k) || fhirschema.NamedBy(k, keep) })
}
