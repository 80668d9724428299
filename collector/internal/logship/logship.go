// Package logship ships a JSON-lines access log (Envoy's file access logger)
// to an OpenTelemetry Collector as OTLP log records, without losing or
// skipping a line.
//
// The file is the buffer. The shipper reads complete lines from its
// checkpoint on, sends them as one OTLP export, and moves the checkpoint past
// them only once the Collector has acknowledged the export; until then it
// retries forever, with backoff. A crash or restart of the shipper or of the
// Collector therefore resends, never skips: delivery is at-least-once, and
// the consumer deduplicates (wirelens.requests is a ReplacingMergeTree keyed
// on the request id). The Collector must acknowledge only what it has made
// durable (its persistent sending queue, no batch processor in front).
//
// Rotation: the file may be renamed away and recreated (Envoy reopens its
// access log on POST /reopen_logs). The shipper drains the renamed file to
// its end before it moves to the new one, and finds a renamed file again
// after a restart by its inode and the fingerprint of its first bytes. With
// Config.RotateBytes it rotates the file itself once everything in it was
// shipped, and removes the rotated file once drained, so the log does not
// grow without bound while the Collector accepts.
//
// Backpressure: while the Collector is down or refuses, the file is the
// buffer. Config.MaxDiskBytes caps it (diskcap.go): past the cap the oldest
// unshipped records are dropped, counted (Progress.RecordsDropped, kept in the
// checkpoint) and logged once per DropLogInterval, never silently.
package logship

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// Exporter delivers one batch; nil means the receiver has accepted it.
type Exporter interface {
	Export(ctx context.Context, logs plog.Logs) error
}

// Config of a Shipper. Zero values take the defaults noted.
type Config struct {
	Path           string            // the JSON-lines file to ship
	CheckpointPath string            // where progress is kept (default Path + ".checkpoint")
	Resource       map[string]string // resource attributes of every record
	ScopeName      string            // instrumentation scope name (default empty, as Envoy's OTel logger)
	Exporter       Exporter

	MaxBatchRecords int           // records per export (default 1000)
	MaxBatchBytes   int           // bytes of file read per export (default 2 MiB)
	Interval        time.Duration // how often to look for new lines (default 500ms)
	MinBackoff      time.Duration // first retry delay after a failed export (default 200ms)
	MaxBackoff      time.Duration // retry delay cap (default 5s)

	// RotateBytes > 0: once the file holds at least this many bytes and all
	// of them were shipped, rename it to Path + ".1", call Reopen (so the
	// writer starts a new file), drain the renamed file and remove it.
	RotateBytes int64
	Reopen      func(ctx context.Context) error

	// MaxDiskBytes > 0 (needs RotateBytes, at most half of it): the file and
	// its rotated, not yet shipped files together hold at most this many
	// bytes (plus one Interval of writes); past it the oldest are dropped and
	// counted. DropLogInterval (default 10s) spaces the messages about drops.
	MaxDiskBytes    int64
	DropLogInterval time.Duration

	Logger *slog.Logger
}

// Progress is what the shipper reports (the /progress endpoint).
type Progress struct {
	File                string    `json:"file"`
	Inode               uint64    `json:"inode"`
	Offset              int64     `json:"offset"`
	Size                int64     `json:"size"`
	PendingBytes        int64     `json:"pending_bytes"`
	RecordsShipped      uint64    `json:"records_shipped"`
	BatchesShipped      uint64    `json:"batches_shipped"`
	RecordsRejected     uint64    `json:"records_rejected"`
	MalformedLines      uint64    `json:"malformed_lines"`
	ExportFailures      uint64    `json:"export_failures"`
	ConsecutiveFailures uint64    `json:"consecutive_failures"`
	LastError           string    `json:"last_error,omitempty"`
	LastShipped         time.Time `json:"last_shipped,omitzero"`
	Rotations           uint64    `json:"rotations"`
	Waiting             bool      `json:"waiting_for_file"`
	// Past the disk cap: records and bytes dropped unshipped since
	// DroppedSince (the first checkpoint; the counts survive restarts).
	RecordsDropped uint64    `json:"records_dropped"`
	BytesDropped   uint64    `json:"bytes_dropped"`
	DroppedSince   time.Time `json:"dropped_since"`
	DiskBytes      int64     `json:"disk_bytes"`     // the file and its rotated files, at the last check
	MaxDiskBytes   int64     `json:"max_disk_bytes"` // the cap (0: none)
}

// RejectedError reports records the receiver refused permanently (OTLP
// partial success). They are not retried: the receiver would refuse them again.
type RejectedError struct {
	Rejected int64
	Message  string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("receiver rejected %d records: %s", e.Rejected, e.Message)
}

const (
	fingerprintSize = 1024
	maxLineBytes    = 64 << 20
)

// errDroppedPastCap: the disk cap dropped the file the batch in flight came from.
var errDroppedPastCap = errors.New("the batch's file was dropped past the disk cap")

// Shipper tails one file. Create with New, run with Run.
type Shipper struct {
	cfg Config
	log *slog.Logger

	f          *os.File
	name       string // the name the open file had when opened (Path or Path+".1")
	inode      uint64
	offset     int64
	fp         string // hex sha256 of the first fpLen bytes
	fpLen      int64
	lastReopen time.Time
	buf        []byte

	unloggedDrops uint64 // records dropped since the last message about drops
	lastDropLog   time.Time

	mu   sync.Mutex
	prog Progress
}

// New checks the configuration and fills in defaults.
func New(cfg Config) (*Shipper, error) {
	if cfg.Path == "" {
		return nil, errors.New("logship: no file to ship")
	}
	if cfg.Exporter == nil {
		return nil, errors.New("logship: no exporter")
	}
	if cfg.CheckpointPath == "" {
		cfg.CheckpointPath = cfg.Path + ".checkpoint"
	}
	if cfg.MaxBatchRecords <= 0 {
		cfg.MaxBatchRecords = 1000
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 2 << 20
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.MaxDiskBytes < 0 || cfg.RotateBytes < 0 {
		return nil, errors.New("logship: MaxDiskBytes (-max-disk-bytes) and RotateBytes (-rotate-bytes) must not be negative")
	}
	if cfg.MaxDiskBytes > 0 && (cfg.RotateBytes == 0 || cfg.MaxDiskBytes < 2*cfg.RotateBytes) {
		// Dropping works a rotated file at a time: the cap must hold the live file and one more.
		return nil, fmt.Errorf("logship: MaxDiskBytes (-max-disk-bytes) %d must be at least twice RotateBytes "+
			"(-rotate-bytes), which must be set: got %d", cfg.MaxDiskBytes, cfg.RotateBytes)
	}
	if cfg.DropLogInterval <= 0 {
		cfg.DropLogInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Shipper{cfg: cfg, log: cfg.Logger, buf: make([]byte, cfg.MaxBatchBytes)}
	s.prog.MaxDiskBytes = cfg.MaxDiskBytes
	return s, nil
}

// Progress returns a snapshot of the shipper's progress.
func (s *Shipper) Progress() Progress {
	s.mu.Lock()
	p := s.prog
	s.mu.Unlock()
	// Pending: the rest of the file being read, the rotated files after it, the live file.
	p.PendingBytes = p.Size - p.Offset
	curSeq, readingSegment := s.segmentSeq(p.File)
	for _, seg := range s.segments() {
		if readingSegment && seg.seq > curSeq {
			p.PendingBytes += seg.size
		}
	}
	if fi, err := os.Stat(s.cfg.Path); err == nil {
		if inodeOf(fi) == p.Inode {
			p.Size = fi.Size()
			p.PendingBytes = fi.Size() - p.Offset
		} else {
			p.PendingBytes += fi.Size()
		}
	}
	return p
}

// Run ships until ctx ends; it returns ctx's error, or an error that stops
// shipping for good (the checkpoint cannot be read).
func (s *Shipper) Run(ctx context.Context) error {
	if err := s.openAtStart(ctx); err != nil {
		return err
	}
	defer func() { s.f.Close() }()
	defer s.logDrops(true)
	for {
		if err := s.shipAvailable(ctx); err != nil {
			return err
		}
		switched, err := s.checkFile(ctx)
		if err != nil {
			return err
		}
		if switched {
			continue
		}
		if err := sleep(ctx, s.cfg.Interval); err != nil {
			return err
		}
	}
}

// ---------------------------------------------------------------- files

func (s *Shipper) openAtStart(ctx context.Context) error {
	cp, err := loadCheckpoint(s.cfg.CheckpointPath)
	if err != nil {
		return err
	}
	s.prog.DroppedSince = time.Now().UTC()
	if cp != nil {
		s.prog.RecordsDropped, s.prog.BytesDropped = cp.RecordsDropped, cp.BytesDropped
		if !cp.DroppedSince.IsZero() {
			s.prog.DroppedSince = cp.DroppedSince
		}
		if name := s.findCheckpointed(*cp); name != "" {
			if err := s.open(name, cp.Offset); err != nil {
				return err
			}
			s.log.Info("resuming from checkpoint", "file", name, "offset", s.offset)
			return nil
		}
		s.log.Warn("the checkpointed file is gone; starting at the beginning of the oldest file",
			"checkpoint", cp.Path, "inode", cp.Inode, "offset", cp.Offset)
	}
	for {
		oldest := s.cfg.Path
		if segs := s.segments(); len(segs) > 0 {
			oldest = segs[0].name
		}
		if _, err := os.Stat(oldest); err == nil {
			if err := s.open(oldest, 0); err != nil {
				return err
			}
			s.saveCheckpoint()
			return nil
		}
		s.setWaiting(true)
		if err := sleep(ctx, s.cfg.Interval); err != nil {
			return err
		}
	}
}

// findCheckpointed returns the name the checkpointed file has now: Path, or a
// rotated sibling (Path + suffix), identified by inode and fingerprint.
func (s *Shipper) findCheckpointed(cp Checkpoint) string {
	candidates := []string{s.cfg.Path}
	if entries, err := os.ReadDir(filepath.Dir(s.cfg.Path)); err == nil {
		base := filepath.Base(s.cfg.Path)
		for _, e := range entries {
			if e.Name() != base && strings.HasPrefix(e.Name(), base) && e.Type().IsRegular() {
				candidates = append(candidates, filepath.Join(filepath.Dir(s.cfg.Path), e.Name()))
			}
		}
	}
	for _, name := range candidates {
		fi, err := os.Stat(name)
		if err != nil || inodeOf(fi) != cp.Inode {
			continue
		}
		if fp, err := fingerprint(name, cp.FingerprintLen); err == nil && fp == cp.Fingerprint {
			return name
		}
	}
	return ""
}

func (s *Shipper) open(name string, offset int64) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if fi.Size() < offset {
		s.log.Warn("file is shorter than the checkpoint (truncated): starting at its beginning",
			"file", name, "size", fi.Size(), "offset", offset)
		offset = 0
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.name, s.inode, s.offset = f, name, inodeOf(fi), offset
	s.fp, s.fpLen = "", 0
	s.refreshFingerprint()
	s.mu.Lock()
	s.prog.File, s.prog.Inode, s.prog.Offset, s.prog.Size, s.prog.Waiting = name, s.inode, offset, fi.Size(), false
	s.mu.Unlock()
	return nil
}

// checkFile rotates the file and enforces the disk cap when configured to,
// notices truncation, and moves on once the file being read is complete (a
// newer file exists: the writer has reopened). It reports whether it switched
// files (there may be more to read at once).
func (s *Shipper) checkFile(ctx context.Context) (bool, error) {
	if s.cfg.MaxDiskBytes > 0 {
		if s.enforceCap(ctx) {
			return true, nil
		}
	} else {
		s.rotateIfDue(ctx)
	}
	curSeq, isSegment := s.segmentSeq(s.name)
	fi, err := os.Stat(s.cfg.Path)
	if !isSegment && err == nil && inodeOf(fi) == s.inode {
		if fi.Size() < s.offset {
			s.log.Warn("file truncated: starting at its beginning", "file", s.cfg.Path,
				"size", fi.Size(), "offset", s.offset)
			s.offset, s.fp, s.fpLen = 0, "", 0
			s.saveCheckpoint()
			return true, nil
		}
		return false, nil
	}
	next := ""
	if isSegment {
		for _, seg := range s.segments() {
			if seg.seq > curSeq {
				next = seg.name
				break
			}
		}
	}
	if next == "" && err == nil && inodeOf(fi) != s.inode {
		next = s.cfg.Path
	}
	if next == "" {
		// Renamed away, the writer has not reopened yet: keep reading the old file.
		if isSegment && time.Since(s.lastReopen) > 5*time.Second {
			s.reopen(ctx)
		}
		return false, nil
	}
	// A newer file exists, so nothing more will be written to this one. Drain it.
	old := s.name
	if err := s.shipAvailable(ctx); err != nil {
		return false, err
	}
	if s.name != old { // the disk cap dropped it meanwhile
		return true, nil
	}
	if cur, err := s.f.Stat(); err == nil && cur.Size() > s.offset {
		s.countMalformed(1)
		s.log.Warn("rotated file ends with an incomplete line; skipped", "file", s.name,
			"bytes", cur.Size()-s.offset)
	}
	if err := s.open(next, 0); err != nil {
		return false, err
	}
	s.saveCheckpoint()
	if isSegment {
		if err := os.Remove(old); err != nil {
			s.log.Warn("removing the shipped rotated file", "file", old, "err", err)
		}
	}
	s.mu.Lock()
	s.prog.Rotations++
	s.mu.Unlock()
	s.log.Info("moved to the next file", "file", next, "previous", old)
	return true, nil
}

func (s *Shipper) reopen(ctx context.Context) {
	s.lastReopen = time.Now()
	if s.cfg.Reopen == nil {
		return
	}
	if err := s.cfg.Reopen(ctx); err != nil {
		s.log.Warn("asking the writer to reopen its log", "err", err)
	}
}

func fingerprint(name string, n int64) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// refreshFingerprint covers the first min(fingerprintSize, offset) bytes.
func (s *Shipper) refreshFingerprint() {
	want := min(s.offset, fingerprintSize)
	if s.fp != "" && s.fpLen == want {
		return
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(s.f, 0, want)); err != nil {
		return
	}
	s.fp, s.fpLen = hex.EncodeToString(h.Sum(nil)), want
}

func (s *Shipper) saveCheckpoint() {
	s.refreshFingerprint()
	s.mu.Lock()
	cp := Checkpoint{Path: s.name, Inode: s.inode, Offset: s.offset, Fingerprint: s.fp, FingerprintLen: s.fpLen,
		RecordsDropped: s.prog.RecordsDropped, BytesDropped: s.prog.BytesDropped, DroppedSince: s.prog.DroppedSince}
	s.mu.Unlock()
	if err := cp.save(s.cfg.CheckpointPath); err != nil {
		// Shipping goes on; a restart would resend from the last saved checkpoint.
		s.log.Error("saving the checkpoint", "path", s.cfg.CheckpointPath, "err", err)
	}
	s.mu.Lock()
	s.prog.File, s.prog.Inode, s.prog.Offset = s.name, s.inode, s.offset
	if fi, err := s.f.Stat(); err == nil {
		s.prog.Size = fi.Size()
	}
	s.mu.Unlock()
}

// ---------------------------------------------------------------- shipping

// shipAvailable ships every complete line from the checkpoint to the end of
// the current file, batch by batch; it returns only when there is no
// complete line left, or with ctx's error.
func (s *Shipper) shipAvailable(ctx context.Context) error {
	for {
		lines, end, err := s.readLines()
		if err != nil {
			s.log.Error("reading", "file", s.name, "err", err)
			return sleep(ctx, s.cfg.Interval)
		}
		if end == s.offset {
			return nil
		}
		logs, malformed := s.build(lines)
		if n := logs.LogRecordCount(); n > 0 {
			err := s.export(ctx, logs)
			if errors.Is(err, errDroppedPastCap) {
				continue // counted as dropped with the rest of its file; reading goes on in the next one
			}
			if err != nil {
				return err
			}
		}
		if malformed > 0 {
			s.countMalformed(malformed)
		}
		s.offset = end
		s.saveCheckpoint()
	}
}

// readLines returns the complete lines after the offset (at most
// MaxBatchRecords, about MaxBatchBytes) and the offset just past them.
func (s *Shipper) readLines() ([][]byte, int64, error) {
	for {
		n, err := s.f.ReadAt(s.buf, s.offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, s.offset, err
		}
		data := s.buf[:n]
		var lines [][]byte
		consumed := 0
		for len(lines) < s.cfg.MaxBatchRecords {
			i := bytes.IndexByte(data[consumed:], '\n')
			if i < 0 {
				break
			}
			lines = append(lines, data[consumed:consumed+i])
			consumed += i + 1
		}
		if consumed == 0 && n == len(s.buf) { // one line longer than the buffer
			if len(s.buf) >= maxLineBytes {
				return nil, s.offset, fmt.Errorf("a line at offset %d is longer than %d bytes", s.offset, maxLineBytes)
			}
			s.buf = make([]byte, 2*len(s.buf))
			continue
		}
		return lines, s.offset + int64(consumed), nil
	}
}

func (s *Shipper) build(lines [][]byte) (plog.Logs, uint64) {
	logs := plog.NewLogs()
	rl := logs.ResourceLogs().AppendEmpty()
	for k, v := range s.cfg.Resource {
		rl.Resource().Attributes().PutStr(k, v)
	}
	sl := rl.ScopeLogs()
	sl.AppendEmpty().Scope().SetName(s.cfg.ScopeName)
	sl.At(0).LogRecords().EnsureCapacity(len(lines))
	now := time.Now()
	var malformed uint64
	for _, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := appendRecord(sl, line, now); err != nil {
			malformed++
			s.log.Warn("skipping a malformed line", "file", s.name, "err", err, "line", truncate(line, 200))
		}
	}
	return logs, malformed
}

// export sends one batch until the receiver accepts it or ctx ends.
func (s *Shipper) export(ctx context.Context, logs plog.Logs) error {
	backoff := s.cfg.MinBackoff
	for {
		err := s.cfg.Exporter.Export(ctx, logs)
		var rejected *RejectedError
		if err == nil || errors.As(err, &rejected) {
			s.mu.Lock()
			if rejected != nil {
				s.prog.RecordsRejected += uint64(rejected.Rejected)
				s.log.Error("the receiver rejected records for good", "rejected", rejected.Rejected, "msg", rejected.Message)
			}
			if s.prog.ConsecutiveFailures > 0 {
				s.log.Info("export succeeded again", "after_failures", s.prog.ConsecutiveFailures)
			}
			s.prog.RecordsShipped += uint64(logs.LogRecordCount())
			s.prog.BatchesShipped++
			s.prog.ConsecutiveFailures = 0
			s.prog.LastShipped = time.Now()
			s.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.mu.Lock()
		s.prog.ExportFailures++
		s.prog.ConsecutiveFailures++
		s.prog.LastError = err.Error()
		failures := s.prog.ConsecutiveFailures
		s.mu.Unlock()
		if failures == 1 || failures%20 == 0 {
			s.log.Warn("export failed; retrying", "records", logs.LogRecordCount(), "failures", failures,
				"next_in", backoff, "err", err)
		}
		if err := s.waitRetry(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
}

// waitRetry waits d before the next attempt; meanwhile, each Interval, the
// file keeps rotating and the disk cap holds (the outage is when it matters).
// errDroppedPastCap: the batch's file was dropped.
func (s *Shipper) waitRetry(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if s.enforceCap(ctx) {
			return errDroppedPastCap
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if err := sleep(ctx, min(left, s.cfg.Interval)); err != nil {
			return err
		}
	}
}

func (s *Shipper) countMalformed(n uint64) {
	s.mu.Lock()
	s.prog.MalformedLines += n
	s.mu.Unlock()
}

func (s *Shipper) setWaiting(w bool) {
	s.mu.Lock()
	s.prog.Waiting = w
	s.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
