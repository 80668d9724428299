// Command procmetrics samples the CPU time and memory of the local stack's
// processes from /proc every -interval and exports them as OTLP metrics to
// the Collector: process.cpu.time (cumulative seconds, state=user|system),
// process.memory.usage (RSS bytes), process.memory.virtual, process.threads,
// each process one resource with service.name (the stack component) and
// process.pid. It stands in for the Collector's hostmetrics process scraper,
// which cannot be built here.
//
// Which processes: every process group named by a pid file in -pid-dir (the
// stack writes DIR/<component>.pid; each component runs in its own session,
// so ClickHouse's engine counts with its supervisor), re-read every sample so
// restarted components are followed; and -pid service=pid for any other.
//
// Samples are taken at whole seconds (whole -interval) of the wall clock,
// because the ClickHouse exporter stores metric timestamps in seconds.
//
// Metrics are best effort: a sample the Collector does not take is dropped
// (the next one carries the cumulative CPU time anyway).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wirelens/wirelens/collector/internal/procmetrics"
	"github.com/wirelens/wirelens/internal/cli"
)

func main() {
	cli.Main("procmetrics", run)
}

type pidFlags map[int]string

func (p pidFlags) String() string { return fmt.Sprint(map[int]string(p)) }
func (p pidFlags) Set(v string) error {
	name, pidText, ok := strings.Cut(v, "=")
	pid, err := strconv.Atoi(pidText)
	if !ok || name == "" || err != nil || pid <= 0 {
		return fmt.Errorf("want service=pid, got %q", v)
	}
	p[pid] = name
	return nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("procmetrics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pidDir := fs.String("pid-dir", "", "directory of the stack's <component>.pid files (JSON {\"pid\": N})")
	pids := pidFlags{}
	fs.Var(pids, "pid", "service=pid: also sample this process (repeatable)")
	endpoint := fs.String("endpoint", "127.0.0.1:4317", "the Collector's OTLP/gRPC endpoint (host:port)")
	interval := fs.Duration("interval", time.Second, "sampling interval")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on one export")
	listen := fs.String("listen", "127.0.0.1:0", "address of the /healthz and /samples endpoint")
	procRoot := fs.String("proc", "/proc", "procfs mount")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *pidDir == "" && len(pids) == 0 {
		return errors.New("nothing to sample: give -pid-dir or -pid")
	}
	proc := procmetrics.Proc{Root: *procRoot}
	boot, err := proc.BootTime()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pmetricotlp.NewGRPCClient(conn)
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	var mu sync.Mutex
	var last []procmetrics.Sample
	var exported, failed uint64
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /samples", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"exported": exported, "failed": failed, "samples": last})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Close()
	logger.Info("procmetrics", "pid_dir", *pidDir, "endpoint", *endpoint, "interval", *interval, "listen", lis.Addr().String())

	failures := 0
	for {
		var groups []procmetrics.Group
		if *pidDir != "" {
			groups, _ = procmetrics.StackGroups(*pidDir)
		}
		now := time.Now()
		samples := proc.SampleGroups(groups, pids)
		if len(samples) > 0 {
			ectx, cancel := context.WithTimeout(ctx, *timeout)
			_, err := client.Export(ectx, pmetricotlp.NewExportRequestFromMetrics(procmetrics.Metrics(samples, boot, now)))
			cancel()
			mu.Lock()
			last = samples
			if err != nil {
				failed++
			} else {
				exported++
			}
			mu.Unlock()
			if err != nil && ctx.Err() == nil {
				failures++
				if failures == 1 || failures%60 == 0 {
					logger.Warn("export failed (sample dropped)", "failures", failures, "err", err)
				}
			} else if err == nil {
				failures = 0
			}
		}
		// Sample on whole intervals of the wall clock: the ClickHouse
		// exporter stores TimeUnix in whole seconds, so a sample taken just
		// after the second starts loses only a few milliseconds there.
		wait := time.NewTimer(time.Until(time.Now().Truncate(*interval).Add(*interval)))
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil
		case <-wait.C:
		}
	}
}
