package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MapStrings returns a copy of v with f applied to every string in it, and the
// sum of the counts f returns. It descends into map[string]any, []any,
// map[string]string and []string. Map keys are strings too: f is applied to
// each, and a key f changes is renamed (see renameKeys), so a value a
// redactor masks does not survive as an object key. Every other
// value (numbers, booleans, nil, other types) is returned unchanged with a
// count of 0.
//
// v itself is never modified: every container of those four types is copied,
// even when f changes nothing in it. A value of any other type is returned as
// it is, so a container of another type (a map[string]int, a struct) is shared
// with v, not copied.
func MapStrings(v any, f func(string) (string, int)) (any, int) {
	return MapLeaves(v, f, nil)
}

// MapLeaves is MapStrings with a hook for the leaves that are neither strings
// nor containers: other, when not nil, is called with each of them (a number,
// a boolean, nil, a value of any other type) and its result takes the leaf's
// place, its count added to the total. Only values inside map[string]any and
// []any (or v itself) reach other: map[string]string and []string hold only
// strings.
func MapLeaves(v any, f func(string) (string, int), other func(any) (any, int)) (any, int) {
	return mapLeaves(v, f, other, readers{key: keyMemo(f)})
}

// readers are the hooks of MapTextJoined that read strings together, and key, f for the keys
// of objects (keyMemo).
type readers struct {
	joined func(run, keys []string) ([]string, int)
	pair   func(key, value string) (string, int)
	key    func(string) (string, int)
}

// keyMemo returns f reading each string once: the objects of an array of records share their
// keys, which are read once for all of them.
func keyMemo(f func(string) (string, int)) func(string) (string, int) {
	type result struct {
		s string
		n int
	}
	seen := map[string]result{}
	return func(k string) (string, int) {
		if r, ok := seen[k]; ok {
			return r.s, r.n
		}
		s, n := f(k)
		seen[k] = result{s, n}
		return s, n
	}
}

// member returns the value e of the key k of an object read with its key by pair (a string,
// or an integral number as its digits), and the count pair returned: e itself with 0 when
// pair changes nothing. An object or an array is read one level down: each of its strings
// (an object's values under a key that holds a value, Holds, and the element of an array of
// one; not its numbers, counts more often than not, nor an object's strings under other keys,
// which describe the value more often than not, nor the strings of a list) is read with k, as
// the model reads `"password": {"value": "hunter2"}`, and a copy holding what pair returned for
// them is returned when it changes one.
func (rd readers) member(k string, e any) (any, int) {
	if rd.pair == nil {
		return e, 0
	}
	switch x := e.(type) {
	case Object:
		if vals, n := rd.members(k, x.Keys, x.Values); n > 0 {
			return Object{Keys: x.Keys, Values: vals}, n
		}
		return e, 0
	case []any:
		if vals, n := rd.members(k, nil, x); n > 0 {
			return vals, n
		}
		return e, 0
	case map[string]any:
		var out map[string]any
		total := 0
		for ik, v := range x {
			if _, ok := v.(string); !ok || !Holds(ik) {
				continue
			}
			if red, n := rd.leafMember(k, v); n > 0 {
				if out == nil {
					out = maps.Clone(x)
				}
				out[ik], total = red, total+n
			}
		}
		if out == nil {
			return e, 0
		}
		return out, total
	}
	return rd.leafMember(k, e)
}

// members returns a copy of vals (the values of keys, or an array's elements with nil keys)
// with each read with the key k (leafMember), when that changes one, and the count.
func (rd readers) members(k string, keys []string, vals []any) ([]any, int) {
	var out []any
	total := 0
	for i, v := range vals {
		if _, ok := v.(string); !ok || (keys != nil && !Holds(keys[i])) || (keys == nil && len(vals) != 1) {
			continue
		}
		if red, n := rd.leafMember(k, v); n > 0 {
			if out == nil {
				out = slices.Clone(vals)
			}
			out[i], total = red, total+n
		}
	}
	return out, total
}

// holdingKeys are the keys of an object under a key word whose strings are the value the key
// word names: `"password": {"value": "..."}`, `"api_key": {"old": "...", "new": "..."}`, a
// value for each environment. An object's other keys describe the value rather than hold it
// (a schema's `"password": {"type": "string", "format": "password"}`, a reference's
// `"secret": {"name": "db", "key": "password"}`, a token's `"token": {"issuer": ...}`).
var holdingKeys = []string{"value", "Value", "old", "new", "current", "previous", "next",
	"primary", "secondary", "plain", "plaintext", "raw", "default",
	"prod", "production", "staging", "dev", "development", "test", "live"}

// Holds reports whether the strings under the key k of an object are the value of the key
// word the object is the value of (holdingKeys): those are read with it.
func Holds(k string) bool { return slices.Contains(holdingKeys, k) }

// nameKeys and valueKeys are the keys of an object that names a value in a member of its own:
// `{"name": "API_KEY", "value": "..."}`, as a list of environment variables, a form's fields
// or a list of headers writes them.
var (
	nameKeys  = []string{"name", "Name", "key", "Key"}
	valueKeys = []string{"value", "Value"}
)

// NameKey reports whether k names the value of an object that names a value in a member of
// its own (nameKeys); ValueKey whether it holds the value (valueKeys).
func NameKey(k string) bool  { return slices.Contains(nameKeys, k) }
func ValueKey(k string) bool { return slices.Contains(valueKeys, k) }

// NamedValue returns the indices in keys of the name and the value of an object that names a
// value in a member of its own (nameKeys, valueKeys), both strings (value(i) is the value of
// keys[i]); ok is false for any other object.
func NamedValue(keys []string, value func(i int) any) (name, val int, ok bool) {
	name, val = -1, -1
	for i, k := range keys {
		if _, isString := value(i).(string); !isString {
			continue
		}
		if name < 0 && NameKey(k) {
			name = i
		} else if val < 0 && ValueKey(k) {
			val = i
		}
	}
	return name, val, name >= 0 && val >= 0
}

// named reads the value of an object that names it in a member of its own (NamedValue) with
// that name by pair, as the member it stands for, and returns the count; vals are the values
// of keys, rewritten in place.
func (rd readers) named(keys []string, vals []any) int {
	if rd.pair == nil || len(keys) < 2 {
		return 0
	}
	name, val, ok := NamedValue(keys, func(i int) any { return vals[i] })
	if !ok {
		return 0
	}
	red, n := rd.pair(vals[name].(string), vals[val].(string))
	if n > 0 {
		vals[val] = red
	}
	return n
}

// leafMember is member for a string or an integral number: e itself with 0 for any other value.
func (rd readers) leafMember(k string, e any) (any, int) {
	text, ok := e.(string)
	if !ok {
		if text, ok = NumberText(e); !ok {
			return e, 0
		}
	}
	if red, n := rd.pair(k, text); n > 0 {
		return red, n
	}
	return e, 0
}

func mapLeaves(v any, f func(string) (string, int), other func(any) (any, int), rd readers) (any, int) {
	joined := rd.joined
	switch x := v.(type) {
	case string:
		r, n := f(x)
		if n == 0 && r == x {
			return v, 0 // v itself: a string put in an interface is a copy
		}
		return r, n
	case map[string]any:
		out := make(map[string]any, len(x))
		total := 0
		if joined != nil {
			keys := SortedKeys(x)
			vals := make([]any, len(keys))
			for i, k := range keys {
				e, m := rd.member(k, x[k])
				vals[i], total = e, total+m
			}
			total += rd.named(keys, vals)
			n := mapRunsInPlace(vals, keys, f, other, rd)
			for i, k := range keys {
				out[k] = vals[i]
			}
			return renameKeys(out, rd.keyFunc(f), total+n)
		}
		for k, e := range x {
			e, m := rd.member(k, e)
			r, n := mapLeaves(e, f, other, rd)
			out[k] = r
			total += m + n
		}
		return renameKeys(out, rd.keyFunc(f), total)
	case []any:
		return mapRuns(x, f, other, rd)
	case Object:
		return mapObject(x, f, other, rd)
	case map[string]string:
		out := make(map[string]string, len(x))
		total := 0
		if joined != nil && len(x) > 1 {
			// the values, one after another in the order of their keys, are a run of strings
			keys := SortedKeys(x)
			vals := make([]string, len(keys))
			for i, k := range keys {
				p, m := rd.member(k, x[k])
				vals[i], total = p.(string), total+m
			}
			red, n := joined(vals, keys)
			for i, k := range keys {
				out[k] = red[i]
			}
			return renameKeys(out, rd.keyFunc(f), total+n)
		}
		for k, e := range x {
			p, m := rd.member(k, e)
			r, n := f(p.(string))
			out[k] = r
			total += m + n
		}
		return renameKeys(out, rd.keyFunc(f), total)
	case []string:
		out := slices.Clone(x)
		total := 0
		if joined != nil && len(x) > 1 {
			return joined(out, nil)
		}
		for i, e := range out {
			r, n := f(e)
			out[i] = r
			total += n
		}
		return out, total
	default:
		if other != nil {
			return other(v)
		}
		return v, 0
	}
}

// keyFunc returns what reads the keys of objects: rd.key, or f.
func (rd readers) keyFunc(f func(string) (string, int)) func(string) (string, int) {
	if rd.key != nil {
		return rd.key
	}
	return f
}

// mapRuns returns a copy of the elements of an array mapped: each run of two or more
// consecutive strings (StringRuns) by joined alone (when it is not nil), the others by
// mapLeaves.
func mapRuns(x []any, f func(string) (string, int), other func(any) (any, int), rd readers) ([]any, int) {
	out := make([]any, len(x))
	copy(out, x)
	return out, mapRunsInPlace(out, nil, f, other, rd)
}

// mapRunsInPlace is mapRuns mapping the elements of x in place, or, with keys, the values of
// an object under those keys, in their order, each run handed to joined with its keys.
func mapRunsInPlace(x []any, keys []string, f func(string) (string, int), other func(any) (any, int), rd readers) int {
	total := 0
	var joined func(r [2]int, run, runKeys []string)
	if rd.joined != nil {
		// The strings of a run are read by joined alone.
		joined = func(r [2]int, run, runKeys []string) {
			red, n := rd.joined(run, runKeys)
			if n > 0 {
				for k := range red {
					x[r[0]+k] = red[k]
				}
			}
			total += n
		}
	}
	EachRun(x, keys, joined, func(i int) {
		r, n := mapLeaves(x[i], f, other, rd)
		x[i] = r
		total += n
	})
	return total
}

// EachRun goes through the elements of x in order: each run of two or more consecutive
// strings (StringRuns) goes to run with its strings and, with keys (the keys of an object's
// values, one for one), theirs; every other element to elem by its index. With run nil,
// every element goes to elem.
func EachRun(x []any, keys []string, run func(r [2]int, strs, keys []string), elem func(i int)) {
	var runs [][2]int
	if run != nil {
		runs = StringRuns(x)
	}
	for i := 0; i < len(x); i++ {
		if len(runs) > 0 && i == runs[0][0] {
			r := runs[0]
			runs = runs[1:]
			var runKeys []string
			if keys != nil {
				runKeys = keys[r[0]:r[1]]
			}
			run(r, RunStrings(x, r), runKeys)
			i = r[1] - 1
			continue
		}
		elem(i)
	}
}

// SortedKeys returns the keys of m in order: the order in which JSON writes an object's
// members, and in which the model reads them.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// StringRuns returns the runs of two or more consecutive strings of an array, as the
// [start, end) indices of each, in order.
func StringRuns(x []any) [][2]int {
	var out [][2]int
	for i := 0; i < len(x); {
		if _, ok := x[i].(string); !ok {
			i++
			continue
		}
		j := i + 1
		for j < len(x) {
			if _, ok := x[j].(string); !ok {
				break
			}
			j++
		}
		if j-i > 1 {
			out = append(out, [2]int{i, j})
		}
		i = j
	}
	return out
}

// RunStrings returns the strings of x in the run r of StringRuns.
func RunStrings(x []any, r [2]int) []string {
	run := make([]string, r[1]-r[0])
	for k := range run {
		run[k] = x[r[0]+k].(string)
	}
	return run
}

// MapText is MapStrings that also reads the integral numbers of v as text
// (NumberText): f is applied to the digits of each, and a number f changes
// becomes the string f returns (a card or account number sent as a JSON
// number is masked like one sent as a string). Other numbers are left as
// they are.
func MapText(v any, f func(string) (string, int)) (any, int) { return MapTextJoined(v, f, nil, nil) }

// MapTextJoined is MapText that reads the strings of an array side by side: each run of two
// or more consecutive strings of an array ([]any or []string; StringRuns), or of the values
// of an object in the order of its keys (as JSON writes them and the model reads them; those
// of an Object in the order written), is handed to joined instead of f (with the keys of an
// object's values, one for one; nil for an array's), which returns it rewritten (what it found
// in the elements, or across them, masked) with a count. A string of an array that is in no
// run is read by f. With pair, the
// value of each object key that is a string or an integral number (read as its digits) is
// first read with its key: pair returns the value rewritten (what runs from the key into it
// masked, "password" and "hunter2") with a count, and a number it changes becomes the string
// it returns; f then reads what pair returned. A nil joined and pair is MapText.
func MapTextJoined(v any, f func(string) (string, int), joined func(run, keys []string) ([]string, int), pair func(key, value string) (string, int)) (any, int) {
	return MapTextReaders(v, f, Readers{Joined: joined, Pair: pair})
}

// Readers are the hooks of MapTextReaders: Joined and Pair as MapTextJoined takes them, and
// Key, which reads the keys of objects in place of f (each key once: the objects of an array
// of records share their keys).
type Readers struct {
	Joined func(run, keys []string) ([]string, int)
	Pair   func(key, value string) (string, int)
	Key    func(string) (string, int)
}

// MapTextReaders is MapTextJoined with the hooks of r; a nil r.Key reads the keys by f.
func MapTextReaders(v any, f func(string) (string, int), r Readers) (any, int) {
	key := r.Key
	if key == nil {
		key = f
	}
	return mapLeaves(v, f, func(v any) (any, int) {
		if text, ok := NumberText(v); ok {
			if r, n := f(text); n > 0 {
				return r, n
			}
		}
		return v, 0
	}, readers{r.Joined, r.Pair, keyMemo(key)})
}

// NumberText renders an integral number as its decimal digits: a
// json.Number written as an integer as it is written (however long), a
// finite float64 without a fraction, whatever its size (a json.Number
// written with a fraction or an exponent is read as one: "4.111e3" is
// "4111", 1.2345678901234567e19 is 12345678901234567000, the number a tool
// decoding it gets), an int, int64 or uint64. These are the only numbers
// that can hold a card, phone or account number; ok is false for any other
// value.
func NumberText(v any) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		if isInteger(string(x)) {
			return string(x), true
		}
		f, err := x.Float64()
		if err != nil {
			return "", false
		}
		return NumberText(f)
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'f', -1, 64), true
		}
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	}
	return "", false
}

// isInteger reports whether s is an integer literal: digits, after an
// optional minus sign.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// renameKeys applies f to the keys of m (a fresh copy, changed in place) and
// returns m with total plus the counts f returned. A key f leaves as it is
// keeps its place; a key f changes is moved to its new name, or, when that
// name is taken (a key of m, or another key renamed to the same mask), to the
// new name followed by "#2", "#3"...: the first free one, in the order of the
// original keys. No value is lost.
func renameKeys[V any](m map[string]V, f func(string) (string, int), total int) (map[string]V, int) {
	var renamed []string
	names := map[string]string{}
	for k := range m {
		if nk, n := f(k); n > 0 && nk != k {
			renamed = append(renamed, k)
			names[k] = nk
			total += n
		}
	}
	if len(renamed) == 0 {
		return m, total
	}
	slices.Sort(renamed)
	vals := make([]V, len(renamed))
	for i, k := range renamed {
		vals[i] = m[k]
		delete(m, k)
	}
	for i, k := range renamed {
		name := names[k]
		for j := 2; ; j++ {
			if _, taken := m[name]; !taken {
				break
			}
			name = names[k] + "#" + strconv.Itoa(j)
		}
		m[name] = vals[i]
	}
	return m, total
}

// Plain reports whether v holds only the values MapStrings and the
// scanners read as they are: those of decoded JSON (nil, bool, string,
// a finite float64, json.Number, map[string]any, []any), map[string]string,
// []string and Go integers (int, int64, uint64). Any other value (a struct,
// a []map[string]any, a map[string]int64) would be skipped as a leaf while
// its JSON form, which is what a tool or a model is sent, may hold text:
// read it through Decode(json.Marshal(v)) instead.
func Plain(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, json.Number, int, int64, uint64, map[string]string, []string:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case map[string]any:
		for _, e := range x {
			if !Plain(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !Plain(e) {
				return false
			}
		}
		return true
	}
	return false
}

// Decode decodes the JSON text b, numbers as json.Number (as written, so
// that encoding the value again writes them unchanged). Text after the
// value is an error.
func Decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	return out, nil
}

// ToPlain returns v as Plain reads it: v itself when it is Plain, else its
// JSON form decoded (numbers as json.Number). A value with no JSON form (a
// NaN, a channel) is an error: it cannot be read.
func ToPlain(v any) (any, error) {
	if Plain(v) {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("it has no JSON form: %w", err)
	}
	out, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("its JSON form does not decode: %w", err)
	}
	return out, nil
}
