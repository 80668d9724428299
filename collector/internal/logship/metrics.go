package logship

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Metric names of the shipper's own counters, sent as OTLP metrics to the
// Collector (otel.otel_metrics_sum, otel.otel_metrics_gauge in ClickHouse),
// where `wirelens report` reads the drops of its window.
const (
	MetricDroppedRecords = "wirelens.logship.dropped_records"
	MetricDroppedBytes   = "wirelens.logship.dropped_bytes"
	MetricDiskBytes      = "wirelens.logship.disk_bytes"
)

// Metrics turns the progress into OTLP metrics: the drop counters as
// cumulative monotonic sums from DroppedSince (they survive restarts, so one
// series per checkpoint), the disk use as a gauge. The resource carries
// service.name and the file shipped.
func (p Progress) Metrics(serviceName, path string, now time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", serviceName)
	rm.Resource().Attributes().PutStr("wirelens.access_log.path", path)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("wirelens/logship")
	ts := pcommon.NewTimestampFromTime(now)
	start := pcommon.NewTimestampFromTime(p.DroppedSince)
	for _, c := range []struct {
		name, unit, description string
		value                   uint64
	}{
		{MetricDroppedRecords, "{record}", "access-log records dropped unshipped past the disk cap", p.RecordsDropped},
		{MetricDroppedBytes, "By", "access-log bytes dropped unshipped past the disk cap", p.BytesDropped},
	} {
		m := sm.Metrics().AppendEmpty()
		m.SetName(c.name)
		m.SetUnit(c.unit)
		m.SetDescription(c.description)
		sum := m.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sum.SetIsMonotonic(true)
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetIntValue(int64(c.value))
	}
	m := sm.Metrics().AppendEmpty()
	m.SetName(MetricDiskBytes)
	m.SetUnit("By")
	m.SetDescription("bytes of the access log and its rotated, unshipped files")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(p.DiskBytes)
	return md
}
