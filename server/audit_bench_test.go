package server_test

import (
	"net/http"
	"testing"

	"fhirstore/server"
	"fhirstore/store"
)

// benchGetParallel reads path from 8 clients at once, as a load does.
func benchGetParallel(b *testing.B, e *env, path string) {
	b.Helper()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := e.get(path); r.Status != http.StatusOK {
				b.Errorf("GET %s: %d", path, r.Status)
				return
			}
		}
	})
}

// BenchmarkReadParallel and BenchmarkReadParallelAudited read one Patient
// from 8 clients, without and with the audit trail (its records
// converted inside the timing).
func BenchmarkReadParallel(b *testing.B) {
	e := newEnv(b)
	benchGetParallel(b, e, "/Patient/"+seedPatients(b, e, 1))
}

func BenchmarkReadParallelAudited(b *testing.B) {
	dir := b.TempDir()
	e := newEnv(b, func(c *server.Config, _ *store.Options) { c.Audit, c.AuditSpoolDir = true, dir })
	benchGetParallel(b, e, "/Patient/"+seedPatients(b, e, 1))
	closeAudit(b, e)
}
