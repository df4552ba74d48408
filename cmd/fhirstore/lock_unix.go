//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// errLocked: another process holds the data dir's lock.
var errLocked = errors.New("data dir locked by another process")

type dirLock struct{ f *os.File }

// lockDataDir takes the data dir's lock without waiting.
func lockDataDir(dataDir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, errors.Unwrap(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dataDir, err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) unlock() { _ = l.f.Close() }
