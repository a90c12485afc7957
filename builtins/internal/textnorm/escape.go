package textnorm

import (
	"html"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Decoded is a text with its escapes decoded, and for each of its bytes where the escape (or
// the character) it came from starts and ends in the original.
type Decoded struct {
	// Text is the decoded form.
	Text       string
	start, end []int32
}

// Span maps the match [start, end) in Text to the original text: from the start of the
// escape its first byte came from to the end of the escape its last byte came from.
func (d Decoded) Span(start, end int) (int, int) {
	if start >= len(d.start) {
		n := 0
		if len(d.end) > 0 {
			n = int(d.end[len(d.end)-1])
		}
		return n, n
	}
	if end <= start {
		return int(d.start[start]), int(d.start[start])
	}
	return int(d.start[start]), int(d.end[min(end, len(d.end))-1])
}

// From maps the span [start, end) of the original text to Text, the inverse of Span: the
// bytes decoded from the escapes (and characters) it overlaps.
func (d Decoded) From(start, end int) (int, int) {
	// the escapes' starts and ends never decrease along Text
	i := sort.Search(len(d.end), func(k int) bool { return int(d.end[k]) > start })
	j := sort.Search(len(d.start), func(k int) bool { return int(d.start[k]) >= end })
	return i, max(i, j)
}

// Unescape decodes the escapes a value may come wrapped in when a tool hands over text meant
// for a URL, a web page or a JSON document: percent-encoding ("jane%40example.com"), HTML
// character references, named or numeric ("jane&#64;example.com", "&commat;",
// "4111&nbsp;1111..."), and JSON's \uXXXX (with surrogate pairs); with short, also JSON's
// two-character escapes (\" \\ \/ \b \f \n \r \t), which a JSON document quoted in a string
// or an encoder escaping slashes leaves in the text. It reports false when text holds none.
func Unescape(text string, short bool) (Decoded, bool) {
	return unescape(text, short, nil)
}

// UnescapeShortAt is Unescape decoding JSON's two-character escapes only at the offsets of at,
// in increasing order: where they stand, not wherever the text holds one.
func UnescapeShortAt(text string, at []int) (Decoded, bool) { return unescape(text, false, at) }

func unescape(text string, short bool, at []int) (Decoded, bool) {
	if !strings.ContainsAny(text, `%&\`) {
		return Decoded{}, false
	}
	d := Decoded{start: make([]int32, 0, len(text)), end: make([]int32, 0, len(text))}
	buf := make([]byte, 0, len(text))
	changed := false
	for i := 0; i < len(text); {
		for len(at) > 0 && at[0] < i {
			at = at[1:]
		}
		if s, n := escapeAt(text, i, short || len(at) > 0 && at[0] == i); n > 0 {
			buf = append(buf, s...)
			for range len(s) {
				d.start = append(d.start, int32(i))
				d.end = append(d.end, int32(i+n))
			}
			i += n
			changed = true
			continue
		}
		// Every byte of a character maps to the whole character.
		size := 1
		if text[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(text[i:])
		}
		buf = append(buf, text[i:i+size]...)
		for range size {
			d.start = append(d.start, int32(i))
			d.end = append(d.end, int32(i+size))
		}
		i += size
	}
	if !changed {
		return Decoded{}, false
	}
	d.Text = string(buf)
	return d, true
}

// MaxUnescapeLevels bounds the escapes read inside one another (UnescapeNested): a JSON
// document quoted in a string that is itself in a JSON string (`{\\\"password\\\":...}`),
// a percent-encoded URL encoded again (`%2540`), an escaped HTML reference (`&amp;#64;`).
const MaxUnescapeLevels = 3

// UnescapeNested returns the decodings of text with Unescape, each decoded again, as long as
// one holds escapes, MaxUnescapeLevels at most: the first is Unescape's, and each after it
// maps its spans to text itself, not to the decoding before it. It returns nil when text holds
// no escapes. A decoding that holds no escape costs one pass without allocation.
func UnescapeNested(text string, short bool) []Decoded {
	d, ok := Unescape(text, short)
	if !ok {
		return nil
	}
	out := []Decoded{d}
	for len(out) < MaxUnescapeLevels && HasEscape(d.Text, short) {
		inner, ok := Unescape(d.Text, short)
		if !ok {
			break
		}
		for i := range inner.start {
			inner.start[i], inner.end[i] = d.start[inner.start[i]], d.end[inner.end[i]-1]
		}
		d = inner
		out = append(out, d)
	}
	return out
}

// HasEscape reports whether text holds an escape Unescape decodes, without allocating.
func HasEscape(text string, short bool) bool {
	for i := 0; i < len(text); i++ {
		k := strings.IndexAny(text[i:], `%&\`)
		if k < 0 {
			return false
		}
		i += k
		if _, n := escapeAt(text, i, short); n > 0 {
			return true
		}
	}
	return false
}

// maxEntity bounds the length of an HTML character reference ("&CounterClockwiseContourIntegral;").
const maxEntity = 34

// shortEscape returns what JSON's two-character escape ending in c stands for.
func shortEscape(c byte) (string, bool) {
	switch c {
	case '"':
		return `"`, true
	case '\\':
		return `\`, true
	case '/':
		return "/", true
	case 'b':
		return "\b", true
	case 'f':
		return "\f", true
	case 'n':
		return "\n", true
	case 'r':
		return "\r", true
	case 't':
		return "\t", true
	}
	return "", false
}

// escapeAt decodes the escape at text[i], returning what it stands for and its length, or 0.
func escapeAt(text string, i int, short bool) (string, int) {
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
		if short && i+1 < len(text) {
			if s, ok := shortEscape(text[i+1]); ok {
				return s, 2
			}
		}
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

func isHex(b byte) bool {
	return (b >= '0' && b <= '9') || ((b|0x20) >= 'a' && (b|0x20) <= 'f')
}
