package scenario

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
)

// Error is a scenario refused (by Parse, or by Run before any step runs):
// each problem with its place.
type Error struct {
	Problems []Problem
}

// Problem is one thing wrong with a scenario. Message starts with the path
// of its place ("steps[1].tool: name is required"); Line and Col, from 1,
// place it in the JSON text (0 for a scenario evaluated from another
// source, a CUE file or a case of a test file, whose place is its path).
type Problem struct {
	Line, Col int
	Message   string
}

// Error lists the problems, one a line, each at its line and column when
// known.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Message
		if p.Line > 0 {
			lines[i] = fmt.Sprintf("line %d, col %d: %s", p.Line, p.Col, p.Message)
		}
	}
	return "scenario: " + strings.Join(lines, "\n")
}

// In lists the problems of the scenario in file, one a line, as
// file:line:col: problem (file: problem without a position).
func (e *Error) In(file string) string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = fmt.Sprintf("%s: %s", file, p.Message)
		if p.Line > 0 {
			lines[i] = fmt.Sprintf("%s:%d:%d: %s", file, p.Line, p.Col, p.Message)
		}
	}
	return strings.Join(lines, "\n")
}

// Messages lists the problems' messages, without their positions.
func (e *Error) Messages() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Message
	}
	return out
}

// Place gives the problems without a line (those of a scenario evaluated
// from another source) the line and column at returns for their path ("",
// the scenario itself; the path of an unknown field includes its name), so
// that a CUE scenario's problems are placed where its file writes them.
func (e *Error) Place(at func(path string) (line, col int, ok bool)) {
	for i, p := range e.Problems {
		if p.Line > 0 {
			continue
		}
		if line, col, ok := at(MessagePath(p.Message)); ok {
			e.Problems[i].Line, e.Problems[i].Col = line, col
		}
	}
	slices.SortStableFunc(e.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}

// MessagePath returns the path a problem's message names: its leading
// segments up to the first that is not a path ("want: steps[0]: unknown
// field ..." names want.steps[0]), followed by the field an "unknown field"
// names ("steps[1].tool.nme").
func MessagePath(msg string) string {
	var segs []string
	rest := msg
	for {
		seg, after, ok := strings.Cut(rest, ": ")
		if !ok || seg == "" {
			break
		}
		if _, ok := fieldpath.Split(seg); !ok {
			break
		}
		segs = append(segs, seg)
		rest = after
	}
	if name, ok := strings.CutPrefix(rest, "unknown field "); ok {
		if q, err := strconv.QuotedPrefix(name); err == nil {
			if f, err := strconv.Unquote(q); err == nil {
				segs = append(segs, fieldpath.Label(f))
			}
		}
	}
	return strings.Join(segs, ".")
}

// problems places each of errs, whose text starts with the path of its
// place, in src (the scenario's JSON text; nil when it was evaluated).
func problems(src []byte, errs []error) *Error {
	e := &Error{}
	for _, err := range errs {
		p := Problem{Message: err.Error()}
		if path, _, ok := strings.Cut(p.Message, ": "); ok && src != nil {
			if off, ok := locate(src, path); ok {
				p.Line, p.Col = lineColOf(src, off)
			}
		}
		e.Problems = append(e.Problems, p)
	}
	// In the order of the text, where they are placed.
	slices.SortStableFunc(e.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return e
}

// lineColOf places an offset of data at its line and column.
func lineColOf(data []byte, off int) (line, col int) {
	return jsonwalk.Position(data, int64(off))
}

// locate returns the offset in data of the place a path such as
// "steps[1].tool" names: the member's key for an object's field, the
// element for a list's. A key that is not an identifier is quoted, as
// fieldpath writes it (dns."api.example.com"[0]). ok is false when the
// path is not there.
func locate(data []byte, path string) (off int, ok bool) {
	steps, ok := fieldpath.Split(path)
	if !ok {
		return 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for _, st := range steps {
		var found bool
		if st.IsIndex {
			off, found = element(dec, data, st.Index)
		} else {
			off, found = member(dec, data, st.Label)
		}
		if !found {
			return 0, false
		}
	}
	return off, true
}

// member reads an object up to its member key and returns the key's
// offset, leaving the decoder before the member's value.
func member(dec *json.Decoder, data []byte, key string) (int, bool) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, false
	}
	for dec.More() {
		start := valueStart(dec, data)
		kt, err := dec.Token()
		if err != nil {
			return 0, false
		}
		if k, _ := kt.(string); k == key {
			return start, true
		}
		if !skipValue(dec) {
			return 0, false
		}
	}
	return 0, false
}

// element reads a list up to its element i and returns the element's
// offset, leaving the decoder before it.
func element(dec *json.Decoder, data []byte, i int) (int, bool) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return 0, false
	}
	for k := 0; dec.More(); k++ {
		if k == i {
			return valueStart(dec, data), true
		}
		if !skipValue(dec) {
			return 0, false
		}
	}
	return 0, false
}

// valueStart is the offset of the next token, past the separators.
func valueStart(dec *json.Decoder, data []byte) int {
	return int(jsonwalk.ValueStart(data, dec.InputOffset()))
}

// skipValue reads one value, however nested.
func skipValue(dec *json.Decoder) bool {
	return dec.Decode(new(json.RawMessage)) == nil
}
