package textnorm

import (
	"sort"
	"strings"
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
// and letters with diacritics to the letter without its marks ("ïgnörë" reads "ignore"),
// whether a letter and its marks are written as one character or decomposed (a letter
// followed by combining marks), reads the tag characters (U+E0020 to U+E007E, which a model
// reads as the ASCII characters they stand for) as those characters, drops the characters a
// reader does not see (Invisible: format characters such as zero-width spaces and soft
// hyphens, combining marks, the combining grapheme joiner, variation selectors) and turns every
// run of other characters that are neither letters, digits nor spacing marks (whitespace,
// punctuation, symbols, the Hangul fillers that show as a space, the cancel tag that ends an
// emoji's tag sequence) into a single space. Leading separators are dropped; a trailing run
// leaves one space.
func Normalize(text string) *Normalized {
	buf := make([]byte, 0, len(text))
	n := &Normalized{orig: text, start: make([]int32, 0, len(text))}
	space := true // collapse leading separators
	for i := 0; i < len(text); {
		c, size := text[i], 1
		if c >= utf8.RuneSelf {
			var r rune
			r, size = utf8.DecodeRuneInString(text[i:])
			if a, ok := TagASCII(r); ok {
				c = a
			} else if Invisible(r) && r != cancelTag {
				i += size
				continue
			} else if blankFiller(r) || r == cancelTag {
				c = ' '
			} else if r = foldLetter(r, text[i:]); unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mc, r) {
				before := len(buf)
				buf = utf8.AppendRune(buf, unicode.ToLower(r))
				for range len(buf) - before {
					n.start = append(n.start, int32(i))
				}
				space = false
				i += size
				continue
			} else {
				c = ' '
			}
		}
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
			i += size
			continue
		}
		n.start = append(n.start, int32(i))
		space = false
		i += size
	}
	n.Text = string(buf)
	return n
}

// FoldPattern folds the letters of a regular expression written for normalized text as
// Normalize folds the text: look-alikes and full-width forms to ASCII, letters with
// diacritics to their base letter, tag characters to the letters and digits they stand for,
// upper case to lower ("olvídate" matches what Normalize makes of "Olvídate"), and drops the
// characters Normalize drops. ASCII is left as it is, so the expression's syntax is
// unchanged.
func FoldPattern(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	for i, r := range src {
		if r >= utf8.RuneSelf {
			if a, ok := TagASCII(r); ok {
				if unicode.IsLetter(rune(a)) || unicode.IsDigit(rune(a)) {
					r = rune(a) // a separator is left as it is, as ASCII's are
				}
			} else if Invisible(r) {
				continue
			} else {
				r = foldLetter(r, src[i:])
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TagASCII returns the ASCII character a tag character (U+E0020 to U+E007E) stands for. Tag
// characters are invisible; a model reads them as the characters they stand for, so that a
// text written in them is a message hidden from whoever reads the text on a screen. Emoji
// use them for the flags of subdivisions ("🏴" followed by "gbsct" in tags and a cancel tag
// is the flag of Scotland).
//
// The cancel tag (U+E007F), which ends an emoji's tag sequence, reads as a space in Normalize
// and Visible: the flag's letters are a word of their own, not glued to the next one.
func TagASCII(r rune) (byte, bool) {
	if r >= 0xE0020 && r <= 0xE007E {
		return byte(r - 0xE0000), true
	}
	return 0, false
}

// Invisible reports whether r is a character a reader does not see, which Normalize and
// Visible drop: a format character (Unicode category Cf: zero-width spaces and joiners,
// soft hyphens, bidirectional controls), a combining mark that does not take space of its
// own (categories Mn and Me: accents, the combining grapheme joiner, variation selectors)
// or another character Unicode says to ignore when it cannot be shown
// (Other_Default_Ignorable_Code_Point), but the Hangul fillers U+3164 and U+FFA0, which show
// as a space. Tag characters are Cf: TagASCII reads them first.
func Invisible(r rune) bool {
	if r < 0x300 { // ASCII, Latin-1 and Latin Extended letters: one is invisible
		return r == 0xAD
	}
	if r < 0x10000 {
		return invisibleBMP[r>>6]&(1<<(r&63)) != 0
	}
	return unicode.Is(invisibleTable, r)
}

// cancelTag ends a tag sequence.
const cancelTag = 0xE007F

// blankFiller reports whether r is one of the Hangul fillers that show as a space (U+3164,
// and its half-width form U+FFA0): letters to Unicode, ignorable, written in place of spaces.
func blankFiller(r rune) bool { return r == 0x3164 || r == 0xFFA0 }

// foldLetter folds r, the first rune of s, with FoldRune, or else, when its canonical
// decomposition is a letter followed by combining marks, to that letter folded ("é" to "e",
// Greek "ά" to "a", Cyrillic "й" to "и").
func foldLetter(r rune, s string) rune {
	if r < rune(len(latinFolds)) {
		return latinFolds[r]
	}
	return foldDecomposed(r, s)
}

func foldDecomposed(r rune, s string) rune {
	if f := FoldRune(r); f != r {
		return f
	}
	d := norm.NFD.PropertiesString(s).Decomposition()
	if len(d) == 0 {
		return r
	}
	base, n := utf8.DecodeRune(d)
	if !unicode.IsLetter(base) {
		return r
	}
	for k := n; k < len(d); k += n {
		var m rune
		m, n = utf8.DecodeRune(d[k:])
		if !unicode.In(m, unicode.Mn, unicode.Me) {
			return r
		}
	}
	return FoldRune(base)
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
// out trailing separators. The combining marks of the match's last letter are part of it.
func (n *Normalized) OrigEnd(i int) int {
	for i > 1 && n.Text[i-1] == ' ' {
		i--
	}
	if i == 0 || i > len(n.start) {
		return len(n.orig)
	}
	return endWithMarks(n.orig, int(n.start[i-1]))
}

// endWithMarks returns the end of the character of text at offset s, with the combining
// marks (categories Mn and Me) that follow it.
func endWithMarks(text string, s int) int {
	_, size := utf8.DecodeRuneInString(text[s:])
	e := s + size
	for e < len(text) && text[e] >= utf8.RuneSelf {
		r, size := utf8.DecodeRuneInString(text[e:])
		if !unicode.In(r, unicode.Mn, unicode.Me) {
			break
		}
		e += size
	}
	return e
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
	// marks makes Span end after the combining marks that follow a match's last character.
	marks bool
}

// Visible is text as a model reads it, with what a person reading it does not see made
// plain: the tag characters written as the ASCII characters they stand for (TagASCII), the
// Hangul fillers that show as a space and the cancel tag that ends an emoji's tag sequence as
// a space, and the other invisible characters
// (Invisible: format characters, combining marks, variation selectors) dropped, so that a
// letter with decomposed diacritics reads as the letter. Everything else, case, spacing,
// punctuation, letters with their diacritics as one character, is kept. Span maps a match in
// Text to the original, with the combining marks of its last letter.
func Visible(text string) Folded {
	f := foldWith(text, visibleRune)
	f.marks = true
	return f
}

func visibleRune(r rune) rune {
	if a, ok := TagASCII(r); ok {
		return rune(a)
	}
	if blankFiller(r) || r == cancelTag {
		return ' '
	}
	if Invisible(r) {
		return -1
	}
	return r
}

// Changed reports whether Text differs from the original.
func (f Folded) Changed() bool { return f.start != nil }

// Offset returns the offset in Text of the first character that comes from offset orig of
// the original or from after it (len(Text) when none does).
func (f Folded) Offset(orig int) int {
	if f.start == nil {
		return orig
	}
	return sort.Search(len(f.start), func(k int) bool { return int(f.start[k]) >= orig })
}

// Fold reads text as Visible does (tag characters as the ASCII they stand for, the Hangul
// fillers and the cancel tag as a space, the other invisible characters, combining marks
// among them, dropped) and folds each other rune with FoldRune. Case, spacing and
// punctuation are kept. Span maps a match in Text to the original, with the combining marks
// of its last letter.
func Fold(text string) Folded {
	f := foldWith(text, foldVisible)
	f.marks = true
	return f
}

func foldVisible(r rune) rune {
	if v := visibleRune(r); v != r {
		return v
	}
	return FoldRune(r)
}

// FoldSeparators is Fold for detectors that read digits grouped by spaces or hyphens
// ("4111 1111 1111 1111", "123-45-6789"): it also writes every decimal digit of another
// script (Unicode category Nd: Arabic-Indic "٤١١١", Devanagari "४१११"...) as its ASCII
// digit, every space separator (category Zs: the no-break, narrow no-break, thin and figure
// spaces) as an ASCII space, the line and paragraph separators as a line break, every dash
// (category Pd, and the minus sign) as an ASCII hyphen and the small commercial at ("﹫") as
// "@", and it drops the other characters Unicode says to ignore when they cannot be shown
// (the combining grapheme joiner, variation selectors, Hangul fillers). The tag characters
// are read as the ASCII characters they stand for (TagASCII), as a model reads them, and the
// cancel tag that ends an emoji's tag sequence as a space. With keepFormat the other format
// characters (category Cf) are kept as they are instead of dropped.
func FoldSeparators(text string, keepFormat bool) Folded {
	if keepFormat {
		return foldWith(text, foldSeparatorKeep)
	}
	return foldWith(text, foldSeparatorDrop)
}

// foldSeparatorKeep and foldSeparatorDrop are FoldSeparators' folds, made once.
var (
	foldSeparatorKeep = readTags(foldSeparator)
	foldSeparatorDrop = readTags(dropFormat(foldSeparator))
)

// readTags returns fold that also reads the tag characters as the ASCII they stand for and
// the cancel tag as a space.
func readTags(fold func(rune) rune) func(rune) rune {
	return func(r rune) rune {
		if a, ok := TagASCII(r); ok {
			return rune(a)
		}
		if r == cancelTag {
			return ' '
		}
		return fold(r)
	}
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
	if f.marks {
		return s, endWithMarks(f.orig, last)
	}
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
