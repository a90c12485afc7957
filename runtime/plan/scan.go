package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
)

// at renders the position of offset off in data for a problem.
func at(data []byte, off int64) string {
	line, col := jsonwalk.Position(data, off)
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

// MaxNumberLength bounds the characters of a number in a plan: a float64
// or a 64-bit integer takes at most 24.
const MaxNumberLength = 100

// scan walks data, which must be one valid JSON value, once, and lists
// two kinds of problems of it.
//
// dups are the keys an object repeats: encoding/json keeps the last of
// them, while a reader of the file may see the first, so a plan that
// repeats a key is refused. Among the keys of a layer's config, which the
// runtime decodes into a Go struct whose field names match keys regardless
// of case, keys that differ only in case are repeats too.
//
// nums are the numbers that no Go float64 holds (beyond its range, or a
// number other than zero too small for it, which would be read as 0) or
// that have more than MaxNumberLength characters, wherever they are: no
// field of a plan, nor a limit of the JSON Schemas it holds, needs one.
func scan(data []byte) (dups, nums []string) {
	w := jsonwalk.Walker{
		Fold: isLayerConfig,
		Repeat: func(obj []byte, key string, start, first int64) bool {
			dups = append(dups, fmt.Sprintf("%s/%s (%s): duplicate key %q (also at %s)",
				obj, jsonpointer.Escape(key), at(data, start), key, at(data, first)))
			return true
		},
		Value: func(ptr []byte, start int64) bool {
			if p := numberProblem(data, ptr, start); p != "" {
				nums = append(nums, p)
			}
			return true
		},
	}
	_ = w.Walk(data) // data was decoded whole before
	return dups, nums
}

// numberProblem says what is wrong with the value of data at start, whose
// JSON pointer is ptr, when it is a number scan refuses ("" otherwise).
func numberProblem(data, ptr []byte, start int64) string {
	if c := data[start]; c != '-' && (c < '0' || c > '9') {
		return ""
	}
	end := start
	for end < int64(len(data)) && strings.IndexByte("+-.0123456789eE", data[end]) >= 0 {
		end++
	}
	num := string(data[start:end])
	loc := string(ptr)
	if loc == "" {
		loc = "/"
	}
	if len(num) > MaxNumberLength {
		return fmt.Sprintf("%s (%s): number %s... of %d characters: a plan's numbers have at most %d",
			loc, at(data, start), num[:40], len(num), MaxNumberLength)
	}
	f, err := strconv.ParseFloat(num, 64)
	mantissa, _, _ := strings.Cut(strings.ToLower(num), "e")
	if err != nil || f == 0 && strings.ContainsAny(mantissa, "123456789") {
		return fmt.Sprintf("%s (%s): number %s does not fit a Go float64", loc, at(data, start), num)
	}
	return ""
}

// values calls visit with the JSON pointer (valid during the call only)
// and the offset of the start of every value of data, which must be one
// valid JSON value, until visit returns false.
func values(data []byte, visit func(ptr []byte, start int64) bool) {
	w := jsonwalk.Walker{Value: visit}
	_ = w.Walk(data) // data was decoded whole before
}

// offsetsOf returns the offsets in data of the values that the JSON
// pointers of want name.
func offsetsOf(data []byte, want map[string]bool) map[string]int64 {
	out := map[string]int64{}
	values(data, func(ptr []byte, start int64) bool {
		if want[string(ptr)] {
			out[string(ptr)] = start
		}
		return len(out) < len(want)
	})
	return out
}

// isLayerConfig reports whether ptr is the JSON pointer of a layer's
// config (/chains/<stage>/<index>/config): only a config's own keys fold,
// since below them may be maps keyed by names, which the runtime matches
// exactly (tracing's attributes).
func isLayerConfig(ptr []byte) bool {
	layer, ok := bytes.CutSuffix(ptr, []byte("/config"))
	return ok && isLayerPointer(string(layer))
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
	values(data, func(p []byte, start int64) bool {
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
