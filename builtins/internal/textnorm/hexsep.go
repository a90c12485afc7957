package textnorm

import (
	"slices"
	"strings"
)

// A prefix may stand before each byte of hex written with separators: "\x41\x4b" (a C or
// Python string), "0x41, 0x4b" (an array of bytes), "\X" and "0X" too.

// hexSeps are the separators read between the bytes of hex: "41 4b" (a hex dump), "41:4b"
// (a fingerprint), "41-4b", "41,4b", "0x41, 0x4b".
var hexSeps = []string{", ", " ", ":", "-", ","}

// hexSep marks the bytes a separator of hexSeps starts with.
var hexSep = func() (t [256]bool) {
	for _, s := range hexSeps {
		t[s[0]] = true
	}
	return t
}()

// separatedHex returns out with the runs of text written as hex bytes with separators or
// prefixes ("73 6b 2d", "73:6b:2d", "\x73\x6b\x2d", "0x73,0x6b") added, those whose decoding
// holds printable text (MinDecoded bytes or more), in order. A run is one separator and one
// prefix throughout, or none of either.
func separatedHex(text string, out []Encoded) []Encoded {
	added := false
	for i := 0; i+2*MinDecoded <= len(text); i++ {
		c, next := text[i], text[i+1]|0x20
		prefix := ""
		switch {
		case (c == '\\' || c == '0') && next == 'x':
			prefix = text[i : i+2]
		case c == '\\' || !isHex(c) || !isHex(next) || isHex(text[i+2]) || !hexSep[text[i+2]]:
			continue // neither a prefix nor a byte followed by a separator
		case i > 0 && isHexWordByte(text[i-1]):
			continue // inside a word or a run of hex
		}
		end, n, sep := hexUnits(text, i, prefix)
		if n < MinDecoded {
			continue
		}
		if sep == "" && prefix == "" {
			i = end - 1 // a contiguous run: Encodings reads it
			continue
		}
		dec := make([]byte, 0, n)
		for k := i; k < end; {
			if prefix != "" && strings.HasPrefix(text[k:], prefix) {
				k += len(prefix)
			}
			if k+1 < end && isHex(text[k]) && isHex(text[k+1]) {
				dec = append(dec, unhex(text[k])<<4|unhex(text[k+1]))
				k += 2
				continue
			}
			k++ // a separator, a line break or an indent
		}
		if pieces, _ := printable(dec, nil); len(pieces) > 0 {
			out = append(out, Encoded{Start: i, End: end, Text: strings.Join(pieces, "\n"), Kind: "hex"})
			added = true
		}
		i = end - 1
	}
	if added {
		sortEncoded(out)
	}
	return out
}

// sortEncoded sorts runs by their start, keeping the order of those that start together.
func sortEncoded(out []Encoded) {
	slices.SortStableFunc(out, func(a, b Encoded) int { return a.Start - b.Start })
}

// hexUnits reads the bytes of hex from i in text, each prefix and two hex digits, separated
// by one of hexSeps (the same throughout) or by nothing, and over line breaks, and returns the
// end of the last, their number and the separator.
func hexUnits(text string, i int, prefix string) (end, n int, sep string) {
	unit := func(k int) bool {
		if k > len(text) || !strings.HasPrefix(text[k:], prefix) {
			return false
		}
		k += len(prefix)
		return k+2 <= len(text) && isHex(text[k]) && isHex(text[k+1]) && (k+2 == len(text) || !isHex(text[k+2]))
	}
	if !unit(i) {
		return i, 0, ""
	}
	end, n = i+len(prefix)+2, 1
	for _, s := range hexSeps {
		if strings.HasPrefix(text[end:], s) && unit(end+len(s)) {
			sep = s
			break
		}
	}
	if sep == "" && (prefix == "" || !unit(end)) {
		return end, n, ""
	}
	for {
		for unit(end + len(sep)) {
			end += len(sep) + len(prefix) + 2
			n++
		}
		// The bytes may go on over a line break, as a dump or an array wraps them ("41 4b\n42",
		// "0x41,\n    0x4b"): the separator, or its part before a space, may end the line, and
		// spaces indent the next.
		k := end
		if cut := strings.TrimRight(sep, " "); cut != "" && strings.HasPrefix(text[k:], cut) {
			k += len(cut)
		}
		k = skipBlanks(text, k)
		br := lineBreak(text, k)
		if br == 0 {
			return end, n, sep
		}
		k = skipBlanks(text, k+br)
		if !unit(k) {
			return end, n, sep
		}
		end = k + len(prefix) + 2
		n++
	}
}

// skipBlanks returns the offset of the first byte of text from k that is no space or tab.
func skipBlanks(text string, k int) int {
	for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
		k++
	}
	return k
}

// isHexWordByte reports whether c, before a run, makes it part of a word: a letter or digit.
func isHexWordByte(c byte) bool {
	return (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z') || c == '_'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return c | 0x20 - 'a' + 10
	}
	return 0
}
