// Package procmetrics samples the CPU time and memory of processes from
// /proc and turns the samples into OTLP metrics, in the shape the
// Collector's hostmetrics process scraper uses (which cannot be built here):
//
//	process.cpu.time       Sum, cumulative, monotonic, seconds; attribute state=user|system
//	process.memory.usage   Gauge, bytes (resident set size)
//	process.memory.virtual Gauge, bytes
//	process.threads        Gauge, threads
//
// Each process is one resource: service.name (the component it belongs to),
// process.pid, process.parent_pid, process.executable.name.
package procmetrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const ClockTicks = 100

// Sample is one reading of one process.
type Sample struct {
	Service    string
	PID        int
	PPID       int
	PGID       int
	Comm       string
	UserTicks  uint64
	SysTicks   uint64
	Threads    int64
	StartTicks uint64 // since boot
	RSSBytes   int64
	VSizeBytes int64
}

// UserSeconds and SystemSeconds are the cumulative CPU times.
func (s Sample) UserSeconds() float64   { return float64(s.UserTicks) / ClockTicks }
func (s Sample) SystemSeconds() float64 { return float64(s.SysTicks) / ClockTicks }

// Proc reads /proc (or a copy of it, for tests).
type Proc struct {
	Root string // "/proc" by default
}

func (p Proc) root() string {
	if p.Root == "" {
		return "/proc"
	}
	return p.Root
}

// Read samples one process: /proc/<pid>/stat for CPU, threads and process
// group, /proc/<pid>/status for the resident set (VmRSS).
func (p Proc) Read(pid int) (Sample, error) {
	dir := filepath.Join(p.root(), strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Sample{}, err
	}
	s, err := parseStat(string(stat))
	if err != nil {
		return Sample{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	s.PID = pid
	s.RSSBytes = -1
	if status, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		if kb, ok := statusKB(string(status), "VmRSS:"); ok {
			s.RSSBytes = kb * 1024
		}
	}
	if s.RSSBytes < 0 { // kernel threads and zombies have no VmRSS line
		s.RSSBytes = 0
	}
	return s, nil
}

// parseStat reads the fields of /proc/<pid>/stat that matter here. The
// command name (field 2) is in parentheses and may contain spaces and ')'.
func parseStat(text string) (Sample, error) {
	open, close := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || close < open {
		return Sample{}, errors.New("no (comm)")
	}
	fields := strings.Fields(text[close+1:])
	// fields[0] is field 3 (state): field N is fields[N-3].
	if len(fields) < 22 {
		return Sample{}, fmt.Errorf("%d fields after comm, want ≥ 22", len(fields))
	}
	num := func(n int) uint64 {
		v, _ := strconv.ParseUint(fields[n-3], 10, 64)
		return v
	}
	inum := func(n int) int64 {
		v, _ := strconv.ParseInt(fields[n-3], 10, 64)
		return v
	}
	return Sample{
		Comm:       text[open+1 : close],
		PPID:       int(inum(4)),
		PGID:       int(inum(5)),
		UserTicks:  num(14),
		SysTicks:   num(15),
		Threads:    inum(20),
		StartTicks: num(22),
		VSizeBytes: inum(23),
		RSSBytes:   inum(24) * int64(os.Getpagesize()),
	}, nil
}

func statusKB(text, key string) (int64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				v, err := strconv.ParseInt(f[0], 10, 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}

// BootTime is the system's boot time (btime in /proc/stat): process start
// times are ticks after it.
func (p Proc) BootTime() (time.Time, error) {
	data, err := os.ReadFile(filepath.Join(p.root(), "stat"))
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}

// Group is a process group to sample as one named service.
type Group struct {
	Service string
	PGID    int
}

// StackGroups reads the local stack's pid files (DIR/<component>.pid, JSON
// {"pid": N, "argv0": …}): each component runs in its own session, so its
// pid is the process group of everything it started (e.g. ClickHouse's
// supervisor and engine).
func StackGroups(dir string) ([]Group, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return nil, err
	}
	var groups []Group
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // stopped meanwhile
		}
		var rec struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal(data, &rec) != nil || rec.PID <= 0 {
			continue
		}
		groups = append(groups, Group{Service: strings.TrimSuffix(filepath.Base(path), ".pid"), PGID: rec.PID})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Service < groups[j].Service })
	return groups, nil
}

// SampleGroups samples every process in the given process groups, plus
// single pids named explicitly.
func (p Proc) SampleGroups(groups []Group, pids map[int]string) []Sample {
	byPGID := map[int]string{}
	for _, g := range groups {
		byPGID[g.PGID] = g.Service
	}
	entries, _ := os.ReadDir(p.root())
	var out []Sample
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		service, named := pids[pid]
		if !named && len(byPGID) == 0 {
			continue
		}
		s, err := p.Read(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if !named {
			if service, named = byPGID[s.PGID]; !named {
				continue
			}
		}
		s.Service = service
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Metrics turns samples taken at now into OTLP metrics, one resource per process.
func Metrics(samples []Sample, boot, now time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(now)
	for _, s := range samples {
		rm := md.ResourceMetrics().AppendEmpty()
		attrs := rm.Resource().Attributes()
		attrs.PutStr("service.name", s.Service)
		attrs.PutInt("process.pid", int64(s.PID))
		attrs.PutInt("process.parent_pid", int64(s.PPID))
		attrs.PutStr("process.executable.name", s.Comm)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("github.com/wirelens/wirelens/collector/internal/procmetrics")
		start := pcommon.NewTimestampFromTime(boot.Add(time.Duration(s.StartTicks) * time.Second / ClockTicks))

		cpu := sm.Metrics().AppendEmpty()
		cpu.SetName("process.cpu.time")
		cpu.SetDescription("Total CPU seconds broken down by different states.")
		cpu.SetUnit("s")
		sum := cpu.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sum.SetIsMonotonic(true)
		for _, st := range []struct {
			state string
			value float64
		}{{"user", s.UserSeconds()}, {"system", s.SystemSeconds()}} {
			dp := sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(st.value)
			dp.Attributes().PutStr("state", st.state)
		}

		gauge := func(name, desc, unit string, value int64) {
			m := sm.Metrics().AppendEmpty()
			m.SetName(name)
			m.SetDescription(desc)
			m.SetUnit(unit)
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(value)
		}
		gauge("process.memory.usage", "The amount of physical memory in use (resident set size).", "By", s.RSSBytes)
		gauge("process.memory.virtual", "Virtual memory size.", "By", s.VSizeBytes)
		gauge("process.threads", "Process threads count.", "{thread}", s.Threads)
	}
	return md
}
