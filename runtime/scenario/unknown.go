package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/internal/textdist"
)

// unknownField is where a scenario names a field its format does not have.
type unknownField struct {
	// path is the object holding the field ("steps[1].tool"; "" at the top
	// level), off the offset of the field's name in the input.
	path string
	off  int64
	name string
	// known are the fields the object may have.
	known []string
}

// message says what is unknown and, when one is close, which field was
// meant.
func (u *unknownField) message() string {
	msg := fmt.Sprintf("unknown field %q", u.name)
	if best := textdist.Closest(u.name, u.known); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	if u.path != "" {
		msg = u.path + ": " + msg
	}
	return msg
}

// findUnknown walks data along the scenario's types and returns the first
// field that none of them has (encoding/json reports only the name).
func findUnknown(data []byte) *unknownField {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	u, _ := walkUnknown(dec, reflect.TypeFor[Scenario](), "")
	return u
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkUnknown reads one value of type t from dec.
func walkUnknown(dec *json.Decoder, t reflect.Type, path string) (*unknownField, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	opaque := t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() || reflect.PointerTo(t).Implements(unmarshalerType)
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil, nil
	}
	switch {
	case d == '{' && !opaque && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			ft, ok := fields[key]
			if !ok {
				for name, f := range fields {
					if strings.EqualFold(name, key) {
						ft, ok = f, true
						break
					}
				}
			}
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				sort.Strings(known)
				off := dec.InputOffset() - int64(len(key)) - 2
				return &unknownField{path: path, off: max(off, 0), name: key, known: known}, nil
			}
			if u, err := walkUnknown(dec, ft, joinPath(path, key)); u != nil || err != nil {
				return u, err
			}
		}
	case d == '{' && !opaque && t.Kind() == reflect.Map:
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			if u, err := walkUnknown(dec, t.Elem(), joinPath(path, key)); u != nil || err != nil {
				return u, err
			}
		}
	case d == '[' && !opaque && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; dec.More(); i++ {
			if u, err := walkUnknown(dec, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); u != nil || err != nil {
				return u, err
			}
		}
	default:
		// A value the types leave open: skip it.
		for depth := 1; depth > 0; {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			switch tok {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
		return nil, nil
	}
	_, err = dec.Token() // the closing delimiter
	return nil, err
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields maps the JSON names of a struct's fields (those of embedded
// structs included) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// CheckWant reports the first field of want, the expected subset of a
// run's result (a test case's want, a conformance case's want/run.json),
// that the result's format does not have, with a did-you-mean. A misspelt
// field would otherwise be compared as missing, or, with null or [],
// pass as an absence that was never checked.
func CheckWant(want []byte) error {
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.UseNumber()
	u, err := walkUnknown(dec, reflect.TypeFor[Result](), "")
	if err != nil {
		return err
	}
	if u != nil {
		return errors.New(u.message())
	}
	// executions lists every declared model and tool with its count: null
	// there would match a name that is not listed (a misspelt one) and
	// assert nothing.
	var w struct {
		Executions struct {
			Models map[string]json.RawMessage `json:"models"`
			Tools  map[string]json.RawMessage `json:"tools"`
		} `json:"executions"`
	}
	if json.Unmarshal(want, &w) != nil {
		return nil // not an object: the comparison reports it
	}
	for _, m := range []struct {
		what   string
		counts map[string]json.RawMessage
	}{{"models", w.Executions.Models}, {"tools", w.Executions.Tools}} {
		for _, name := range slices.Sorted(maps.Keys(m.counts)) {
			if v := strings.TrimSpace(string(m.counts[name])); v == "null" || strings.ReplaceAll(v, " ", "") == "[]" {
				return fmt.Errorf("executions.%s.%s: %s asserts nothing (every declared name is listed with its count); write 0 for a call that must not happen", m.what, name, v)
			}
		}
	}
	return nil
}
