package logship

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// GRPCExporter sends OTLP/gRPC log exports (plaintext: a loopback Collector).
type GRPCExporter struct {
	conn    *grpc.ClientConn
	client  plogotlp.GRPCClient
	metrics pmetricotlp.GRPCClient
	timeout time.Duration
}

// NewGRPCExporter connects lazily to endpoint (host:port); timeout bounds each export.
func NewGRPCExporter(endpoint string, timeout time.Duration) (*GRPCExporter, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &GRPCExporter{conn: conn, client: plogotlp.NewGRPCClient(conn),
		metrics: pmetricotlp.NewGRPCClient(conn), timeout: timeout}, nil
}

// Export returns nil only when the Collector answered OK; a partial success
// is a *RejectedError.
func (e *GRPCExporter) Export(ctx context.Context, logs plog.Logs) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.client.Export(ctx, plogotlp.NewExportRequestFromLogs(logs))
	if err != nil {
		return err
	}
	if ps := resp.PartialSuccess(); ps.RejectedLogRecords() > 0 {
		return &RejectedError{Rejected: ps.RejectedLogRecords(), Message: ps.ErrorMessage()}
	}
	return nil
}

// ExportMetrics sends the shipper's own metrics over the same connection.
func (e *GRPCExporter) ExportMetrics(ctx context.Context, md pmetric.Metrics) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	_, err := e.metrics.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
	return err
}

// Close closes the connection.
func (e *GRPCExporter) Close() error { return e.conn.Close() }
