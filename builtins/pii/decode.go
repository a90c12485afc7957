package pii

import (
	"strings"

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

// forms returns the readings of text the detectors run on: the text folded
// (textnorm.FoldSeparators) with format characters dropped, and with them kept when that
// differs; and, when text holds escapes, the text decoded (textnorm.Unescape:
// percent-encoding, HTML character references, JSON's \uXXXX) and folded, and decoded again
// at each level of escapes escaped (textnorm.UnescapeNested). The base64 and hex
// runs of the folded and decoded forms are read as the text they decode to (Find).
func forms(text string) []form {
	f := textnorm.FoldSeparators(text, false)
	out := []form{foldedForm(f, nil)}
	out[0].encoded = true
	if kept := textnorm.FoldSeparators(text, true); kept.Text != f.Text {
		out = append(out, foldedForm(kept, nil))
	}
	if d, ok := textnorm.Unescape(text, false); ok {
		out = append(out, foldedForm(textnorm.FoldSeparators(d.Text, false), d.Span))
		out[len(out)-1].encoded = true
		// Escapes escaped again (a JSON document quoted in a JSON string, "%2540",
		// "&amp;#64;") are read at each level, JSON's "\\" and "\"" decoded there.
		if !strings.Contains(text, `\\`) && !textnorm.HasEscape(d.Text, false) {
			return out
		}
		if nested := textnorm.UnescapeNested(text, true); len(nested) > 1 {
			for _, d := range nested[1:] {
				out = append(out, foldedForm(textnorm.FoldSeparators(d.Text, false), d.Span))
				out[len(out)-1].encoded = true
			}
		}
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
