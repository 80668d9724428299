package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wirelens/wirelens/internal/chclient"
	"github.com/wirelens/wirelens/internal/cli"
)

// ClickHouse runs the report's queries and decodes their answers into
// typed results. Parameters travel as query parameters (param_<name>),
// never spliced into the SQL text.
type ClickHouse struct {
	client *chclient.Client
}

// NewClickHouse is the report's view of the ClickHouse HTTP interface at
// endpoint (e.g. http://127.0.0.1:8123); timeout bounds each query (0: 60 s).
func NewClickHouse(endpoint string, timeout time.Duration) (*ClickHouse, error) {
	c, err := chclient.New(endpoint, timeout)
	if err != nil {
		return nil, err
	}
	return &ClickHouse{client: c}, nil
}

// String is the endpoint without credentials, as the report shows it.
func (c *ClickHouse) String() string { return c.client.String() }

// Column is one column of a result, as ClickHouse describes it.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Result is a query's answer: its own column names and types, and its rows.
// A cell is a json.Number, a string, a bool, nil or a []any, as decoded from
// ClickHouse's JSONCompact output.
type Result struct {
	Columns  []Column
	Rows     [][]any
	Timezone string // the server's time zone (X-ClickHouse-Timezone), in which it writes times
}

// Location is the time zone the result's times are written in (UTC if unknown).
func (r *Result) Location() *time.Location {
	if r.Timezone != "" {
		if loc, err := time.LoadLocation(r.Timezone); err == nil {
			return loc
		}
	}
	return time.UTC
}

// Index returns the position of the named column, or -1.
func (r *Result) Index(name string) int {
	for i, c := range r.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// UnreachableError means nothing answered at the URL (refused, DNS, timeout).
type UnreachableError = cli.UnreachableError

// QueryError is ClickHouse refusing or failing a query; Message is its own text.
type QueryError = chclient.Error

// jsonCompact asks for the whole result as JSONCompact with whole numbers as
// JSON numbers (not strings), and for an HTTP error rather than a result
// cut short by an exception.
var jsonCompact = url.Values{
	"default_format": {"JSONCompact"},
	"output_format_json_quote_64bit_integers": {"0"},
	"wait_end_of_query":                       {"1"},
}

// Query runs one statement (a trailing semicolon is allowed) with the given
// parameters and returns its result.
func (c *ClickHouse) Query(ctx context.Context, sql string, params map[string]string) (*Result, error) {
	answer, err := c.client.Exec(ctx, sql, jsonCompact, params)
	if err != nil {
		return nil, err
	}
	res, err := decodeJSONCompact(answer.Body, c.client.String())
	if err != nil {
		return nil, err
	}
	res.Timezone = answer.Header.Get("X-ClickHouse-Timezone")
	return res, nil
}

// QueryAs runs one statement with the given parameters and returns ClickHouse's
// answer as it wrote it in format (TabSeparatedWithNames, PrettyCompact,
// JSONEachRow, ...), for printing or for other programs to read.
func (c *ClickHouse) QueryAs(ctx context.Context, sql, format string, params map[string]string) ([]byte, error) {
	answer, err := c.client.Exec(ctx, sql, url.Values{"default_format": {format}, "wait_end_of_query": {"1"}}, params)
	if err != nil {
		return nil, err
	}
	return answer.Body, nil
}

func decodeJSONCompact(data []byte, base string) (*Result, error) {
	var doc struct {
		Meta      []Column          `json:"meta"`
		Data      []json.RawMessage `json:"data"`
		Exception string            `json:"exception"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding ClickHouse's answer from %s (%s): %w", base, snippet(data), err)
	}
	if doc.Exception != "" {
		return nil, &QueryError{URL: base, Status: http.StatusOK, Message: doc.Exception}
	}
	res := &Result{Columns: doc.Meta, Rows: make([][]any, 0, len(doc.Data))}
	for i, raw := range doc.Data {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var row []any
		if err := d.Decode(&row); err != nil {
			return nil, fmt.Errorf("decoding row %d of ClickHouse's answer from %s: %w", i+1, base, err)
		}
		if len(row) != len(res.Columns) {
			return nil, fmt.Errorf("row %d of ClickHouse's answer from %s has %d cells for %d columns",
				i+1, base, len(row), len(res.Columns))
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func snippet(data []byte) string {
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
