package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wirelens/wirelens/services/internal/cli"
)

// ClickHouse runs queries over ClickHouse's HTTP interface. Parameters travel
// as query parameters (param_<name>), never spliced into the SQL text.
type ClickHouse struct {
	URL    string       // base URL of the HTTP interface, e.g. http://127.0.0.1:8123
	Client *http.Client // nil: a client with Timeout
	// Timeout bounds each query (0: 60 s) when Client is nil.
	Timeout time.Duration
}

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
type QueryError struct {
	URL     string
	Status  int
	Code    string // X-ClickHouse-Exception-Code, if any
	Message string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("ClickHouse at %s answered HTTP %d: %s", e.URL, e.Status, e.Message)
}

func (c *ClickHouse) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	return &http.Client{Timeout: timeout}
}

// Query runs one statement (a trailing semicolon is allowed) with the given
// parameters and returns its result.
func (c *ClickHouse) Query(ctx context.Context, sql string, params map[string]string) (*Result, error) {
	base := strings.TrimRight(c.URL, "/")
	u, err := url.Parse(base + "/")
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("ClickHouse URL %q: expected http://host:port", c.URL)
	}
	q := u.Query()
	q.Set("default_format", "JSONCompact")
	// Whole numbers as JSON numbers, not strings; the full result or an HTTP error.
	q.Set("output_format_json_quote_64bit_integers", "0")
	q.Set("wait_end_of_query", "1")
	for name, value := range params {
		q.Set("param_"+name, value)
	}
	u.RawQuery = q.Encode()

	body := strings.TrimRight(strings.TrimSpace(sql), ";")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the ClickHouse request: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := c.client().Do(req)
	if err != nil {
		if ctx.Err() != nil { // interrupted, not unreachable
			return nil, fmt.Errorf("query to ClickHouse at %s: %w", base, ctx.Err())
		}
		return nil, &UnreachableError{Service: "ClickHouse", URL: base, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("reading ClickHouse's answer from %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if msg == "" {
			msg = resp.Status
		}
		return nil, &QueryError{URL: base, Status: resp.StatusCode,
			Code: resp.Header.Get("X-ClickHouse-Exception-Code"), Message: msg}
	}
	res, err := decodeJSONCompact(data, base)
	if err != nil {
		return nil, err
	}
	res.Timezone = resp.Header.Get("X-ClickHouse-Timezone")
	return res, nil
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
