package jsonwalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
)

// FuzzWalk: Walk agrees with encoding/json on whether a text is one JSON
// value, never panics, and every offset it gives lies inside the text: each
// value's at the first byte of a value of the kind its JSON pointer names in
// the decoded text, each repeated key's after the first, an error's at most
// the text's length. With MaxDepth it refuses exactly the texts nesting
// deeper.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{"a": [1, {"b/c": "x", "d~e": null}], "f": {}, "": [[true]]}`,
		`{"a": 1, "A": 2, "a": 3}`, `[1, 2`, `{"a" 1}`, `1 2`, `"\u00e9\ud800"`, `[[[[[[]]]]]]`, ` -0.5e+3 `,
		`{"x": tru}`, `{"k": "v",}`, "\xff", ``} {
		f.Add([]byte(s), uint8(0))
	}
	// The repository's JSON files: plans, scenarios, schemas, recorded streams.
	for _, glob := range []string{"../../*/testdata/*.json", "../../*/*/testdata/*.json", "../../schemas/*.json"} {
		files, _ := filepath.Glob(glob)
		for _, name := range files {
			if data, err := os.ReadFile(name); err == nil && len(data) < 64<<10 {
				f.Add(data, uint8(3))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		n := int64(len(data))
		var doc any
		valid := json.Unmarshal(data, &doc) == nil

		type value struct {
			ptr   string
			start int64
		}
		var values []value
		repeats := 0
		last := int64(-1)
		w := Walker{
			Value: func(ptr []byte, start int64) bool {
				if start < 0 || start >= n || start <= last {
					t.Fatalf("%q: value %s at %d, after %d", data, ptr, start, last)
				}
				last = start
				values = append(values, value{string(ptr), start})
				return true
			},
			Repeat: func(obj []byte, key string, start, first int64) bool {
				if first < 0 || start <= first || start >= n || data[start] != '"' || data[first] != '"' {
					t.Fatalf("%q: key %q of %s at %d, first at %d", data, key, obj, start, first)
				}
				repeats++
				return true
			},
		}
		err := w.Walk(data)
		if (err == nil) != valid {
			t.Fatalf("%q: Walk returned %v where encoding/json says valid = %v", data, err, valid)
		}
		if err != nil {
			var we *Error
			if !errors.As(err, &we) || we.Offset < 0 || we.Offset > n {
				t.Fatalf("%q: %v is not an *Error inside the text", data, err)
			}
			line, col := Position(data, we.Offset)
			if line < 1 || col < 1 {
				t.Fatalf("%q: offset %d at %d:%d", data, we.Offset, line, col)
			}
			var se *json.SyntaxError
			if !errors.As(err, &se) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrTrailing) {
				t.Fatalf("%q: %v is neither a syntax error, an early end nor trailing data", data, err)
			}
			return
		}
		// encoding/json keeps the last of repeated keys: the values under
		// the others are not in doc.
		if repeats == 0 {
			if want := countValues(doc); len(values) != want {
				t.Fatalf("%q: %d values visited, %d decoded", data, len(values), want)
			}
			for _, v := range values {
				checkKind(t, data, doc, v.ptr, v.start)
			}
		}

		limit := int(depth%8) + 1
		err = (&Walker{MaxDepth: limit}).Walk(data)
		if repeats == 0 && (nesting(doc) > limit) != errors.Is(err, ErrTooDeep) {
			t.Fatalf("%q: nesting %d, MaxDepth %d: %v", data, nesting(doc), limit, err)
		}
		if err != nil && !errors.Is(err, ErrTooDeep) {
			t.Fatalf("%q: a valid text refused with MaxDepth %d: %v", data, limit, err)
		}
	})
}

// checkKind fails t unless the value the pointer ptr names in doc is of
// the kind the byte of data at start begins.
func checkKind(t *testing.T, data []byte, doc any, ptr string, start int64) {
	t.Helper()
	v := doc
	for _, tok := range jsonpointer.Tokens(ptr) {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[tok]; !ok {
				t.Fatalf("%q: %s names no value", data, ptr)
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				t.Fatalf("%q: %s names no value", data, ptr)
			}
			v = c[i]
		default:
			t.Fatalf("%q: %s goes through a scalar", data, ptr)
		}
	}
	b := data[start]
	var ok bool
	switch v.(type) {
	case map[string]any:
		ok = b == '{'
	case []any:
		ok = b == '['
	case string:
		ok = b == '"'
	case float64:
		ok = b == '-' || b >= '0' && b <= '9'
	case bool:
		ok = b == 't' || b == 'f'
	case nil:
		ok = b == 'n'
	}
	if !ok {
		t.Fatalf("%q: %s at %d starts with %q, a %T", data, ptr, start, b, v)
	}
	if b == '{' || b == '[' {
		return
	}
	// A scalar's text, read from its start, is the value itself.
	var got any
	if err := json.NewDecoder(bytes.NewReader(data[start:])).Decode(&got); err != nil || got != v {
		t.Fatalf("%q: %s at %d reads %v (%v), not %v", data, ptr, start, got, err, v)
	}
}

func countValues(v any) int {
	n := 1
	switch c := v.(type) {
	case map[string]any:
		for _, e := range c {
			n += countValues(e)
		}
	case []any:
		for _, e := range c {
			n += countValues(e)
		}
	}
	return n
}

func nesting(v any) int {
	d := 0
	switch c := v.(type) {
	case map[string]any:
		for _, e := range c {
			d = max(d, nesting(e))
		}
		d++
	case []any:
		for _, e := range c {
			d = max(d, nesting(e))
		}
		d++
	}
	return d
}
