package dsl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// checkJSON checks that src, the text of JSON data file name, is one JSON
// value nesting at most MaxNesting levels, none of whose objects repeats a
// key: encoding/json keeps the last of two, so a test file's second want
// would drop the first unseen. Problems are placed at file:line:col.
func checkJSON(name string, src []byte) error {
	if len(bytes.TrimSpace(src)) == 0 {
		return fmt.Errorf("%s: the file is empty: it must hold a JSON object", name)
	}
	at := func(off int64) Pos {
		line, col := plan.Position(src, off)
		return Pos{File: name, Line: line, Col: col}
	}
	type frame struct {
		obj, wantKey bool
		keys         map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var stack []*frame
	done := false
	for {
		start := plan.ValueStart(src, dec.InputOffset())
		tok, err := dec.Token()
		var se *json.SyntaxError
		switch {
		case err == io.EOF && done:
			return nil
		case errors.As(err, &se):
			return fmt.Errorf("%s: not JSON: %v", at(se.Offset), se)
		case err != nil:
			return fmt.Errorf("%s: not JSON: the file ends before the value does (truncated?)", at(int64(len(src))))
		case done:
			return fmt.Errorf("%s: more data after the JSON value: a file holds one value", at(start))
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if key, ok := tok.(string); ok {
				if top.keys[key] {
					return fmt.Errorf("%s: key %q repeats a key of the same object (only the last would count)", at(start), key)
				}
				top.keys[key] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == MaxNesting {
				return fmt.Errorf("%s: nesting deeper than %d levels", at(start), MaxNesting)
			}
			stack = append(stack, &frame{obj: tok == json.Delim('{'), wantKey: true, keys: map[string]bool{}})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the object holding it wants its next key.
		if len(stack) == 0 {
			done = true
		} else if t := stack[len(stack)-1]; t.obj {
			t.wantKey = true
		}
	}
}
