// Package chclient talks to ClickHouse over its HTTP interface: statements
// with typed query parameters ({name:Type} in the SQL, never spliced into
// the text) and JSONEachRow inserts. Credentials come from the URL's user
// info (http://user:password@host:8123), sent as HTTP basic auth.
//
// It is the one ClickHouse transport of the Go tools: the load generator
// records runs through it and the report decodes its answers.
package chclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wirelens/wirelens/internal/cli"
)

// DefaultTimeout bounds each statement when New is given no timeout.
const DefaultTimeout = 60 * time.Second

// maxAnswer caps what is read of one answer, so a runaway query cannot
// exhaust memory.
const maxAnswer = 256 << 20

// Client is one ClickHouse HTTP endpoint.
type Client struct {
	base *url.URL
	http *http.Client
}

// New parses the endpoint URL, e.g. http://127.0.0.1:8123 (http:// is
// assumed when no scheme is given). timeout bounds each statement; 0 means
// DefaultTimeout.
func New(endpoint string, timeout time.Duration) (*Client, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse URL %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("ClickHouse URL %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("ClickHouse URL %q has no host", endpoint)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{base: u, http: &http.Client{Timeout: timeout}}, nil
}

// WithLogin returns endpoint with user and password as its user info, the
// form New reads them in; an empty user leaves endpoint as it is (its own
// user info, if any, or ClickHouse's default user).
func WithLogin(endpoint, user, password string) (string, error) {
	if user == "" {
		return endpoint, nil
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("ClickHouse URL %q: %w", endpoint, err)
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// String is the endpoint without credentials or a trailing slash.
func (c *Client) String() string {
	u := *c.base
	u.User = nil
	return strings.TrimRight(u.String(), "/")
}

// Answer is ClickHouse's reply to one statement.
type Answer struct {
	Body   []byte
	Header http.Header // X-ClickHouse-Timezone, X-ClickHouse-Summary, ...
}

// Exec runs one statement (a trailing semicolon is allowed) with ClickHouse
// settings and query parameters. A transport failure is a
// *cli.UnreachableError; ClickHouse refusing the statement is an *Error.
func (c *Client) Exec(ctx context.Context, sql string, settings url.Values, params map[string]string) (*Answer, error) {
	q := url.Values{}
	for k, v := range settings {
		q[k] = v
	}
	for k, v := range params {
		q.Set("param_"+k, v)
	}
	statement := strings.TrimRight(strings.TrimSpace(sql), ";")
	return c.post(ctx, q, strings.NewReader(statement))
}

// Query runs sql (a SELECT with its own FORMAT clause, or a statement) with
// the given query parameters and returns the response body.
func (c *Client) Query(ctx context.Context, sql string, params map[string]string) ([]byte, error) {
	a, err := c.Exec(ctx, sql, nil, params)
	if err != nil {
		return nil, err
	}
	return a.Body, nil
}

// InsertJSON inserts rows (each marshalled to one JSON object) into table.
// DateTime64 columns accept RFC 3339 strings (date_time_input_format=best_effort).
func (c *Client) InsertJSON(ctx context.Context, table string, rows ...any) error {
	var body bytes.Buffer
	fmt.Fprintf(&body, "INSERT INTO %s FORMAT JSONEachRow\n", table)
	for _, r := range rows {
		line, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encoding a row for %s: %w", table, err)
		}
		body.Write(line)
		body.WriteByte('\n')
	}
	_, err := c.post(ctx, url.Values{"date_time_input_format": {"best_effort"}}, &body)
	return err
}

func (c *Client) post(ctx context.Context, q url.Values, body io.Reader) (*Answer, error) {
	u := *c.base
	u.User = nil
	u.Path = "/"
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("building the request to ClickHouse at %s: %w", c, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	if c.base.User != nil {
		pw, _ := c.base.User.Password()
		req.SetBasicAuth(c.base.User.Username(), pw)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil { // interrupted, not unreachable
			return nil, fmt.Errorf("statement to ClickHouse at %s: %w", c, ctx.Err())
		}
		return nil, &cli.UnreachableError{Service: "ClickHouse", URL: c.String(), Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading ClickHouse's answer from %s: %w", c, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if msg == "" {
			msg = resp.Status
		}
		return nil, &Error{URL: c.String(), Status: resp.StatusCode,
			Code: resp.Header.Get("X-ClickHouse-Exception-Code"), Message: msg}
	}
	return &Answer{Body: data, Header: resp.Header}, nil
}

// Error is ClickHouse refusing or failing a statement; Message is its own text.
type Error struct {
	URL     string
	Status  int
	Code    string // X-ClickHouse-Exception-Code, if any
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("ClickHouse at %s answered HTTP %d: %s", e.URL, e.Status, e.Message)
}

// IsRefused reports whether err is ClickHouse refusing a statement (as
// opposed to ClickHouse not answering).
func IsRefused(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
