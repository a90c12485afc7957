package resultjson

import (
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/internal/jsonwalk"
)

// maxDepth is the deepest nesting encoding/json decodes.
const maxDepth = 10000

// decodeOnce reads data as encoding/json decodes it (numbers as
// json.Number) in one pass that also notices the keys an object gives
// twice, folded as jsonwalk.FoldKey folds them. It returns false for a
// text that is not exactly one JSON value between white space, that
// nests deeper than encoding/json decodes or that gives a key twice: the
// caller then reads the text by jsonwalk.RepeatedKey and encoding/json,
// whose errors it reports.
func decodeOnce(data []byte) (any, bool) {
	d := decoder{data: data}
	d.space()
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	return v, d.i == len(data)
}

type decoder struct {
	data []byte
	i    int
	// buf is reused for each string with escapes or non-ASCII bytes.
	buf []byte
}

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.list(depth + 1)
	case c == '"':
		return d.string()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *decoder) literal(lit string) bool {
	if string(d.data[d.i:min(len(d.data), d.i+len(lit))]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

func (d *decoder) object(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.i++ // '{'
	m := map[string]any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, true
	}
	var small [keyListMax]string
	keys := keySet{list: small[:0]}
	for {
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok || !keys.add(k.(string)) {
			return nil, false
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.space()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k.(string)] = v
		if more, ok := d.next('}'); !more {
			return m, ok
		}
	}
}

func (d *decoder) list(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.i++ // '['
	l := []any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return l, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		if more, ok := d.next(']'); !more {
			return l, ok
		}
	}
}

// next reads what follows a member of an object or a list that end
// reads: more after a comma, the end (ok), or a fault (not ok).
func (d *decoder) next(end byte) (more, ok bool) {
	d.space()
	if d.i >= len(d.data) {
		return false, false
	}
	switch d.data[d.i] {
	case ',':
		d.i++
		d.space()
		return true, true
	case end:
		d.i++
		return false, true
	}
	return false, false
}

// number reads a number by JSON's grammar as its text.
func (d *decoder) number() (any, bool) {
	data, start := d.data, d.i
	digits := func() int {
		n := 0
		for d.i < len(data) && data[d.i] >= '0' && data[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if data[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(data) && data[d.i] == '0':
		d.i++
	case digits() == 0:
		return nil, false
	}
	if d.i < len(data) && data[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(data) && (data[d.i] == 'e' || data[d.i] == 'E') {
		d.i++
		if d.i < len(data) && (data[d.i] == '+' || data[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return json.Number(data[start:d.i]), true
}

// string reads a string as encoding/json does: an escaped surrogate that
// is not half of a pair, and each byte that is not part of valid UTF-8,
// read as U+FFFD.
func (d *decoder) string() (any, bool) {
	data := d.data
	d.i++ // '"'
	start := d.i
	for d.i < len(data) {
		c := data[d.i]
		if c == '"' {
			s := string(data[start:d.i])
			d.i++
			return s, true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		d.i++
	}
	d.buf = append(d.buf[:0], data[start:d.i]...)
	for d.i < len(data) {
		c := data[d.i]
		switch {
		case c == '"':
			d.i++
			return string(d.buf), true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if d.i+1 >= len(data) {
				return nil, false
			}
			switch e := data[d.i+1]; e {
			case '"', '\\', '/':
				d.buf = append(d.buf, e)
			case 'b':
				d.buf = append(d.buf, '\b')
			case 'f':
				d.buf = append(d.buf, '\f')
			case 'n':
				d.buf = append(d.buf, '\n')
			case 'r':
				d.buf = append(d.buf, '\r')
			case 't':
				d.buf = append(d.buf, '\t')
			case 'u':
				r, ok := hex4(data[d.i+2:])
				if !ok {
					return nil, false
				}
				d.i += 6
				if utf16.IsSurrogate(r) {
					if data := data[d.i:]; len(data) >= 2 && data[0] == '\\' && data[1] == 'u' {
						if r2, ok := hex4(data[2:]); ok {
							if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
								d.buf = utf8.AppendRune(d.buf, pair)
								d.i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				d.buf = utf8.AppendRune(d.buf, r)
				continue
			default:
				return nil, false
			}
			d.i += 2
		case c < utf8.RuneSelf:
			d.buf = append(d.buf, c)
			d.i++
		default:
			r, size := utf8.DecodeRune(data[d.i:])
			d.buf = utf8.AppendRune(d.buf, r) // U+FFFD for an invalid byte
			d.i += size
		}
	}
	return nil, false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// keySet holds the keys of one object: a list while the object is small
// (strings.EqualFold tells keys that fold alike, their runes being of
// the same case folding orbits), a map of the keys folded
// (jsonwalk.FoldKey) past that.
type keySet struct {
	list []string
	set  map[string]struct{}
}

const keyListMax = 16

// add adds k and reports whether no key of the set folds as it does.
func (s *keySet) add(k string) bool {
	if s.set == nil {
		for _, g := range s.list {
			if strings.EqualFold(g, k) {
				return false
			}
		}
		if len(s.list) < keyListMax {
			s.list = append(s.list, k)
			return true
		}
		s.set = make(map[string]struct{}, 2*keyListMax)
		for _, g := range s.list {
			s.set[foldKey(g)] = struct{}{}
		}
		s.list = nil
	}
	f := foldKey(k)
	if _, dup := s.set[f]; dup {
		return false
	}
	s.set[f] = struct{}{}
	return true
}

// foldKey is jsonwalk.FoldKey(k), without copying an ASCII key that has
// no lower case letter: an ASCII letter folds to its upper case.
func foldKey(k string) string {
	lower := false
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= utf8.RuneSelf {
			return jsonwalk.FoldKey(k)
		}
		lower = lower || c >= 'a' && c <= 'z'
	}
	if !lower {
		return k
	}
	b := []byte(k)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
