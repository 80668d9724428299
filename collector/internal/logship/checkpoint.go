package logship

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Checkpoint is how far the shipper got: every complete line of the file with
// this inode before Offset has been accepted by the Collector. It is written
// only after the Collector acknowledged the batch that ends at Offset.
type Checkpoint struct {
	Path   string `json:"path"`   // the file's name when the checkpoint was written
	Inode  uint64 `json:"inode"`  // identifies the file across renames (rotation)
	Offset int64  `json:"offset"` // bytes shipped and acknowledged
	// The sha256 of the file's first FingerprintLen bytes: an inode number
	// can be reused by a new file once the old one is deleted.
	Fingerprint    string `json:"fingerprint"`
	FingerprintLen int64  `json:"fingerprint_len"`
	// Records and bytes dropped past the disk cap since DroppedSince: saved
	// with the checkpoint that moves past them, so they are counted exactly once.
	RecordsDropped uint64    `json:"records_dropped,omitempty"`
	BytesDropped   uint64    `json:"bytes_dropped,omitempty"`
	DroppedSince   time.Time `json:"dropped_since,omitzero"`
}

func loadCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return &cp, nil
}

// save writes the checkpoint atomically and durably: a temporary file,
// fsync, rename over the old one, fsync of the directory.
func (cp Checkpoint) save(path string) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func inodeOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
