// Package jsonwalk walks the tokens of a JSON text and keeps the place of
// each: the JSON pointer and byte offset of every value, the keys an object
// repeats (encoding/json keeps the last of them, while a reader of the text
// may see the first), and the line and column of an offset. The plan loader
// and the policy loader's JSON data files (scenarios, tests) read their
// texts through it.
package jsonwalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
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

// The faults of a text that Walk finds besides those of the JSON syntax.
var (
	// ErrTrailing is data after the value.
	ErrTrailing = errors.New("more data after the JSON value")
	// ErrTooDeep is a value nesting deeper than Walker.MaxDepth.
	ErrTooDeep = errors.New("nesting deeper than the limit")
)

// Error is a text that is not one JSON value (nesting at most
// Walker.MaxDepth levels).
type Error struct {
	// Offset is where the fault is: the offending byte of a syntax
	// error, the end of a text that ends inside the value, the start of
	// the token after the value or of the container nesting too deep.
	Offset int64
	// Err is the *json.SyntaxError, io.ErrUnexpectedEOF (the text ends
	// before the value does), ErrTrailing or ErrTooDeep.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// jsonMaxDepth is the deepest nesting encoding/json decodes (its scanner's
// limit): a text nesting deeper is not JSON to it.
const jsonMaxDepth = 10000

// Walker walks the tokens of one JSON value. Its zero value checks that
// the text is one JSON value, as encoding/json decodes it.
type Walker struct {
	// MaxDepth, when above 0, is the deepest nesting of objects and lists
	// the text may have.
	MaxDepth int
	// Fold, when set, reports whether the keys of the object at the JSON
	// pointer ptr are the same when they differ only in case (as
	// encoding/json matches keys to the fields of a struct).
	Fold func(ptr []byte) bool
	// Value, when set, is called with the JSON pointer (valid during the
	// call only) and the offset of the start of every value, in the order
	// of the text; the walk stops when it returns false.
	Value func(ptr []byte, start int64) bool
	// Repeat, when set, is called for each key that repeats a key of the
	// same object, with the object's JSON pointer (valid during the call
	// only), the key, its offset and the offset of the first; the walk
	// stops when it returns false.
	Repeat func(obj []byte, key string, start, first int64) bool
}

// frame is an object or a list the walk is inside.
type frame struct {
	obj, fold, wantKey bool
	// n counts a list's elements; key is an object's last key.
	n   int
	key string
	// plen is the length of the container's pointer in the walk's path.
	plen int
	// seen holds the offset of each key (folded when fold: FoldKey) of an
	// object.
	seen map[string]int64
}

// Walk walks data, calling Value and Repeat, and returns an *Error when
// data is not one JSON value within MaxDepth. A walk that Value or Repeat
// stops returns nil.
func (w *Walker) Walk(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []frame
	path := make([]byte, 0, 256)
	done := false
	for {
		start := ValueStart(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return walkError(data, err, done)
		}
		if done {
			return &Error{Offset: start, Err: ErrTrailing}
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		delim, isDelim := tok.(json.Delim)
		if top != nil && top.obj && top.wantKey {
			if isDelim { // '}'
				stack = stack[:len(stack)-1]
				done = len(stack) == 0
				continue
			}
			k, _ := tok.(string)
			id := k
			if top.fold {
				id = FoldKey(k)
			}
			if first, dup := top.seen[id]; dup {
				if w.Repeat != nil && !w.Repeat(path[:top.plen], k, start, first) {
					return nil
				}
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
			done = len(stack) == 0
			continue
		}
		if isDelim && w.MaxDepth > 0 && len(stack) == w.MaxDepth {
			return &Error{Offset: start, Err: ErrTooDeep}
		}
		if isDelim && len(stack) == jsonMaxDepth {
			// The decoder's tokens count no depth; encoding/json refuses
			// the text.
			return walkError(data, &json.SyntaxError{}, false)
		}
		path = path[:0]
		if top != nil {
			path = path[:top.plen]
			path = append(path, '/')
			if top.obj {
				path = append(path, jsonpointer.Escape(top.key)...)
				top.wantKey = true
			} else {
				path = strconv.AppendInt(path, int64(top.n), 10)
				top.n++
			}
		}
		if w.Value != nil && !w.Value(path, start) {
			return nil
		}
		if isDelim {
			obj := delim == '{'
			fold := obj && w.Fold != nil && w.Fold(path)
			stack = append(stack, frame{obj: obj, fold: fold, plen: len(path), wantKey: obj})
		} else if top == nil {
			done = true
		}
	}
}

// walkError is the *Error of err, which dec.Token returned (nil for the
// end of a text that held a value, done).
func walkError(data []byte, err error, done bool) error {
	var se *json.SyntaxError
	switch {
	case err == io.EOF && done:
		return nil
	case errors.As(err, &se):
		// The decoder's tokens count the offset of a fault inside a
		// literal, a number or a string from the value's start, and of
		// one after the value from its end. A check of the whole text
		// stops at the same byte and counts it from the text's start
		// (the offending byte included).
		var whole *json.SyntaxError
		if errors.As(json.Unmarshal(data, new(json.RawMessage)), &whole) {
			return &Error{Offset: whole.Offset - 1, Err: whole}
		}
		return &Error{Offset: se.Offset, Err: se}
	}
	return &Error{Offset: int64(len(data)), Err: io.ErrUnexpectedEOF}
}

// FoldKey returns k with each rune replaced by the least rune of its case
// folding orbit, as encoding/json folds a key to match a struct's field:
// "ſ" (U+017F) is an s, "K" (U+212A) a k, and "ı" (U+0131) no i.
func FoldKey(k string) string {
	return strings.Map(func(r rune) rune {
		for {
			f := unicode.SimpleFold(r)
			if f <= r {
				return f
			}
			r = f
		}
	}, k)
}

// RepeatedKey returns the first key an object of the JSON text data gives
// twice, as a quoted JSON pointer ("/note/by"), keys that differ only in
// case counting as one: encoding/json reads the last of them (and of keys
// that match a Go struct's field whatever their case), while another
// reader of the text may read the first. A text that is not JSON has
// none.
func RepeatedKey(data []byte) (string, bool) {
	var key string
	w := Walker{
		Fold: func([]byte) bool { return true },
		Repeat: func(obj []byte, k string, _, _ int64) bool {
			key = strconv.Quote(string(obj) + "/" + jsonpointer.Escape(k))
			return false
		},
	}
	_ = w.Walk(data)
	return key, key != ""
}
