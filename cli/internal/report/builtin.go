package report

import (
	"context"
	"embed"
	"fmt"
	"strings"
)

// The report's own queries, for its charts and its run window. They follow
// the conventions of queries/*.sql (a -- Question: header, query parameters).
//
//go:embed sql/*.sql
var builtinFS embed.FS

// Builtin returns one of the report's own queries by name (file name without .sql).
func Builtin(name string) (SavedQuery, error) {
	data, err := builtinFS.ReadFile("sql/" + name + ".sql")
	if err != nil {
		return SavedQuery{}, fmt.Errorf("built-in query %s: %w", name, err)
	}
	return ParseSavedQuery(name, "builtin:"+name+".sql", string(data)), nil
}

// BuiltinNames lists the report's own queries.
func BuiltinNames() []string {
	entries, _ := builtinFS.ReadDir("sql")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".sql"))
	}
	return names
}

// builtinSection runs the built-in query name into a new section titled
// title. The result is nil when the query failed (its error is in the section).
func builtinSection(ctx context.Context, ch *ClickHouse, name, title string, params map[string]string) (*Section, *Result) {
	q := mustBuiltin(name)
	sec := &Section{Name: q.Name, Title: title, Path: q.Path, Builtin: true}
	res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
	if err != nil {
		queryFailed(sec, err)
		return sec, nil
	}
	sec.Result = res
	return sec, res
}

func mustBuiltin(name string) SavedQuery {
	q, err := Builtin(name)
	if err != nil {
		panic(err) // embedded at build time: a missing file is a programming error
	}
	return q
}
