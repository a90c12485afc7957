package pii

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
)

// form is a reading of a text the detectors run on, with the mapping of a match in it back
// to the text as given.
type form struct {
	text string
	span func(start, end int) (int, int)
	// encoded: the base64 and hex runs of the form are read too (textnorm.Encodings).
	encoded bool
}

// forms returns the readings of text the detectors run on: the text folded (foldText)
// with format characters dropped, and with them kept when that differs; and, when text holds escapes, the text decoded (textnorm.Unescape:
// percent-encoding, HTML character references, JSON's \uXXXX, and its two-character escapes
// where one stands between a number's groups, escapesBetweenDigits) and folded, and decoded again
// at each level of escapes escaped (textnorm.UnescapeNested). The base64 and hex
// runs of the folded and decoded forms are read as the text they decode to (Find).
func forms(text string) []form {
	f := foldText(text, false)
	out := []form{foldedForm(f, nil)}
	out[0].encoded = true
	if kept := foldText(text, true); kept.text != f.text {
		out = append(out, foldedForm(kept, nil))
	}
	if d, ok := textnorm.UnescapeShortAt(text, escapesBetweenDigits(text)); ok {
		out = append(out, foldedForm(foldText(d.Text, false), d.Span))
		out[len(out)-1].encoded = true
		// Escapes escaped again (a JSON document quoted in a JSON string, "%2540",
		// "&amp;#64;") are read at each level, JSON's "\\" and "\"" decoded there.
		if !strings.Contains(text, `\\`) && !textnorm.HasEscape(d.Text, false) {
			return out
		}
		if nested := textnorm.UnescapeNested(text, true); len(nested) > 1 {
			for _, d := range nested[1:] {
				out = append(out, foldedForm(foldText(d.Text, false), d.Span))
				out[len(out)-1].encoded = true
			}
		}
	}
	return out
}

// escapesBetweenDigits returns the offsets of JSON's two-character escapes of a line break,
// a tab, a slash or a form feed ("\n", "\r", "\t", "\/", "\b", "\f") that stand between
// the groups of a number: after a digit or a closing parenthesis and before a digit, an
// opening parenthesis or a "+", spaces and other such escapes aside ("0044\n0532",
// "4111\/1111", "(415)\n555"). The text is read with those escapes decoded too, as the
// model reads a JSON document's strings: a card, an SSN, a phone number or an IBAN whose
// groups they join. They are decoded where they stand only: a JSON document's prose
// ("report\n2. click", "\"export\"") is not read so again, and what is found on one line
// does not hang on an escape on another (a streamed line is released before the next
// arrives).
func escapesBetweenDigits(text string) []int {
	var at []int
	for i := 0; ; {
		k := strings.IndexByte(text[i:], '\\')
		if k < 0 {
			return at
		}
		i += k
		if i+1 >= len(text) || strings.IndexByte("nrt/bf", text[i+1]) < 0 {
			i++
			continue
		}
		b := i
		for b > 0 && text[b-1] == ' ' {
			b--
		}
		e := i + 2
		for e < len(text) {
			if text[e] == ' ' {
				e++
			} else if e+1 < len(text) && text[e] == '\\' && strings.IndexByte("nrt/bf", text[e+1]) >= 0 {
				e += 2
			} else {
				break
			}
		}
		if b > 0 && (isDigit(text[b-1]) || text[b-1] == ')') && e < len(text) && (isDigit(text[e]) || text[e] == '(' || text[e] == '+') {
			for k := i; k < e; k++ {
				if text[k] == '\\' {
					at = append(at, k)
					k++
				}
			}
		}
		i = e
	}
}

// foldedForm is the form of a folded text whose spans are mapped on by outer when it is not
// nil. An underscore between two digits reads as a dash ("4111_1111_1111_1111",
// "123_45_6789"); the text keeps its length, so offsets are unchanged.
func foldedForm(f folded, outer func(int, int) (int, int)) form {
	text := f.text
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
		return form{text: text, span: f.span}
	}
	return form{text: text, span: func(start, end int) (int, int) { return outer(f.span(start, end)) }}
}

// sameSpan is the span of a text read as it is.
func sameSpan(start, end int) (int, int) { return start, end }

// folded is a text as the detectors read it, with the mapping of a span of it back to the
// text as given.
type folded struct {
	text string
	span func(start, end int) (int, int)
}

// foldText folds text as textnorm.FoldSeparators does (keepFormat keeps the format
// characters), and then skips, as it skips the invisible characters, what the model reads
// through: a combining mark that stands on no letter (an accent or a keycap on a digit:
// "4\u0301111...") and, unless keepFormat, the replacement character U+FFFD (what a broken
// byte or a lone surrogate of a JSON string decodes to: "4111\ufffd1111...") and a byte that
// is no UTF-8, which reaches the model as U+FFFD. Marks on
// letters are kept, the letters of words and addresses as written. A span of the result
// covers the characters skipped inside it.
func foldText(text string, keepFormat bool) folded {
	f := textnorm.FoldSeparators(text, keepFormat)
	t := f.Text
	first := 0 // what it skips is beyond ASCII: the ASCII text before it is read as it is
	for first < len(t) && t[first] < utf8.RuneSelf {
		first++
	}
	if first == len(t) {
		if !f.Changed() {
			return folded{text: t, span: sameSpan} // without a method value to allocate
		}
		return folded{text: t, span: f.Span}
	}
	var buf []byte
	var at []int32                               // the offset in t of each byte of buf, once a rune is skipped
	onLetter := first > 0 && isAlpha(t[first-1]) // the last rune kept, marks aside, is a letter
	for i := first; i < len(t); {
		r, size := rune(t[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(t[i:])
		}
		skip := false
		switch {
		case r == utf8.RuneError:
			skip = !keepFormat
		case r >= utf8.RuneSelf && unicode.In(r, unicode.Mn, unicode.Me):
			skip = !onLetter
		default:
			onLetter = r < utf8.RuneSelf && isAlpha(byte(r)) || r >= utf8.RuneSelf && unicode.IsLetter(r)
		}
		switch {
		case skip && at == nil:
			buf, at = append(make([]byte, 0, len(t)), t[:i]...), make([]int32, i, len(t))
			for k := range i {
				at[k] = int32(k)
			}
		case !skip && at != nil:
			buf = append(buf, t[i:i+size]...)
			for k := range size {
				at = append(at, int32(i+k))
			}
		}
		i += size
	}
	if at == nil {
		return folded{text: t, span: f.Span}
	}
	return folded{text: string(buf), span: func(start, end int) (int, int) {
		s := len(t)
		if start < len(at) {
			s = int(at[start])
		}
		if end <= start {
			return f.Span(s, s)
		}
		last := int(at[end-1])
		_, size := utf8.DecodeRuneInString(t[last:])
		return f.Span(s, last+size)
	}}
}
