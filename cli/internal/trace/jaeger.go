// Package trace fetches one trace from Jaeger's HTTP API (/api/traces/<id>)
// and prints it as an indented tree of spans with the wirelens tags.
package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/wirelens/wirelens/internal/cli"
)

// Document is the answer of Jaeger's /api/traces/<id>.
type Document struct {
	Data   []Trace    `json:"data"`
	Errors []APIError `json:"errors"`
}

// APIError is one entry of a Jaeger API answer's errors.
type APIError struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

// Trace is one trace in Jaeger's JSON model.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
	Warnings  []string           `json:"warnings"`
}

// Span is one span in Jaeger's JSON model; times in microseconds.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []KeyValue  `json:"tags"`
	ProcessID     string      `json:"processID"`
	Warnings      []string    `json:"warnings"`
}

// Reference links a span to its parent (CHILD_OF) or predecessor (FOLLOWS_FROM).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the service that emitted spans.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Client reads Jaeger's query API.
type Client struct {
	URL    string
	Client *http.Client // nil: a client with a 30 s timeout
}

// NotFoundError means Jaeger has no trace with that id (yet).
type NotFoundError struct{ ID, URL string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("trace %s not found in Jaeger at %s (spans arrive a few seconds after the call)", e.ID, e.URL)
}

// UnreachableError means nothing answered at Jaeger's URL.
type UnreachableError = cli.UnreachableError

var traceIDRe = regexp.MustCompile(`^[0-9a-fA-F]{1,32}$`)

// UIURL is the page of one trace in Jaeger's UI, served by the query service at base
// (the same address as its API).
func UIURL(base, id string) string {
	return strings.TrimRight(base, "/") + "/trace/" + id
}

// ValidID checks a trace id: 1 to 32 hex digits.
func ValidID(id string) error {
	if !traceIDRe.MatchString(id) {
		return fmt.Errorf("%q is not a trace id: expected up to 32 hexadecimal digits", id)
	}
	return nil
}

// Fetch reads one trace.
func (c *Client) Fetch(ctx context.Context, id string) (*Trace, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	base := strings.TrimRight(c.URL, "/")
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("Jaeger URL %q: expected http://host:port", c.URL)
	}
	hc := c.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/traces/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, fmt.Errorf("building the Jaeger request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &UnreachableError{Service: "Jaeger", URL: base, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading Jaeger's answer from %s: %w", base, err)
	}
	var doc Document
	jsonErr := json.Unmarshal(data, &doc)
	if resp.StatusCode == http.StatusNotFound {
		return nil, &NotFoundError{ID: id, URL: base}
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if jsonErr == nil && len(doc.Errors) > 0 {
			msg = doc.Errors[0].Msg
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return nil, fmt.Errorf("Jaeger at %s answered HTTP %d for trace %s: %s", base, resp.StatusCode, id, msg)
	}
	if jsonErr != nil {
		return nil, fmt.Errorf("decoding Jaeger's answer from %s: %w", base, jsonErr)
	}
	if len(doc.Data) == 0 || len(doc.Data[0].Spans) == 0 {
		return nil, &NotFoundError{ID: id, URL: base}
	}
	return &doc.Data[0], nil
}
