//go:build !unix

package storetest

import (
	"testing"
	"time"
)

// ProcessCPU is zero where the process's CPU time is not read.
func ProcessCPU(testing.TB) time.Duration { return 0 }
