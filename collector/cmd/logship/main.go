// Command logship tails Envoy's JSON-lines access log and ships every line to
// an OpenTelemetry Collector as an OTLP log record, durably: its checkpoint
// moves past a batch only once the Collector has acknowledged it, and a
// failed export is retried forever (with backoff). See internal/logship.
//
// With -max-disk-bytes the access log and its rotated, unshipped files are
// capped: past the cap the oldest records are dropped, counted
// (records_dropped in /progress, kept in the checkpoint) and logged once per
// -drop-log-interval. The counts also go to the Collector as OTLP metrics
// (wirelens.logship.dropped_records, …) every -metrics-interval, so that
// `wirelens report` can show the drops of its window.
//
// It serves GET /healthz and GET /progress (JSON: file, offset, pending
// bytes, records shipped and dropped, disk use, export failures, last error)
// on -listen.
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
	"strings"
	"time"

	"github.com/wirelens/wirelens/collector/internal/logship"
	"github.com/wirelens/wirelens/internal/cli"
)

func main() {
	cli.Main("logship", run)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("logship", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg logship.Config
	fs.StringVar(&cfg.Path, "file", "", "the JSON-lines access log to ship (required)")
	fs.StringVar(&cfg.CheckpointPath, "checkpoint", "", "checkpoint file (default FILE.checkpoint)")
	endpoint := fs.String("endpoint", "127.0.0.1:4317", "the Collector's OTLP/gRPC endpoint (host:port)")
	resource := fs.String("resource", "service.name=wirelens-envoy", "resource attributes of every record: k=v,k=v")
	fs.StringVar(&cfg.ScopeName, "scope", "", "instrumentation scope name of every record")
	listen := fs.String("listen", "127.0.0.1:0", "address of the /healthz and /progress endpoint")
	fs.IntVar(&cfg.MaxBatchRecords, "batch", 1000, "records per export at most")
	fs.DurationVar(&cfg.Interval, "interval", 500*time.Millisecond, "how often to look for new lines")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on one export attempt")
	fs.DurationVar(&cfg.MaxBackoff, "max-backoff", 5*time.Second, "longest wait between retries of a failed export")
	fs.Int64Var(&cfg.RotateBytes, "rotate-bytes", 0, "once the file holds this many bytes, all shipped: rename it to FILE.1, "+
		"POST -reopen-url, ship the rest of FILE.1 and remove it (0: never rotate)")
	fs.Int64Var(&cfg.MaxDiskBytes, "max-disk-bytes", 0, "cap on the bytes of FILE and its rotated, unshipped files; past it the "+
		"oldest records are dropped and counted (needs -rotate-bytes, at most half of it; 0: no cap)")
	fs.DurationVar(&cfg.DropLogInterval, "drop-log-interval", 10*time.Second, "at most one log message about dropped records per interval")
	metricsInterval := fs.Duration("metrics-interval", 10*time.Second, "how often to send the drop counters as OTLP metrics (0: never)")
	metricsService := fs.String("metrics-service", "wirelens-logship", "service.name of those metrics")
	reopenURL := fs.String("reopen-url", "", "URL to POST after rotating so the writer reopens FILE (Envoy: http://ADMIN/reopen_logs)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: logship -file PATH [flags]\n\nShips a JSON-lines access log to an OTLP/gRPC Collector, at least once, never skipping a line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cfg.Path == "" {
		return errors.New("-file is required")
	}
	attrs, err := parseResource(*resource)
	if err != nil {
		return err
	}
	cfg.Resource = attrs
	exporter, err := logship.NewGRPCExporter(*endpoint, *timeout)
	if err != nil {
		return err
	}
	defer exporter.Close()
	cfg.Exporter = exporter
	if *reopenURL != "" {
		cfg.Reopen = func(ctx context.Context) error { return post(ctx, *reopenURL) }
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger = logger
	shipper, err := logship.New(cfg)
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /progress", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(shipper.Progress())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Close()
	if *metricsInterval > 0 {
		go sendMetrics(ctx, exporter, shipper, *metricsService, cfg.Path, *metricsInterval, logger)
	}
	logger.Info("logship", "file", cfg.Path, "endpoint", *endpoint, "listen", lis.Addr().String())

	err = shipper.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// sendMetrics exports the shipper's counters every interval. A failed export
// is not retried: the counters are cumulative, the next one carries them.
func sendMetrics(ctx context.Context, exporter *logship.GRPCExporter, shipper *logship.Shipper, service, path string,
	interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			err := exporter.ExportMetrics(ctx, shipper.Progress().Metrics(service, path, now))
			if err != nil && !failing {
				logger.Warn("sending logship's metrics failed; trying again each interval", "err", err)
			}
			failing = err != nil
		}
	}
}

func parseResource(text string) (map[string]string, error) {
	attrs := map[string]string{}
	for _, kv := range strings.Split(text, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("-resource: %q is not key=value", kv)
		}
		attrs[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return attrs, nil
}

func post(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}
