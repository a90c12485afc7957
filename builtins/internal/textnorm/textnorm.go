package textnorm

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Normalized is text lower-cased and folded, with words separated by exactly one space, and
// for each of its bytes the offset in the original of the rune it came from.
type Normalized struct {
	// Text is the normalized form.
	Text  string
	orig  string
	start []int32
}

// Normalize lower-cases text, folds full-width forms and look-alike letters to ASCII (FoldRune)
// and Latin letters with diacritics to the letter without its marks ("ïgnörë" reads "ignore"),
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
		if b := latinBase()[r]; b != 0 {
			r = b
		}
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

// FoldPattern folds the letters of a regular expression written for normalized text as
// Normalize folds the text: look-alikes and full-width forms to ASCII, Latin letters with
// diacritics to their base letter, upper case to lower ("olvídate" matches what Normalize
// makes of "Olvídate"). ASCII is left as it is, so the expression's syntax is unchanged.
func FoldPattern(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	for _, r := range src {
		if r >= utf8.RuneSelf {
			r = FoldRune(r)
			if base := latinBase()[r]; base != 0 {
				r = base
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
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
func Fold(text string) Folded { return foldWith(text, dropFormat(FoldRune)) }

// FoldSeparators is Fold for detectors that read digits grouped by spaces or hyphens
// ("4111 1111 1111 1111", "123-45-6789"): it also writes every decimal digit of another
// script (Unicode category Nd: Arabic-Indic "٤١١١", Devanagari "४१११"...) as its ASCII
// digit, every space separator (category Zs: the no-break, narrow no-break, thin and figure
// spaces) as an ASCII space, the line and paragraph separators as a line break, every dash
// (category Pd, and the minus sign) as an ASCII hyphen and the small commercial at ("﹫") as
// "@", and it drops the other characters Unicode says to ignore when they cannot be shown
// (the combining grapheme joiner, variation selectors, Hangul fillers). With keepFormat the
// format characters (category Cf) are kept as they are instead of dropped.
func FoldSeparators(text string, keepFormat bool) Folded {
	if keepFormat {
		return foldWith(text, foldSeparator)
	}
	return foldWith(text, dropFormat(foldSeparator))
}

// dropFormat returns fold that also drops (maps to -1) the format characters.
func dropFormat(fold func(rune) rune) func(rune) rune {
	return func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return fold(r)
	}
}

func foldSeparator(r rune) rune {
	switch {
	case r < 0x80:
		return r
	case unicode.Is(unicode.Zs, r):
		return ' '
	case r == '\u2028' || r == '\u2029':
		return '\n'
	case r == '\u2212' || unicode.Is(unicode.Pd, r):
		return '-'
	case r == '\ufe6b':
		return '@'
	case unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return -1
	}
	if d, ok := digitValue(r); ok {
		return '0' + d
	}
	return FoldRune(r)
}

// digitValue returns the value of a decimal digit (Unicode category Nd). Unicode encodes the
// digits of each script as a run of ten from zero to nine, and the ranges of Nd are such runs
// (adjacent ones merged), so a digit's value is its distance from the start of its range,
// modulo ten.
func digitValue(r rune) (rune, bool) {
	if !unicode.IsDigit(r) {
		return 0, false
	}
	for _, rg := range unicode.Nd.R16 {
		if lo, hi := rune(rg.Lo), rune(rg.Hi); r >= lo && r <= hi {
			return (r - lo) % 10, rg.Stride == 1
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if lo, hi := rune(rg.Lo), rune(rg.Hi); r >= lo && r <= hi {
			return (r - lo) % 10, rg.Stride == 1
		}
	}
	return 0, false
}

// foldWith maps each non-ASCII rune of text with fold, dropping those it maps to -1.
func foldWith(text string, fold func(rune) rune) Folded {
	i := 0
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if fold(r) != r {
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
		before := len(buf)
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, text[i]) // invalid UTF-8 is kept as it is
		} else if m := fold(r); m >= 0 {
			buf = utf8.AppendRune(buf, m)
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

// FoldRune maps to ASCII the runes that stand for ASCII letters and digits: full-width forms,
// mathematical alphanumerics (bold, italic, script, fraktur, double-struck, sans-serif,
// monospace), circled, parenthesized and squared letters, regional indicators, and common
// Cyrillic, Greek and small-capital look-alikes (to lower case). Other runes, letters with
// diacritics among them, are returned as they are.
func FoldRune(r rune) rune {
	switch {
	case r < 0x80:
		return r
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFEE0
	case r >= 0x1D400 && r <= 0x1D6A3: // 13 alphabets of 52 letters, capitals first
		if i := (r - 0x1D400) % 52; i < 26 {
			return 'A' + i
		} else {
			return 'a' + i - 26
		}
	case r >= 0x1D7CE && r <= 0x1D7FF: // 5 sets of digits
		return '0' + (r-0x1D7CE)%10
	case r >= 0x249C && r <= 0x24B5: // parenthesized small letters
		return 'a' + r - 0x249C
	case r >= 0x24B6 && r <= 0x24CF: // circled capitals
		return 'A' + r - 0x24B6
	case r >= 0x24D0 && r <= 0x24E9: // circled small letters
		return 'a' + r - 0x24D0
	case r >= 0x1F130 && r <= 0x1F149: // squared capitals
		return 'A' + r - 0x1F130
	case r >= 0x1F150 && r <= 0x1F169: // negative circled capitals
		return 'A' + r - 0x1F150
	case r >= 0x1F170 && r <= 0x1F189: // negative squared capitals
		return 'A' + r - 0x1F170
	case r >= 0x1F1E6 && r <= 0x1F1FF: // regional indicators
		return 'A' + r - 0x1F1E6
	}
	if a, ok := confusables[r]; ok {
		return a
	}
	return r
}

// latinBase maps each Latin letter with diacritics (Latin-1 Supplement, Latin Extended-A and
// -B, Latin Extended Additional) whose canonical decomposition starts with an ASCII letter to
// that letter.
var latinBase = sync.OnceValue(func() map[rune]rune {
	m := map[rune]rune{}
	for _, block := range [][2]rune{{0xC0, 0x24F}, {0x1E00, 0x1EFF}} {
		for r := block[0]; r <= block[1]; r++ {
			d := norm.NFD.String(string(r))
			if b := rune(d[0]); len(d) > 1 && b < 0x80 && unicode.IsLetter(b) {
				m[r] = b
			}
		}
	}
	return m
})

var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'і': 'i', 'ј': 'j',
	'ѕ': 's', 'һ': 'h', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'м': 'm', 'т': 't', 'в': 'b', 'н': 'h',
	'к': 'k', 'А': 'a', 'Е': 'e', 'О': 'o', 'Р': 'p', 'С': 'c', 'У': 'y', 'Х': 'x', 'І': 'i',
	'М': 'm', 'Т': 't', 'В': 'b', 'Н': 'h', 'К': 'k',
	// Small capitals
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i',
	'ᴊ': 'j', 'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's',
	'ᴛ': 't', 'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z',
	// Greek
	'α': 'a', 'ε': 'e', 'ο': 'o', 'ρ': 'p', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'τ': 't', 'υ': 'u',
	'Α': 'a', 'Β': 'b', 'Ε': 'e', 'Ι': 'i', 'Κ': 'k', 'Μ': 'm', 'Ν': 'n', 'Ο': 'o', 'Ρ': 'p',
	'Τ': 't', 'Χ': 'x', 'Υ': 'y',
}
