package pii

import (
	"html"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
)

// form is a reading of a text the detectors run on, with the mapping of a match in it back
// to the text as given.
type form struct {
	text string
	span func(start, end int) (int, int)
}

// forms returns the readings of text the detectors run on: the text folded
// (textnorm.FoldSeparators) with format characters dropped, and with them kept when that
// differs; and, when text holds escapes, the text decoded (decodeEscapes) and folded.
func forms(text string) []form {
	f := textnorm.FoldSeparators(text, false)
	out := []form{foldedForm(f, nil)}
	if kept := textnorm.FoldSeparators(text, true); kept.Text != f.Text {
		out = append(out, foldedForm(kept, nil))
	}
	if d, ok := decodeEscapes(text); ok {
		out = append(out, foldedForm(textnorm.FoldSeparators(d.text, false), d.span))
	}
	return out
}

// foldedForm is the form of a folded text whose spans are mapped on by outer when it is not
// nil. An underscore between two digits reads as a dash ("4111_1111_1111_1111",
// "123_45_6789"); the text keeps its length, so offsets are unchanged.
func foldedForm(f textnorm.Folded, outer func(int, int) (int, int)) form {
	text := f.Text
	if k := strings.IndexByte(text, '_'); k >= 0 {
		b := []byte(text)
		for i := k; i+1 < len(b); i++ {
			if b[i] == '_' && i > 0 && isDigit(b[i-1]) && isDigit(b[i+1]) {
				b[i] = '-'
			}
		}
		text = string(b)
	}
	if outer == nil {
		return form{text: text, span: f.Span}
	}
	return form{text: text, span: func(start, end int) (int, int) { return outer(f.Span(start, end)) }}
}

// decoded is a text with its escapes decoded, and for each of its bytes where the escape (or
// the character) it came from starts and ends in the original.
type decoded struct {
	text       string
	start, end []int
}

func (d decoded) span(start, end int) (int, int) {
	if end <= start {
		return d.start[start], d.start[start]
	}
	return d.start[start], d.end[end-1]
}

// decodeEscapes decodes the escapes a value may come wrapped in when a tool hands over text
// meant for a URL, a web page or a JSON document: percent-encoding ("jane%40example.com"),
// HTML character references, named or numeric ("jane&#64;example.com", "&commat;",
// "4111&nbsp;1111..."), and JSON's \uXXXX (with surrogate pairs). It reports false when text
// holds none.
func decodeEscapes(text string) (decoded, bool) {
	if !strings.ContainsAny(text, `%&\`) {
		return decoded{}, false
	}
	var d decoded
	var buf []byte
	changed := false
	put := func(s string, from, to int) {
		buf = append(buf, s...)
		for range len(s) {
			d.start = append(d.start, from)
			d.end = append(d.end, to)
		}
	}
	for i := 0; i < len(text); {
		if s, n := escapeAt(text, i); n > 0 {
			put(s, i, i+n)
			i += n
			changed = true
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		put(text[i:i+size], i, i+size)
		i += size
	}
	if !changed {
		return decoded{}, false
	}
	d.text = string(buf)
	return d, true
}

// maxEntity bounds the length of an HTML character reference ("&CounterClockwiseContourIntegral;").
const maxEntity = 34

// escapeAt decodes the escape at text[i], returning what it stands for and its length, or 0.
func escapeAt(text string, i int) (string, int) {
	switch text[i] {
	case '%':
		if i+2 < len(text) && isHex(text[i+1]) && isHex(text[i+2]) {
			v, _ := strconv.ParseUint(text[i+1:i+3], 16, 8)
			return string([]byte{byte(v)}), 3
		}
	case '&':
		end := strings.IndexByte(text[i+1:min(len(text), i+maxEntity)], ';')
		if end <= 0 {
			return "", 0
		}
		ref := text[i : i+end+2]
		if s := html.UnescapeString(ref); s != ref {
			return s, len(ref)
		}
	case '\\':
		r, n := uEscape(text, i)
		if n == 0 {
			return "", 0
		}
		if utf16.IsSurrogate(r) {
			r2, n2 := uEscape(text, i+n)
			if r = utf16.DecodeRune(r, r2); n2 == 0 || r == utf8.RuneError {
				return "", 0
			}
			n += n2
		}
		return string(r), n
	}
	return "", 0
}

// uEscape reads a JSON \uXXXX escape at text[i].
func uEscape(text string, i int) (rune, int) {
	if i+6 > len(text) || text[i] != '\\' || text[i+1] != 'u' {
		return 0, 0
	}
	v, err := strconv.ParseUint(text[i+2:i+6], 16, 16)
	if err != nil {
		return 0, 0
	}
	return rune(v), 6
}
