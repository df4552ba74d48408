//go:build unix

package store_test

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time (user and system) the process has used: on
// a noisy machine, the cost of a write varies less than its rate.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
