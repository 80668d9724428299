package report

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// SavedQuery is one queries/*.sql file.
type SavedQuery struct {
	Name     string   // file name without .sql
	Path     string   // where it was read from ("builtin:…" for the report's own)
	Question string   // the text of its "-- Question:" comment, lines joined
	SQL      string   // the statement, as read
	Params   []string // names of its {name:Type} parameters, in order of first use
}

var placeholder = regexp.MustCompile(`\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*[^{}]+\}`)

// ParseSavedQuery reads the question and the parameters of a query text.
func ParseSavedQuery(name, path, text string) SavedQuery {
	q := SavedQuery{Name: name, Path: path, SQL: text}
	var question []string
	inQuestion := false
	var code strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if comment, ok := strings.CutPrefix(trimmed, "--"); ok {
			comment = strings.TrimSpace(comment)
			switch {
			case !inQuestion && q.Question == "" && len(question) == 0 && strings.HasPrefix(comment, "Question:"):
				inQuestion = true
				question = append(question, strings.TrimSpace(strings.TrimPrefix(comment, "Question:")))
			case inQuestion && comment != "" && !strings.HasSuffix(comment, ":"):
				question = append(question, comment)
			default:
				inQuestion = false
			}
			continue
		}
		inQuestion = false
		code.WriteString(line)
		code.WriteByte('\n')
	}
	q.Question = strings.Join(question, " ")
	seen := map[string]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(code.String(), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			q.Params = append(q.Params, m[1])
		}
	}
	return q
}

// Title is the section title: the question, or the name when there is none.
func (q SavedQuery) Title() string {
	if q.Question != "" {
		r := []rune(q.Question)
		return strings.ToUpper(string(r[0])) + string(r[1:])
	}
	return q.Name
}

// LoadSavedQueries reads every *.sql file directly in dir (not schema/), by name.
func LoadSavedQueries(dir string) ([]SavedQuery, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("queries directory %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("queries directory %s: not a directory", dir)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Strings(paths)
	queries := make([]SavedQuery, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading saved query: %w", err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".sql")
		queries = append(queries, ParseSavedQuery(name, p, string(data)))
	}
	return queries, nil
}

// ParamDefaults are the values of parameters some saved queries take besides
// since, until and run_id, used when the caller gives none.
var ParamDefaults = map[string]string{"resamples": "200"}

// FindSavedQuery reads the saved query called name (name.sql) in dir.
func FindSavedQuery(dir, name string) (SavedQuery, error) {
	all, err := LoadSavedQueries(dir)
	if err != nil {
		return SavedQuery{}, err
	}
	known := make([]string, 0, len(all))
	for _, q := range all {
		if q.Name == name {
			return q, nil
		}
		known = append(known, q.Name)
	}
	return SavedQuery{}, fmt.Errorf("no saved query %q in %s (known: %s)", name, dir, strings.Join(known, ", "))
}

// Bind gives each parameter of q its value: from extra, else from common (the
// window's since, until and run_id), else from ParamDefaults. A parameter
// with none is an error that names them all.
func (q SavedQuery) Bind(common, extra map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(q.Params))
	var missing []string
	for _, name := range q.Params {
		if v, ok := extra[name]; ok {
			out[name] = v
		} else if v, ok := common[name]; ok {
			out[name] = v
		} else if v, ok := ParamDefaults[name]; ok {
			out[name] = v
		} else {
			missing = append(missing, "--param "+name+"=...")
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s needs %s", q.Name, strings.Join(missing, ", "))
	}
	return out, nil
}
