package dsl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentc-dev/agentc/internal/jsonwalk"
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
		line, col := jsonwalk.Position(src, off)
		return Pos{File: name, Line: line, Col: col}
	}
	var repeat error
	w := jsonwalk.Walker{
		MaxDepth: MaxNesting,
		Repeat: func(_ []byte, key string, start, _ int64) bool {
			repeat = fmt.Errorf("%s: key %q repeats a key of the same object (only the last would count)", at(start), key)
			return false
		},
	}
	err := w.Walk(src)
	var je *jsonwalk.Error
	if !errors.As(err, &je) {
		return repeat
	}
	var se *json.SyntaxError
	switch {
	case errors.As(je.Err, &se):
		return fmt.Errorf("%s: not JSON: %v", at(je.Offset), se)
	case errors.Is(je.Err, jsonwalk.ErrTrailing):
		return fmt.Errorf("%s: more data after the JSON value: a file holds one value", at(je.Offset))
	case errors.Is(je.Err, jsonwalk.ErrTooDeep):
		return fmt.Errorf("%s: nesting deeper than %d levels", at(je.Offset), MaxNesting)
	}
	return fmt.Errorf("%s: not JSON: the file ends before the value does (truncated?)", at(je.Offset))
}
