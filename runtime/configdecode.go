package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/internal/jsonfields"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func init() {
	plan.CheckModuleConfig(moduleConfigProblem)
}

// moduleConfigProblem decodes raw, the config of a layer using the
// registered module id, as Build would, and says where and what is wrong
// with it: the JSON pointer below the config of the value (or of the
// unknown key) at fault and the problem. ok is false when the module is
// not registered (Build says so), the config decodes, or the module
// panics in New or in its decoder (Build re-raises that panic).
func moduleConfigProblem(id string, raw json.RawMessage) (ptr, msg string, ok bool) {
	m, found := LookupModule(id)
	if !found {
		return "", "", false
	}
	defer func() {
		if recover() != nil {
			ptr, msg, ok = "", "", false
		}
	}()
	err := decodeConfig(m.New(), raw)
	if err == nil {
		return "", "", false
	}
	var cp *configProblem
	if !errors.As(err, &cp) {
		return "", err.Error(), true
	}
	steps := fieldpath.Labels(cp.path)
	if cp.key != "" {
		steps = append(steps, cp.key)
	}
	for _, s := range steps {
		ptr += "/" + jsonpointer.Escape(s)
	}
	if cp.got != "" {
		field := cp.path
		if field == "" {
			field = "config"
		}
		return ptr, fmt.Sprintf("%s: %s's %s is %s", cp.got, id, field, cp.want), true
	}
	return ptr, cp.msg, true
}

// decodeConfig decodes raw into inst strictly: unknown fields and trailing
// data are errors. A key or a value that does not fit is a *configProblem
// naming its place in the config.
func decodeConfig(inst Middleware, raw json.RawMessage) error {
	if d, ok := inst.(ConfigDecoder); ok {
		return d.DecodeConfig(raw)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if err := exactKeys(trimmed, reflect.TypeOf(inst)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(inst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return typeMismatch(trimmed, te)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the config object")
	}
	return nil
}

// configProblem is a problem of a plan config at its place: path is the
// field as messages write it ("breaker.cooldown", "arg_patterns[0]"; ""
// the config itself), key the unknown key of its object at fault, if
// that is the problem.
// A value of another kind than its field's is got (the value's kind, or a
// number the field does not hold) where want goes.
type configProblem struct{ path, key, msg, got, want string }

func (p *configProblem) Error() string {
	msg := p.msg
	if p.got != "" {
		msg = fmt.Sprintf("%s, where the field takes %s", p.got, p.want)
	}
	if p.path == "" {
		return msg
	}
	return p.path + ": " + msg
}

// typeMismatch places a value of the config raw that does not fit its
// field (te, whose offset the decoder reached past its start) and says
// which kinds of JSON value the config holds and the field takes ("a
// number, where the field takes a string").
func typeMismatch(raw []byte, te *json.UnmarshalTypeError) error {
	var ptr []byte
	found := false
	w := jsonwalk.Walker{Value: func(p []byte, start int64) bool {
		if start >= te.Offset {
			return false
		}
		ptr, found = append(ptr[:0], p...), true
		return true
	}}
	_ = w.Walk(raw) // raw was decoded whole before
	if !found {
		return te
	}
	path := ""
	for _, tok := range jsonpointer.Tokens(string(ptr)) {
		if digitsOnly(tok) {
			path += "[" + tok + "]"
		} else {
			path = fieldpath.Join(path, tok)
		}
	}
	want := JSONKind(te.Type)
	if got, num, isNum := strings.Cut(te.Value, " "); isNum && got == "number" {
		// A number of the right kind that the field does not hold: a
		// fraction for an integer, one out of its range.
		return &configProblem{path: path, got: num, want: fmt.Sprintf("%s that a Go %s holds", want, te.Type)}
	}
	return &configProblem{path: path, got: valueKind(te.Value), want: want}
}

func digitsOnly(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// valueKind words the kind of value the decoder names ("number", "bool").
func valueKind(v string) string {
	switch v {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "a boolean"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return v
}

// JSONKind words the kind of JSON value that decodes into t ("an object",
// "an array", "a string"...), for an error that names what a field wants
// without naming a Go type.
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a Go " + t.String()
}

// exactKeys refuses, naming its place, a key of raw that names a field of
// t (at any depth) only regardless of case: encoding/json would decode
// "CALLS" into the field "calls", and the last of the two into it, so the
// layer would run with another value than the one a reader of the plan
// sees. It refuses a key that names no field at all (with the field it is
// near, if any), and a value of a field that decodes itself (a Duration)
// that it refuses, there too: the decoder would say neither where.
// Another value that does not fit t is left to the decoder.
func exactKeys(raw []byte, t reflect.Type) error {
	w := jsonfields.Walk{Dec: json.NewDecoder(bytes.NewReader(raw)),
		Member: func(path, key string, fields map[string]reflect.Type) (reflect.Type, error) {
			if ft, ok := fields[key]; ok {
				return ft, nil
			}
			names := slices.Sorted(maps.Keys(fields))
			for _, name := range names {
				if strings.EqualFold(name, key) {
					return nil, &configProblem{path: path, key: key, msg: fmt.Sprintf("unknown field %q (keys match the fields exactly: %q)", key, name)}
				}
			}
			near := ""
			if name := textdist.Closest(key, names); name != "" {
				near = fmt.Sprintf("; did you mean %q?", name)
			}
			return nil, &configProblem{path: path, key: key, msg: fmt.Sprintf("unknown field %q (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)%s", key, near)}
		},
		Opaque: func(path string, t reflect.Type, raw json.RawMessage) error {
			if t != durationType || bytes.Equal(raw, []byte("null")) {
				return nil
			}
			var d Duration
			if err := d.UnmarshalJSON(raw); err != nil {
				if _, ok := err.(*json.UnmarshalTypeError); ok {
					err = fmt.Errorf("%s is not a duration string such as \"30s\"", raw)
				}
				return &configProblem{path: path, msg: err.Error()}
			}
			return nil
		},
		Field: fieldpath.Join,
		Key:   fieldpath.Join,
		Index: func(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) },
	}
	var cp *configProblem
	if err := w.Read(t, ""); errors.As(err, &cp) {
		return cp
	}
	return nil
}
