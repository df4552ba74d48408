//go:build !unix

package store_test

import (
	"testing"
	"time"
)

// processCPU is zero where the process's CPU time is not read.
func processCPU(*testing.B) time.Duration { return 0 }
