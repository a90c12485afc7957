package textnorm

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Encoded is a run of a text written in base64, base32 or hex whose decoding holds printable
// text.
type Encoded struct {
	// Start and End are the byte offsets of the run in the text (End exclusive), its padding
	// included.
	Start, End int
	// Text is the printable pieces of the run's decoding, MinDecoded bytes or more each,
	// joined by line breaks.
	Text string
	// Kind is the encoding the run was decoded from: "base64", "base32" or "hex" (a dump's
	// lines, or bytes with separators or prefixes, are "hex" too). A run whose pieces come
	// from more than one decoding names the one that gave the longest piece.
	Kind string
	// Cut, when not 0, is where a run wrapped over lines ends without its last line (at that
	// line's break): a short line that reads as a word of the text after the run rather than
	// as the run's end (lastLineWord), which Text reads with the run as well. CutText is the
	// run's reading without it. A reader takes the run up to Cut when CutText holds a value,
	// else up to End (Readings), so that a mask of the value leaves the word.
	Cut     int
	CutText string
}

// Readings returns the readings of e to try in turn, the first that holds a value being the
// one to mask: the run without a last line that reads as a word (Cut), then the whole run;
// or e alone.
func (e Encoded) Readings() []Encoded {
	if e.Cut == 0 {
		return []Encoded{e}
	}
	return []Encoded{{Start: e.Start, End: e.Cut, Text: e.CutText, Kind: e.Kind}, e}
}

const (
	// MinDecoded is the fewest printable bytes a piece of a decoding must hold to be read: an
	// e-mail address or an SSN is about that long.
	MinDecoded = 8
	// minBase64 and minHex are the shortest runs decoded: those that can hold MinDecoded bytes.
	minBase64 = 4 * MinDecoded / 3
	minHex    = 2 * MinDecoded
	minBase32 = (8*MinDecoded + 4) / 5
	// minWrapped is the shortest line a base64 run wrapped over lines (MIME's 76 characters,
	// PEM's 64) may have before its line break.
	minWrapped = 16
)

// smallRun is the length of run decoded without allocating.
const smallRun = 256

// b64 marks the bytes of the base64 alphabets, standard ("+/") and URL-safe ("-_").
var b64 = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_" {
		t[c] = true
	}
	return t
}()

// Encodings returns the runs of text written in base64 (standard or URL-safe, padded or not,
// wrapped over lines of a multiple of four characters), base32 (RFC 4648's upper-case alphabet,
// padded or not) or hex (contiguous, or its bytes separated: separatedHex, or the lines of a
// hex dump: hexDumps) whose decoding holds printable text, in order: a value a tool hands over encoded is read as the text it stands for. A run
// is decoded at each of its alignments (the characters before a value's encoding may belong
// to the run: a path, a key glued to it), and the printable pieces of each decoding are kept;
// a decoding that is binary (an image, a hash, random bytes) gives none, and no run is
// returned for it. Text without a run of 12 characters of the alphabet costs one pass and no
// allocation.
func Encodings(text string) []Encoded {
	var out []Encoded
	var buf []byte
	for i := 0; i < len(text); {
		if !b64[text[i]] {
			i++
			continue
		}
		start := i
		for i < len(text) && b64[text[i]] {
			i++
		}
		if i-start < minBase64 {
			continue // too short to decode, and to go on over a line break
		}
		end, padded, wrapped := i, i, false
		if lineBreak(text, i) > 0 {
			end, padded, wrapped = base64Run(text, start)
		} else {
			// base32 pads with up to six "=", base64 with two.
			pad := 2
			if isBase32(text[end-1]) {
				pad = 6
			}
			for k := 0; k < pad && padded < len(text) && text[padded] == '='; k++ {
				padded++
			}
		}
		i = padded
		if !wrapped {
			if pieces, kind := decodeRun(text[start:end]); pieces != "" {
				out = append(out, Encoded{Start: start, End: padded, Text: pieces, Kind: kind})
			}
			continue
		}
		buf = buf[:0]
		for k := start; k < end; k++ {
			if c := text[k]; c != '\n' && c != '\r' {
				buf = append(buf, c)
			}
		}
		run := string(buf)
		pieces, kind := decodeRun(run)
		// A short last line may be a word of the text after the run, glued to it ("done"
		// under a value's encoding): the run is read without it too, and when the line
		// reads as a word, that reading ends at the line's break.
		cut, cutText := 0, ""
		lastLine := strings.LastIndexByte(text[start:end], '\n') + start + 1
		if last := end - lastLine; last < minWrapped {
			before := run[:len(run)-last]
			more, moreKind := decodeRun(before)
			if more != "" && lastLineWord(text, lastLine, end, padded, before) {
				cut, cutText = lastLine-1, more
				if cut > start && text[cut-1] == '\r' {
					cut--
				}
			}
			if more != "" && more != pieces {
				if pieces == "" {
					kind = moreKind
				}
				pieces = strings.TrimPrefix(pieces+"\n"+more, "\n")
			}
		}
		if pieces != "" {
			out = append(out, Encoded{Start: start, End: padded, Text: pieces, Kind: kind, Cut: cut, CutText: cutText})
		}
	}
	return hexDumps(text, separatedHex(text, out))
}

// lastLineWord reports whether text[from:end], the short last line of a run wrapped over
// lines, padded up to padded, reads as a word of the text after the run rather than as the
// run's end (before is the run without it): unpadded, it is followed on its line by more
// text after a space ("NOT approved"), or it is not the end of an encoding that goes on the
// text of the lines before it: hex of an even length, or base64 of a multiple of four
// characters, whose decoding joins the text the lines before end in as text. A line that
// is the end of the value's encoding can read as a word too (a word that decodes as text):
// it is then the run's.
func lastLineWord(text string, from, end, padded int, before string) bool {
	return WordAfterRun(before, text[from:end], text[end:])
}

// WordAfterRun reports whether tail, the short last line of a run of base64 or hex wrapped
// over lines, reads as a word of the text after the run rather than as the run's end (see
// lastLineWord): before is the run's lines before it, without their line breaks (at least
// their last line), and rest the text after tail.
func WordAfterRun(before, tail, rest string) bool {
	if strings.HasPrefix(rest, "=") || len(before) < 6 {
		return false
	}
	k := 0
	for k < len(rest) && (rest[k] == ' ' || rest[k] == '\t') {
		k++
	}
	if k > 0 && k < len(rest) && rest[k] != '\n' && rest[k] != '\r' {
		return true
	}
	if isHexRun(before) && isHexRun(tail) && len(tail)%2 == 0 {
		dec, err := hex.DecodeString(before[len(before)-6:] + tail)
		if err == nil && endsText(dec) {
			return false
		}
	}
	if len(tail)%4 != 0 {
		return true
	}
	q := stdAlphabet([]byte(before[len(before)-4:] + tail))
	dec := make([]byte, base64.StdEncoding.DecodedLen(len(q)))
	n, err := base64.StdEncoding.Decode(dec, q)
	return err != nil || !endsText(dec[:n])
}

// endsText reports whether dec, the last bytes of a decoding, is printable text up to its end
// (a character cut at its start left out, none at its end).
func endsText(dec []byte) bool {
	lead := 0
	for lead < utf8.UTFMax-1 && lead < len(dec) && dec[lead]&0xc0 == 0x80 {
		lead++
	}
	u := uncut(dec)
	return len(u) == len(dec)-lead && allPrintable(u)
}

// base64Run returns the end of the run of the base64 alphabets (either one) that starts at
// start in text, as Encodings reads it: a run wrapped over lines goes on after a line break
// when the line before it (from the run's start on its first line) is 16 characters or more
// and a multiple of four, and the next line starts with a character of the alphabet. padded
// is the end after the run's padding ("=" or "=="), and wrapped tells whether the run holds
// line breaks.
func base64Run(text string, start int) (end, padded int, wrapped bool) {
	i := start
	line := i // where the current line of the run starts
	for {
		for i < len(text) && b64[text[i]] {
			i++
		}
		brk := lineBreak(text, i)
		if brk == 0 || !wrapsOn(i-line) || i+brk >= len(text) || !b64[text[i+brk]] {
			break
		}
		i += brk
		line = i
		wrapped = true
	}
	end = i
	for k := 0; k < 2 && i < len(text) && text[i] == '='; k++ {
		i++
	}
	return end, i, wrapped
}

// lineBreak returns the length of the line break at i in text ("\n" or "\r\n"), or 0.
func lineBreak(text string, i int) int {
	if i < len(text) && text[i] == '\n' {
		return 1
	}
	if i+1 < len(text) && text[i] == '\r' && text[i+1] == '\n' {
		return 2
	}
	return 0
}

// wrapsOn reports whether a line of n characters of a base64 run may be followed by more of
// the run after its line break.
func wrapsOn(n int) bool { return n >= minWrapped && n%4 == 0 }

// WrappedRunStart returns, for a text that ends in a line break, where the base64 run that
// ends its last line starts when that run may go on over the line break (base64Run: the text
// still to come may continue it), or -1. A stream released line by line holds the text from
// there, so that the run is read whole once it ends. The run may start lines before the last
// one, which it is wrapped over.
func WrappedRunStart(text string) int { return wrappedRunStart(text, Walk{}) }

func wrappedRunStart(text string, known Walk) int {
	end := len(text) - 1
	if end < 0 || text[end] != '\n' {
		return -1
	}
	from := -1
	for {
		if known.reached(end) {
			return known.after(from)
		}
		if end > 0 && text[end-1] == '\r' {
			end--
		}
		k := end
		for k > 0 && b64[text[k-1]] {
			k--
		}
		if !wrapsOn(end - k) {
			return from
		}
		from = k
		// A run that starts its line may go on from the line before.
		if k == 0 || text[k-1] != '\n' {
			return from
		}
		end = k - 1
	}
}

// decodeRun returns the printable pieces of run's decodings as hex, base32 and base64,
// joined by line breaks, or "", and the encoding of the decoding read whole, else of the one
// that gave the longest piece.
func decodeRun(run string) (string, string) {
	var pieces []string
	var whole bool
	kind, longest := "", 0
	// note names kind the encoding of the pieces from on when one is the longest yet.
	note := func(from int, k string) {
		for _, p := range pieces[from:] {
			if len(p) > longest {
				kind, longest = k, len(p)
			}
		}
	}
	// The runs of hex digits within the run ("0x" or "id_" before one), and of the base32
	// alphabet (upper-case letters and 2 to 7).
	if pieces, whole = subRuns(run, minHex, isHex, decodeHex, pieces); whole {
		return strings.Join(pieces, "\n"), "hex"
	}
	note(0, "hex")
	from := len(pieces)
	if pieces, whole = subRuns(run, minBase32, isBase32, decodeBase32, pieces); whole {
		return strings.Join(pieces, "\n"), "base32"
	}
	note(from, "base32")
	if len(run) < minBase64 {
		return strings.Join(pieces, "\n"), kind
	}
	from = len(pieces)
	// Read the URL-safe alphabet as the standard one: a run may mix them only by chance.
	var stdBuf [smallRun]byte
	std := append(stdBuf[:0], run...)
	if strings.ContainsAny(run, "-_") {
		stdAlphabet(std)
	}
	var decBuf [smallRun]byte
	dec := decBuf[:0]
	if n := base64.RawStdEncoding.DecodedLen(len(std)); n > len(decBuf) {
		dec = make([]byte, n)
	} else {
		dec = decBuf[:n]
	}
	for k := 0; k < 4 && len(std)-k >= minBase64; k++ {
		s := std[k:]
		if len(s)%4 == 1 {
			s = s[:len(s)-1]
		}
		n, err := base64.RawStdEncoding.Decode(dec, s)
		if err != nil {
			continue
		}
		var whole bool
		if pieces, whole = printable(dec[:n], pieces); whole {
			break
		}
	}
	note(from, "base64")
	return strings.Join(pieces, "\n"), kind
}

// stdAlphabet rewrites the URL-safe characters of b ("-_") as the standard ones ("+/"), and
// returns b.
func stdAlphabet(b []byte) []byte {
	for i, c := range b {
		switch c {
		case '-':
			b[i] = '+'
		case '_':
			b[i] = '/'
		}
	}
	return b
}

// subRuns appends to pieces what decode reads in each run of min characters or more of run
// that are all of an alphabet (in), and reports whether run is one such run whose decoding is
// all printable.
func subRuns(run string, min int, in func(byte) bool, decode func(string, []string) ([]string, bool), pieces []string) ([]string, bool) {
	for i := 0; i+min <= len(run); {
		if !in(run[i]) {
			i++
			continue
		}
		j := i
		for j < len(run) && in(run[j]) {
			j++
		}
		if j-i >= min {
			var whole bool
			if pieces, whole = decode(run[i:j], pieces); whole && j-i == len(run) {
				return pieces, true
			}
		}
		i = j
	}
	return pieces, false
}

// decodeBase32 appends the printable pieces of run decoded as base32 (RFC 4648's alphabet,
// without its padding), at each of its eight alignments until one is all printable, to pieces,
// and reports whether one decoding is all printable.
func decodeBase32(run string, pieces []string) ([]string, bool) {
	var decBuf, srcBuf [smallRun]byte
	dec := decBuf[:0]
	if n := base32.StdEncoding.WithPadding(base32.NoPadding).DecodedLen(len(run)); n > len(decBuf) {
		dec = make([]byte, n)
	} else {
		dec = decBuf[:n]
	}
	src := append(srcBuf[:0], run...)
	for k := 0; k < 8 && len(src)-k >= minBase32; k++ {
		s := src[k:]
		// A length of 1, 3 or 6 past a whole number of blocks is no base32: drop its tail.
		for len(s)%8 == 1 || len(s)%8 == 3 || len(s)%8 == 6 {
			s = s[:len(s)-1]
		}
		n, err := base32.StdEncoding.WithPadding(base32.NoPadding).Decode(dec, s)
		if err != nil {
			continue
		}
		var whole bool
		if pieces, whole = printable(dec[:n], pieces); whole {
			return pieces, true
		}
	}
	return pieces, false
}

// decodeHex appends the printable pieces of run decoded as hex, at either alignment, to
// pieces, and reports whether one decoding is all printable.
func decodeHex(run string, pieces []string) ([]string, bool) {
	var decBuf [smallRun]byte
	dec := decBuf[:0]
	if len(run)/2 > len(decBuf) {
		dec = make([]byte, len(run)/2)
	} else {
		dec = decBuf[:len(run)/2]
	}
	for k := 0; k < 2; k++ {
		n := (len(run) - k) / 2
		if _, err := hex.Decode(dec[:n], []byte(run[k:k+2*n])); err != nil {
			continue
		}
		var whole bool
		if pieces, whole = printable(dec[:n], pieces); whole {
			return pieces, true
		}
	}
	return pieces, false
}

// printable appends to pieces what of dec is text: all of it, when it is all printable (text,
// tabs and line breaks, and UTF-8 characters other than control ones) and MinDecoded bytes
// or longer, and reports true; else its runs of printable ASCII of minPiece bytes or longer,
// however much binary lies around them (text behind a few bytes of another encoding, read
// past the start of its run, or a value hidden between binary bytes, which a reader decoding
// the run reads as well). Binary data (an image, or a text read at the wrong alignment)
// rarely holds such a run, and one alone matches no detector. A character cut at the start or
// the end of dec (a run read from, or up to, a line break that falls inside a character's
// encoding: a part of a longer run) is left out, the rest read whole.
func printable(dec []byte, pieces []string) ([]string, bool) {
	if text := uncut(dec); len(text) >= MinDecoded && allPrintable(text) {
		return append(pieces, string(text)), true
	}
	return textPieces(dec, pieces), false
}

// uncut returns dec without the continuation bytes it starts with (up to three: the end of a
// character cut before dec) and without a character it ends with that lacks its last bytes.
func uncut(dec []byte) []byte {
	i := 0
	for i < utf8.UTFMax-1 && i < len(dec) && dec[i]&0xc0 == 0x80 {
		i++
	}
	dec = dec[i:]
	for k := 1; k < utf8.UTFMax && k <= len(dec); k++ {
		c := dec[len(dec)-k]
		if c < utf8.RuneSelf {
			break
		}
		if c&0xc0 == 0xc0 { // the first byte of a character
			if need := 2 + b2i(c >= 0xe0) + b2i(c >= 0xf0); need > k {
				dec = dec[:len(dec)-k]
			}
			break
		}
	}
	return dec
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// textPieces appends to pieces the runs of printable ASCII of dec of minPiece bytes or longer.
func textPieces(dec []byte, pieces []string) []string {
	from := 0
	for i, c := range dec {
		if asciiText[c] {
			continue
		}
		if i-from >= minPiece {
			pieces = append(pieces, string(dec[from:i]))
		}
		from = i + 1
	}
	if len(dec)-from >= minPiece {
		pieces = append(pieces, string(dec[from:]))
	}
	return pieces
}

// asciiText marks printable ASCII, tabs and line breaks.
var asciiText = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\t'], t['\n'], t['\r'] = true, true, true
	return t
}()

// minPiece is the shortest printable piece read from a decoding that is not all text: as
// short as a decoding read whole (MinDecoded), so that a value between binary bytes is read
// as it would be alone (an SSN is 11 characters, a phone number 8).
const minPiece = MinDecoded

func allPrintable(dec []byte) bool {
	for i := 0; i < len(dec); {
		if asciiText[dec[i]] {
			i++
			continue
		}
		r, size := utf8.DecodeRune(dec[i:])
		if r < 0xa0 || r == utf8.RuneError {
			return false
		}
		i += size
	}
	return true
}

// isBase32 reports whether c is of RFC 4648's base32 alphabet: upper-case letters and 2 to 7.
func isBase32(c byte) bool { return (c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7') }

func isHexRun(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}
