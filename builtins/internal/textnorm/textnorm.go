package textnorm

import (
	"unicode"
	"unicode/utf8"
)

// Normalized is text lower-cased and folded, with words separated by exactly one space, and
// for each of its bytes the offset in the original of the rune it came from.
type Normalized struct {
	// Text is the normalized form.
	Text  string
	orig  string
	start []int32
}

// Normalize lower-cases text, folds full-width forms and look-alike letters to ASCII (FoldRune),
// drops invisible format characters (Unicode category Cf: zero-width spaces, soft hyphens) and
// turns every run of other characters that are neither letters nor digits (whitespace,
// punctuation, symbols) into a single space. Leading separators are dropped; a trailing run
// leaves one space.
func Normalize(text string) *Normalized {
	buf := make([]byte, 0, len(text))
	n := &Normalized{orig: text, start: make([]int32, 0, len(text))}
	space := true // collapse leading separators
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 'A' && c <= 'Z':
				buf = append(buf, c+'a'-'A')
			case (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
				buf = append(buf, c)
			default:
				if !space {
					buf = append(buf, ' ')
					n.start = append(n.start, int32(i))
					space = true
				}
				i++
				continue
			}
			n.start = append(n.start, int32(i))
			space = false
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if unicode.Is(unicode.Cf, r) {
			i += size
			continue
		}
		r = FoldRune(r)
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			before := len(buf)
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			for k := before; k < len(buf); k++ {
				n.start = append(n.start, int32(i))
			}
			space = false
		} else if !space {
			buf = append(buf, ' ')
			n.start = append(n.start, int32(i))
			space = true
		}
		i += size
	}
	n.Text = string(buf)
	return n
}

// OrigStart maps the start offset i of a match in Text to the original text. A match may
// begin on a collapsed separator; the next real character is reported.
func (n *Normalized) OrigStart(i int) int {
	for i < len(n.Text) && n.Text[i] == ' ' && i+1 < len(n.Text) {
		i++
	}
	if i >= len(n.start) {
		return len(n.orig)
	}
	return int(n.start[i])
}

// OrigEnd maps the end offset i (exclusive) of a match in Text to the original text, leaving
// out trailing separators.
func (n *Normalized) OrigEnd(i int) int {
	for i > 1 && n.Text[i-1] == ' ' {
		i--
	}
	if i == 0 || i > len(n.start) {
		return len(n.orig)
	}
	s := int(n.start[i-1])
	_, size := utf8.DecodeRuneInString(n.orig[s:])
	return s + size
}

// Folded is text with invisible format characters dropped and full-width forms and
// look-alike letters folded to ASCII, everything else as it was.
type Folded struct {
	// Text is the folded form.
	Text string
	orig string
	// start holds, for each byte of Text, the offset in orig of the rune it came from; nil
	// when Text is orig unchanged.
	start []int32
}

// Fold drops the invisible format characters (Unicode category Cf) of text and folds each
// other rune with FoldRune. Case, spacing and punctuation are kept.
func Fold(text string) Folded {
	i := 0
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if unicode.Is(unicode.Cf, r) || FoldRune(r) != r {
			break
		}
		i += size
	}
	if i == len(text) {
		return Folded{Text: text, orig: text}
	}
	buf := make([]byte, i, len(text))
	copy(buf, text[:i])
	f := Folded{orig: text, start: make([]int32, i, len(text))}
	for k := range i {
		f.start[k] = int32(k)
	}
	for i < len(text) {
		if c := text[i]; c < utf8.RuneSelf {
			buf = append(buf, c)
			f.start = append(f.start, int32(i))
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if unicode.Is(unicode.Cf, r) {
			i += size
			continue
		}
		before := len(buf)
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, text[i]) // invalid UTF-8 is kept as it is
		} else {
			buf = utf8.AppendRune(buf, FoldRune(r))
		}
		for range len(buf) - before {
			f.start = append(f.start, int32(i))
		}
		i += size
	}
	f.Text = string(buf)
	return f
}

// Span maps the match [start, end) in Text to the original text. Format characters dropped
// inside the match are part of the span; those around it are not.
func (f Folded) Span(start, end int) (int, int) {
	if f.start == nil {
		return start, end
	}
	s := len(f.orig)
	if start < len(f.start) {
		s = int(f.start[start])
	}
	if end <= start {
		return s, s
	}
	last := int(f.start[end-1])
	_, size := utf8.DecodeRuneInString(f.orig[last:])
	return s, last + size
}

// FoldRune maps full-width ASCII and common look-alike letters to ASCII (look-alikes to lower
// case); other runes are returned as they are.
func FoldRune(r rune) rune {
	if r >= 0xFF01 && r <= 0xFF5E {
		return r - 0xFEE0
	}
	if r < 0x80 {
		return r
	}
	if a, ok := confusables[r]; ok {
		return a
	}
	return r
}

var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'і': 'i', 'ј': 'j',
	'ѕ': 's', 'һ': 'h', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'м': 'm', 'т': 't', 'в': 'b', 'н': 'h',
	'к': 'k', 'А': 'a', 'Е': 'e', 'О': 'o', 'Р': 'p', 'С': 'c', 'У': 'y', 'Х': 'x', 'І': 'i',
	'М': 'm', 'Т': 't', 'В': 'b', 'Н': 'h', 'К': 'k',
	// Greek
	'α': 'a', 'ε': 'e', 'ο': 'o', 'ρ': 'p', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'τ': 't', 'υ': 'u',
	'Α': 'a', 'Β': 'b', 'Ε': 'e', 'Ι': 'i', 'Κ': 'k', 'Μ': 'm', 'Ν': 'n', 'Ο': 'o', 'Ρ': 'p',
	'Τ': 't', 'Χ': 'x', 'Υ': 'y',
}
