package logship

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Rotated files and the disk cap.
//
// With RotateBytes the shipper renames the access log to Path.<seq> (seq
// counting up) once it holds RotateBytes, asks the writer to reopen Path, and
// reads the rotated files oldest first, removing each once shipped. Without a
// cap it rotates only a fully shipped file. With MaxDiskBytes it also rotates
// a file not yet shipped (the Collector is down or refuses), so that the
// backlog is a chain of files; when the chain and Path together hold more than
// MaxDiskBytes, it drops the oldest file from the checkpoint on, counts the
// records it held (RecordsDropped, kept in the checkpoint so the count
// survives a restart) and goes on with the next file. Disk use thus stays at
// most MaxDiskBytes plus what the writer appends between two checks (one
// Interval).

// segment is a file the shipper rotated away: Path.<seq>.
type segment struct {
	name  string
	seq   uint64
	inode uint64
	size  int64
}

// segmentSeq tells whether name is one of the shipper's rotated files and its place in the chain.
func (s *Shipper) segmentSeq(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, s.cfg.Path+".")
	if !ok || digits == "" {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}

// segments lists the rotated files oldest first.
func (s *Shipper) segments() []segment {
	entries, err := os.ReadDir(filepath.Dir(s.cfg.Path))
	if err != nil {
		return nil
	}
	var segs []segment
	for _, e := range entries {
		name := filepath.Join(filepath.Dir(s.cfg.Path), e.Name())
		seq, ok := s.segmentSeq(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			continue
		}
		segs = append(segs, segment{name: name, seq: seq, inode: inodeOf(fi), size: fi.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].seq < segs[j].seq })
	return segs
}

// rotateIfDue renames the live file to the next Path.<seq> once it holds
// RotateBytes: always when it is all shipped, and with a disk cap also when it
// is not (the backlog becomes a droppable chain of files).
func (s *Shipper) rotateIfDue(ctx context.Context) {
	if s.cfg.RotateBytes <= 0 {
		return
	}
	fi, err := os.Stat(s.cfg.Path)
	if err != nil || fi.Size() < s.cfg.RotateBytes {
		return // not due, or renamed away and the writer has not reopened yet
	}
	reading := inodeOf(fi) == s.inode
	shipped := reading && s.offset == fi.Size()
	if !shipped && s.cfg.MaxDiskBytes <= 0 {
		return
	}
	var seq uint64 = 1
	if segs := s.segments(); len(segs) > 0 {
		seq = segs[len(segs)-1].seq + 1
	}
	rotated := fmt.Sprintf("%s.%d", s.cfg.Path, seq)
	if err := os.Rename(s.cfg.Path, rotated); err != nil {
		s.log.Warn("rotating", "file", s.cfg.Path, "err", err)
		return
	}
	if reading {
		s.name = rotated
		s.mu.Lock()
		s.prog.File = rotated
		s.mu.Unlock()
	}
	s.reopen(ctx)
}

// enforceCap rotates when due, removes rotated files left behind (shipped or
// dropped before a restart), and while the files hold more than MaxDiskBytes
// drops the oldest complete one. It reports whether the file being read was
// dropped: reading then goes on at the start of the next file.
func (s *Shipper) enforceCap(ctx context.Context) bool {
	if s.cfg.MaxDiskBytes <= 0 {
		return false
	}
	s.rotateIfDue(ctx)
	live, liveErr := os.Stat(s.cfg.Path)
	readingLive := liveErr == nil && inodeOf(live) == s.inode
	segs := s.segments()
	current := -1
	for i, seg := range segs {
		if seg.inode == s.inode {
			current = i
		}
	}
	if current < 0 && !readingLive {
		return false // reading a file someone else renamed away: not ours to remove
	}
	leftovers := segs // reading the live file: every rotated file was shipped or dropped
	if current >= 0 {
		leftovers = segs[:current]
	}
	for _, seg := range leftovers {
		if err := os.Remove(seg.name); err != nil {
			s.log.Warn("removing a rotated file already shipped or dropped", "file", seg.name, "err", err)
		}
	}
	var chain []segment
	if current >= 0 {
		chain = segs[current:]
	}
	var total int64
	for _, seg := range chain {
		total += seg.size
	}
	if liveErr == nil {
		total += live.Size()
	}
	dropped := false
	for total > s.cfg.MaxDiskBytes && len(chain) > 0 {
		next := ""
		switch {
		case len(chain) > 1:
			next = chain[1].name
		case liveErr == nil && !readingLive:
			next = s.cfg.Path
		}
		if next == "" {
			break // the writer has not reopened: the oldest file may still grow
		}
		records, size, err := s.countUnshipped()
		if err != nil {
			s.log.Error("counting the records of a file to drop", "file", s.name, "err", err)
			break
		}
		oldest := s.name
		if err := s.open(next, 0); err != nil {
			s.log.Error("opening the next file after a dropped one", "file", next, "err", err)
			break
		}
		s.mu.Lock()
		s.prog.RecordsDropped += records
		s.prog.BytesDropped += uint64(size)
		s.prog.Rotations++
		s.mu.Unlock()
		s.unloggedDrops += records
		s.saveCheckpoint() // the count moves with the checkpoint: a restart neither resends nor forgets them
		if err := os.Remove(oldest); err != nil {
			s.log.Warn("removing a dropped file", "file", oldest, "err", err)
		}
		total -= chain[0].size
		chain = chain[1:]
		dropped = true
	}
	s.mu.Lock()
	s.prog.DiskBytes = total
	s.mu.Unlock()
	s.logDrops(false)
	return dropped
}

// countUnshipped counts the records (non-empty lines, a last line without its
// newline included) and bytes of the current file after the checkpoint.
func (s *Shipper) countUnshipped() (records uint64, size int64, err error) {
	fi, err := s.f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size() - s.offset
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, s.offset, size), 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if len(bytes.TrimSpace(line)) > 0 && (err == nil || err == io.EOF || err == bufio.ErrBufferFull) {
			records++
		}
		for err == bufio.ErrBufferFull { // a line longer than the buffer: one record
			_, err = r.ReadSlice('\n')
		}
		if err == io.EOF {
			return records, size, nil
		}
		if err != nil {
			return records, size, err
		}
	}
}

// logDrops logs the records dropped since the last such message, at most
// once per DropLogInterval (force: now, e.g. at exit).
func (s *Shipper) logDrops(force bool) {
	if s.unloggedDrops == 0 || (!force && time.Since(s.lastDropLog) < s.cfg.DropLogInterval) {
		return
	}
	s.mu.Lock()
	total := s.prog.RecordsDropped
	s.mu.Unlock()
	s.log.Warn(fmt.Sprintf("dropped %d access-log records past the %s cap (total %d)",
		s.unloggedDrops, formatBytes(s.cfg.MaxDiskBytes), total),
		"records", s.unloggedDrops, "total", total, "max_disk_bytes", s.cfg.MaxDiskBytes)
	s.unloggedDrops, s.lastDropLog = 0, time.Now()
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
