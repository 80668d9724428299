// Package chclient talks to ClickHouse over its HTTP interface: queries with
// typed query parameters ({name:Type} in the SQL, never spliced into the
// text) and JSONEachRow inserts. Credentials come from the URL's user info
// (http://user:password@host:8123), sent as HTTP basic auth.
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
)

// Client is one ClickHouse HTTP endpoint.
type Client struct {
	base *url.URL
	http *http.Client
}

// New parses the endpoint URL, e.g. http://127.0.0.1:8123.
func New(endpoint string) (*Client, error) {
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
	return &Client{base: u, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// String is the endpoint without credentials.
func (c *Client) String() string {
	u := *c.base
	u.User = nil
	return u.String()
}

// Query runs sql (a SELECT with its own FORMAT clause, or a statement) with
// the given query parameters and returns the response body.
func (c *Client) Query(ctx context.Context, sql string, params map[string]string) ([]byte, error) {
	q := url.Values{}
	for k, v := range params {
		q.Set("param_"+k, v)
	}
	return c.post(ctx, q, strings.NewReader(sql))
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

func (c *Client) post(ctx context.Context, q url.Values, body io.Reader) ([]byte, error) {
	u := *c.base
	u.User = nil
	u.Path = "/"
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, err
	}
	if c.base.User != nil {
		pw, _ := c.base.User.Password()
		req.SetBasicAuth(c.base.User.Username(), pw)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse at %s: %w", c, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("ClickHouse at %s: reading the answer: %w", c, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(data))}
	}
	return data, nil
}

// Error is a statement ClickHouse refused.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("ClickHouse answered HTTP %d: %s", e.Status, e.Message)
}

// IsRefused reports whether err is ClickHouse refusing a statement (as
// opposed to ClickHouse not answering).
func IsRefused(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
