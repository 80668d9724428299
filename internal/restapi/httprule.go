package restapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Template is a google.api.http path template whose variables are simple:
// {field}, {field=*} (one segment) or, as the last segment, {field=**} (the
// rest of the path). Field paths may be dotted (address.city).
type Template struct {
	Pattern string   // as written, e.g. /v1/products/{id}
	Mux     string   // the net/http ServeMux path pattern, e.g. /v1/products/{p0}
	Vars    []string // the field paths the variables bind, in order (p0, p1, ...)
	segs    []segment
}

type segment struct {
	literal string // when not a variable
	varIdx  int    // index into Vars, or -1
	rest    bool   // {field=**}
}

// ParseTemplate parses a path template. Verbs (":verb") and complex
// variable patterns are not supported.
func ParseTemplate(pattern string) (Template, error) {
	t := Template{Pattern: pattern}
	if !strings.HasPrefix(pattern, "/") {
		return t, fmt.Errorf("path template %q does not start with /", pattern)
	}
	parts := strings.Split(pattern[1:], "/")
	mux := make([]string, len(parts))
	for i, p := range parts {
		if !strings.HasPrefix(p, "{") {
			if strings.ContainsAny(p, "{}*:") {
				return t, fmt.Errorf("path template %q: segment %q is not supported", pattern, p)
			}
			t.segs = append(t.segs, segment{literal: p, varIdx: -1})
			mux[i] = p
			continue
		}
		if !strings.HasSuffix(p, "}") {
			return t, fmt.Errorf("path template %q: segment %q is not supported", pattern, p)
		}
		field, sub, _ := strings.Cut(p[1:len(p)-1], "=")
		if !validFieldPath(field) {
			return t, fmt.Errorf("path template %q: bad field path %q", pattern, field)
		}
		name := "p" + strconv.Itoa(len(t.Vars))
		seg := segment{varIdx: len(t.Vars)}
		switch {
		case sub == "" || sub == "*":
			mux[i] = "{" + name + "}"
		case sub == "**" && i == len(parts)-1:
			seg.rest = true
			mux[i] = "{" + name + "...}"
		default:
			return t, fmt.Errorf("path template %q: variable pattern %q is not supported", pattern, sub)
		}
		t.Vars = append(t.Vars, field)
		t.segs = append(t.segs, seg)
	}
	t.Mux = "/" + strings.Join(mux, "/")
	return t, nil
}

func validFieldPath(p string) bool {
	for _, id := range strings.Split(p, ".") {
		if id == "" {
			return false
		}
		for i, c := range id {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// MuxName is the ServeMux wildcard name of variable i (for Request.PathValue).
func MuxName(i int) string { return "p" + strconv.Itoa(i) }

// Expand returns the path for m: the template with each variable replaced by
// the (escaped) value of its field.
func (t Template) Expand(m proto.Message) (string, error) {
	var b strings.Builder
	for _, s := range t.segs {
		b.WriteByte('/')
		if s.varIdx < 0 {
			b.WriteString(s.literal)
			continue
		}
		v, err := fieldString(m.ProtoReflect(), t.Vars[s.varIdx])
		if err != nil {
			return "", fmt.Errorf("path template %q: %w", t.Pattern, err)
		}
		if s.rest {
			parts := strings.Split(v, "/")
			for i, p := range parts {
				parts[i] = url.PathEscape(p)
			}
			b.WriteString(strings.Join(parts, "/"))
		} else {
			b.WriteString(url.PathEscape(v))
		}
	}
	return b.String(), nil
}

// Query returns m's populated fields as query parameters, by proto field
// path (address.city), leaving out the paths in exclude (those the path
// template binds). Lists of scalars repeat their parameter; maps and lists
// of messages are an error.
func Query(m proto.Message, exclude []string) (url.Values, error) {
	q := url.Values{}
	err := addQuery(q, m.ProtoReflect(), "", exclude)
	return q, err
}

func addQuery(q url.Values, m protoreflect.Message, prefix string, exclude []string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		for _, x := range exclude {
			if x == path {
				return true
			}
		}
		switch {
		case fd.IsMap():
			err = fmt.Errorf("field %s: maps cannot be query parameters", path)
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			err = fmt.Errorf("field %s: lists of messages cannot be query parameters", path)
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				q.Add(path, formatScalar(fd, l.Get(i)))
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			err = addQuery(q, v.Message(), path+".", exclude)
		default:
			q.Add(path, formatScalar(fd, v))
		}
		return err == nil
	})
	return err
}

// Bind sets the fields of m bound by the path template (pathValue(MuxName(i))
// for variable i) and, when query is not nil, those named by query
// parameters (proto or JSON field names, dotted for nested fields). Unknown
// parameters are an error, as with Envoy's transcoder.
func Bind(m proto.Message, t Template, pathValue func(name string) string, query url.Values) error {
	pm := m.ProtoReflect()
	for i, field := range t.Vars {
		if err := SetField(pm, field, []string{pathValue(MuxName(i))}); err != nil {
			return fmt.Errorf("path variable %s: %w", field, err)
		}
	}
	for k, vs := range query {
		if err := SetField(pm, k, vs); err != nil {
			return fmt.Errorf("query parameter %s: %w", k, err)
		}
	}
	return nil
}

// ErrUnknownField is wrapped by SetField's error for a path naming no field.
var ErrUnknownField = errors.New("no such field")

// SetField sets the field at path (dotted; proto or JSON names) from string
// values: one value for a singular field, any number for a list of scalars.
func SetField(m protoreflect.Message, path string, values []string) error {
	names := strings.Split(path, ".")
	for i, name := range names {
		fields := m.Descriptor().Fields()
		fd := fields.ByName(protoreflect.Name(name))
		if fd == nil {
			fd = fields.ByJSONName(name)
		}
		if fd == nil {
			return fmt.Errorf("%w %q in %s", ErrUnknownField, name, m.Descriptor().FullName())
		}
		last := i == len(names)-1
		switch {
		case fd.IsMap():
			return fmt.Errorf("field %s is a map", fd.FullName())
		case !last:
			if fd.IsList() || fd.Kind() != protoreflect.MessageKind {
				return fmt.Errorf("field %s is not a singular message", fd.FullName())
			}
			m = m.Mutable(fd).Message()
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			return fmt.Errorf("field %s is a message", fd.FullName())
		case fd.IsList():
			l := m.Mutable(fd).List()
			for _, s := range values {
				v, err := parseScalar(fd, s)
				if err != nil {
					return err
				}
				l.Append(v)
			}
		default:
			if len(values) != 1 {
				return fmt.Errorf("field %s is singular, got %d values", fd.FullName(), len(values))
			}
			v, err := parseScalar(fd, values[0])
			if err != nil {
				return err
			}
			m.Set(fd, v)
		}
	}
	return nil
}

func fieldString(m protoreflect.Message, path string) (string, error) {
	names := strings.Split(path, ".")
	for i, name := range names {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return "", fmt.Errorf("%w %q in %s", ErrUnknownField, name, m.Descriptor().FullName())
		}
		if fd.IsList() || fd.IsMap() {
			return "", fmt.Errorf("field %s is repeated", fd.FullName())
		}
		if i < len(names)-1 {
			if fd.Kind() != protoreflect.MessageKind {
				return "", fmt.Errorf("field %s is not a message", fd.FullName())
			}
			m = m.Get(fd).Message()
			continue
		}
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			return "", fmt.Errorf("field %s is a message", fd.FullName())
		}
		return formatScalar(fd, m.Get(fd)), nil
	}
	return "", fmt.Errorf("empty field path")
}

func formatScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.BytesKind:
		return base64.URLEncoding.EncodeToString(v.Bytes())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.FloatKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 32)
	case protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default: // string, bool, integers
		return v.String()
	}
}

func parseScalar(fd protoreflect.FieldDescriptor, s string) (protoreflect.Value, error) {
	bad := func(err error) (protoreflect.Value, error) {
		return protoreflect.Value{}, fmt.Errorf("field %s: bad %s value %q: %w", fd.FullName(), fd.Kind(), s, err)
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		b, err := base64.URLEncoding.DecodeString(s)
		if err != nil {
			if b, err = base64.StdEncoding.DecodeString(s); err != nil {
				return bad(err)
			}
		}
		return protoreflect.ValueOfBytes(b), nil
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint64(n), nil
	case protoreflect.FloatKind:
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfFloat32(float32(f)), nil
	case protoreflect.DoubleKind:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
	default:
		return bad(errors.New("unsupported kind"))
	}
}
