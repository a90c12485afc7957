package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Position returns the line and column (both from 1, the column in bytes)
// of byte offset off of data.
func Position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// at renders the position of offset off in data for a problem.
func at(data []byte, off int64) string {
	line, col := Position(data, off)
	return fmt.Sprintf("line %d, col %d", line, col)
}

// syntaxProblem describes why data is not one JSON value, with the position
// of the fault.
func syntaxProblem(data []byte, err error) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset counts the offending byte.
		return fmt.Sprintf("%s: not JSON: %s", at(data, se.Offset-1), se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("%s: not JSON: the data ends before the plan object does (truncated?)", at(data, int64(len(data))))
	}
	return "not JSON: " + err.Error()
}

// walk walks the tokens of data, which must be one valid JSON value. It
// calls visit with the JSON pointer (valid during the call only) and the
// offset of the start of every value, and stops when visit returns false.
// It returns the keys an object repeats: encoding/json keeps the last of
// them, while a reader of the file may see the first, so a plan that
// repeats a key is refused. Among the keys of a layer's config, which the
// runtime decodes into a Go struct whose field names match keys regardless
// of case, keys that differ only in case are repeats too.
func walk(data []byte, visit func(ptr []byte, start int64) bool) (problems []string) {
	type frame struct {
		obj, fold, wantKey bool
		n                  int
		key                string
		// plen is the length of the container's pointer in path.
		plen int
		seen map[string]int64
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	path := make([]byte, 0, 256)
	for {
		start := ValueStart(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			// data was decoded whole before: io.EOF, the end.
			return problems
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		delim, isDelim := tok.(json.Delim)
		if top != nil && top.obj && top.wantKey {
			if isDelim { // '}'
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			id := k
			if top.fold {
				id = strings.ToLower(k)
			}
			if first, dup := top.seen[id]; dup {
				problems = append(problems, fmt.Sprintf("%s/%s (%s): duplicate key %q (also at %s)",
					path[:top.plen], escapePointer(k), at(data, start), k, at(data, first)))
			} else {
				if top.seen == nil {
					top.seen = map[string]int64{}
				}
				top.seen[id] = start
			}
			top.key, top.wantKey = k, false
			continue
		}
		if isDelim && delim == ']' {
			stack = stack[:len(stack)-1]
			continue
		}
		path = path[:0]
		if top != nil {
			path = path[:top.plen]
			path = append(path, '/')
			if top.obj {
				path = append(path, escapePointer(top.key)...)
				top.wantKey = true
			} else {
				path = strconv.AppendInt(path, int64(top.n), 10)
				top.n++
			}
		}
		if visit != nil && !visit(path, start) {
			return problems
		}
		if isDelim {
			// Only a config's own keys: below them may be maps keyed by
			// names, which the runtime matches exactly (tracing's
			// attributes).
			fold := top != nil && top.obj && top.key == "config" && isLayerPointer(string(path[:top.plen]))
			stack = append(stack, &frame{obj: delim == '{', fold: fold, plen: len(path), wantKey: delim == '{'})
		}
	}
}

// offsetsOf returns the offsets in data of the values that the JSON
// pointers of want name.
func offsetsOf(data []byte, want map[string]bool) map[string]int64 {
	out := map[string]int64{}
	walk(data, func(ptr []byte, start int64) bool {
		if want[string(ptr)] {
			out[string(ptr)] = start
		}
		return len(out) < len(want)
	})
	return out
}

// isLayerPointer reports whether ptr is the JSON pointer of a layer
// (/chains/<stage>/<index>).
func isLayerPointer(ptr string) bool {
	parts := strings.Split(ptr, "/")
	if len(parts) != 4 || parts[0] != "" || parts[1] != "chains" {
		return false
	}
	_, err := strconv.Atoi(parts[3])
	return err == nil
}

// ValueStart returns the offset of the next token at or after off: past
// white space and the separators that encoding/json's offset leaves before
// it.
func ValueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// locate adds to each problem that starts with a JSON pointer
// ("<pointer>: <message>") the position of the value it names.
func locate(problems []string, data []byte) []string {
	want := map[string]bool{}
	for _, pr := range problems {
		if ptr, _, ok := strings.Cut(pr, ": "); ok {
			want[strings.TrimSuffix(ptr, "/")] = true
		}
	}
	offsets := offsetsOf(data, want)
	for i, pr := range problems {
		ptr, msg, ok := strings.Cut(pr, ": ")
		if !ok {
			continue
		}
		if off, found := offsets[strings.TrimSuffix(ptr, "/")]; found {
			problems[i] = fmt.Sprintf("%s (%s): %s", ptr, at(data, off), msg)
		}
	}
	return problems
}

// typeProblem describes an error of json.Unmarshal on data that the schema
// accepted (a number out of range, a fraction where an integer goes), with
// the JSON pointer and position of the value.
func typeProblem(data []byte, err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	// The value is the one that starts last before the offset the decoder
	// reached.
	var ptr []byte
	best := int64(-1)
	walk(data, func(p []byte, start int64) bool {
		if start >= te.Offset {
			return false
		}
		ptr, best = append(ptr[:0], p...), start
		return true
	})
	if best < 0 {
		return err.Error()
	}
	if len(ptr) == 0 {
		ptr = []byte("/")
	}
	return fmt.Sprintf("%s (%s): %s does not fit a Go %s", ptr, at(data, best), te.Value, te.Type)
}
