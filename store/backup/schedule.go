package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// scheduledPrefix starts the names of the backups a Schedule makes: the
// prefix and the backup's UTC time, so that names sort by age.
const scheduledPrefix = "fhirstore-"

// scheduledTime is the time format of a scheduled backup's name.
const scheduledTime = "20060102T150405Z"

// Schedule makes a backup of a served data dir at a fixed interval into a
// directory, keeping the newest few.
type Schedule struct {
	DataDir string
	Dir     string        // where the backups go, one sub-directory each
	Every   time.Duration // interval between backups
	Keep    int           // how many backups to keep; older ones are removed
	Layout  Layout
	Logger  *zap.Logger
	// RetryAfter is the first wait after a failed backup; it doubles up to
	// Every. Zero means a minute.
	RetryAfter time.Duration

	mu   sync.Mutex
	last Outcome
}

// Outcome is what the last backups of a Schedule did.
type Outcome struct {
	LastSuccess time.Time     // when the last successful backup finished
	Duration    time.Duration // how long it took
	Bytes       int64         // its size
	Path        string        // where it is
	Failures    int64         // failed backups since the server started
	Successes   int64         // successful backups since the server started
}

// Last is what the schedule's backups did so far.
func (s *Schedule) Last() Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Run makes backups until ctx ends. The first is due one interval after
// the newest backup already in Dir (now, when there is none or it is
// older), so restarts neither skip nor repeat a backup. A failed backup is
// logged and retried; it never stops the schedule.
func (s *Schedule) Run(ctx context.Context) {
	log := s.logger()
	retry := s.RetryAfter
	if retry <= 0 {
		retry = time.Minute
	}
	wait := time.Until(s.due())
	backoff := retry
	for {
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error("scheduled backup failed; retrying", zap.String("dir", s.Dir), zap.Duration("retry_in", backoff), zap.Error(err))
			wait, backoff = backoff, min(2*backoff, s.Every)
			continue
		}
		wait, backoff = s.Every, retry
	}
}

// due is when the next backup is due: an interval after the newest one in
// Dir, or now.
func (s *Schedule) due() time.Time {
	names, err := s.backups()
	if err != nil || len(names) == 0 {
		return time.Now()
	}
	t, err := time.Parse(scheduledTime, strings.TrimPrefix(names[len(names)-1], scheduledPrefix))
	if err != nil {
		return time.Now()
	}
	return t.Add(s.Every)
}

// Once makes one backup now, then removes the backups beyond Keep.
func (s *Schedule) Once(ctx context.Context) error {
	start := time.Now()
	out := filepath.Join(s.Dir, scheduledPrefix+start.UTC().Format(scheduledTime))
	m, err := Create(ctx, s.DataDir, out, Options{Layout: s.Layout, Logger: s.logger()})
	if err != nil {
		s.mu.Lock()
		s.last.Failures++
		s.mu.Unlock()
		return err
	}
	var size int64
	for _, f := range m.Files {
		size += f.Size
	}
	took := time.Since(start)
	s.mu.Lock()
	s.last.LastSuccess, s.last.Duration, s.last.Bytes, s.last.Path = time.Now(), took, size, out
	s.last.Successes++
	s.mu.Unlock()
	s.logger().Info("backup made", zap.String("path", out), zap.Int64("bytes", size), zap.Duration("took", took),
		zap.Strings("tenants", m.Tenants))
	return s.prune()
}

// prune removes the oldest backups of Dir beyond Keep.
func (s *Schedule) prune() error {
	if s.Keep <= 0 {
		return nil
	}
	names, err := s.backups()
	if err != nil {
		return err
	}
	for len(names) > s.Keep {
		old := filepath.Join(s.Dir, names[0])
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove old backup %s: %w", old, err)
		}
		s.logger().Info("old backup removed", zap.String("path", old), zap.Int("keep", s.Keep))
		names = names[1:]
	}
	return nil
}

// backups lists the complete scheduled backups of Dir (those with a
// manifest), oldest first.
func (s *Schedule) backups() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scheduledPrefix) {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.Dir, e.Name(), ManifestFile)); err == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *Schedule) logger() *zap.Logger {
	if s.Logger == nil {
		return zap.NewNop()
	}
	return s.Logger
}

var (
	lastSuccessDesc = prometheus.NewDesc("fhirstore_backup_last_success_timestamp_seconds",
		"When the last successful scheduled backup finished (Unix time; 0: none yet).", nil, nil)
	lastDurationDesc = prometheus.NewDesc("fhirstore_backup_last_duration_seconds",
		"How long the last successful scheduled backup took.", nil, nil)
	lastSizeDesc = prometheus.NewDesc("fhirstore_backup_last_size_bytes",
		"Size of the last successful scheduled backup.", nil, nil)
	backupsDesc = prometheus.NewDesc("fhirstore_backups_total",
		"Scheduled backups since the server started, by result.", []string{"result"}, nil)
)

// Collector exports the schedule's outcome as Prometheus metrics.
func (s *Schedule) Collector() prometheus.Collector { return scheduleCollector{s} }

type scheduleCollector struct{ s *Schedule }

func (c scheduleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastSuccessDesc
	ch <- lastDurationDesc
	ch <- lastSizeDesc
	ch <- backupsDesc
}

func (c scheduleCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.s.Last()
	var at float64
	if !o.LastSuccess.IsZero() {
		at = float64(o.LastSuccess.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, at)
	ch <- prometheus.MustNewConstMetric(lastDurationDesc, prometheus.GaugeValue, o.Duration.Seconds())
	ch <- prometheus.MustNewConstMetric(lastSizeDesc, prometheus.GaugeValue, float64(o.Bytes))
	ch <- prometheus.MustNewConstMetric(backupsDesc, prometheus.CounterValue, float64(o.Successes), "ok")
	ch <- prometheus.MustNewConstMetric(backupsDesc, prometheus.CounterValue, float64(o.Failures), "failed")
}
