//go:build !unix

package main

import "errors"

// errLocked: another process holds the data dir's lock.
var errLocked = errors.New("data dir locked by another process")

type dirLock struct{}

// lockDataDir always succeeds where flock does not exist: a second server
// on one data dir is then only refused by SQLite's own locking.
func lockDataDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) unlock() {}
