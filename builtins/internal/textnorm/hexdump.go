package textnorm

import (
	"strconv"
	"strings"
)

// A hex dump (xxd, hexdump -C, od -A x -t x1z, hexdump and od -x) writes a file's bytes over
// lines, each an offset, the bytes in groups of hex digits and, often, the bytes again as
// characters:
//
//	00000000: 6361 7264 2034 3131 3131 3131 3131 3131  card 41111111111
//	00000010: 3131 3131 3120 6578 7020 3132 2f32 390a  11111 exp 12/29.
//
// A value the file holds is cut across its lines, in both columns. hexDumps reads the bytes of
// consecutive lines as one run, and the span of the run covers the lines whole, the column of
// characters with them.

// maxDumpGap is the widest gap between two groups of bytes of a line: the column of
// characters starts after a wider one (hexdump -C puts two spaces in the middle of its line).
const maxDumpGap = 2

// maxDumpLine bounds the bytes of a line whose width is not known from the next line's offset.
const maxDumpLine = 32

// dumpLine is a line of a hex dump: its offset, where its groups of bytes start and end in the
// text, the width of a group (in hex digits) and the bytes it holds, which the next line's
// offset tells (0 while unknown).
type dumpLine struct {
	start, end   int // the line, without its line break
	offset       string
	groups, gEnd int
	width        int
	bytes        int
}

// hexDumps returns out with the runs of lines of text written as a hex dump added, those whose
// bytes read together (MinDecoded or more) decode to text, in order.
func hexDumps(text string, out []Encoded) []Encoded {
	added := false
	var run []dumpLine
	squeezed := false
	flush := func() {
		if e, ok := readDump(text, run); ok {
			out = append(out, e)
			added = true
		}
		run, squeezed = run[:0], false
	}
	for i := 0; i < len(text); {
		from := i
		end := strings.IndexByte(text[i:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += i
		}
		line := strings.TrimSuffix(text[from:end], "\r")
		i = end + 1
		l, ok := parseDumpLine(line, from)
		if !ok {
			if line == "*" && len(run) > 0 {
				squeezed = true // hexdump and od write a line repeated once, then a "*"
				continue
			}
			flush()
			continue
		}
		if n := len(run); n > 0 {
			prev := &run[n-1]
			step := -1
			if prev.width != 0 && (l.width == 0 || l.width == prev.width) {
				step = lineBytes(prev.offset, l.offset, len(dumpBytes(text, *prev)), squeezed)
			}
			if step > 0 {
				prev.bytes, squeezed = step, false
			} else {
				flush()
			}
		}
		run = append(run, l)
	}
	flush()
	if added {
		sortEncoded(out)
	}
	return out
}

// parseDumpLine reads line (at offset at in the text) as a line of a hex dump: an offset of
// four hex digits or more (a ":" after it or not), then two groups or more of 2, 4, 8 or 16
// hex digits, all of one width but the last, which may be shorter, separated by one or two
// spaces. A line holding only an offset (the length of the dump, on its last line) is one too.
func parseDumpLine(line string, at int) (dumpLine, bool) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	o := i
	for i < len(line) && isHex(line[i]) {
		i++
	}
	l := dumpLine{start: at + o, end: at + len(line), offset: line[o:i], bytes: maxDumpLine}
	if i-o < 4 || i-o > 16 {
		return l, false
	}
	if i < len(line) && line[i] == ':' {
		i++
	}
	l.groups, l.gEnd = at+i, at+i
	if strings.TrimLeft(line[i:], " ") == "" {
		return l, true
	}
	n := 0
	for i < len(line) {
		gap := 0
		for i+gap < len(line) && line[i+gap] == ' ' {
			gap++
		}
		if gap == 0 || gap > maxDumpGap {
			break
		}
		k := i + gap
		for k < len(line) && isHex(line[k]) {
			k++
		}
		w := k - i - gap
		if w == 0 || w%2 != 0 || (k < len(line) && line[k] != ' ') {
			break
		}
		if l.width == 0 {
			if w > 16 || w&(w-1) != 0 {
				return l, false
			}
			l.width = w
		} else if w > l.width {
			break
		}
		n++
		i = k
		l.gEnd = at + i
		if w < l.width {
			break // a short group ends the bytes of the dump
		}
	}
	return l, n >= 2
}

// readDump decodes the bytes of run, the lines of one dump, each cut to the bytes its next
// line's offset tells, and returns the run as an Encoded when they decode to text.
func readDump(text string, run []dumpLine) (Encoded, bool) {
	if len(run) == 0 {
		return Encoded{}, false
	}
	var dec []byte
	for k, l := range run {
		b := dumpBytes(text, l)
		if k > 0 && k == len(run)-1 {
			l.bytes = run[0].bytes // the last line is no wider than the first
		}
		dec = append(dec, b[:min(len(b), l.bytes)]...)
	}
	if len(dec) < MinDecoded {
		return Encoded{}, false
	}
	// A file's bytes are often text among binary (a header, padding): its runs of text are
	// read, as strings(1) reads them.
	pieces, _ := printable(dec, nil)
	if run[0].width == 4 {
		// hexdump and od -x write each pair of bytes as a little-endian word, xxd as two
		// bytes in order: both are read
		for i := 0; i+1 < len(dec); i += 2 {
			dec[i], dec[i+1] = dec[i+1], dec[i]
		}
		pieces, _ = printable(dec, pieces)
	}
	if len(pieces) == 0 {
		return Encoded{}, false
	}
	return Encoded{Start: run[0].start, End: run[len(run)-1].end, Text: strings.Join(pieces, "\n"), Kind: "hex"}, true
}

// dumpBytes decodes the groups of l.
func dumpBytes(text string, l dumpLine) []byte {
	var out []byte
	s := text[l.groups:l.gEnd]
	for i := 0; i+1 < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		out = append(out, unhex(s[i])<<4|unhex(s[i+1]))
		i += 2
	}
	return out
}

// lineBytes returns how many bytes a line of a dump holds (have of them read, more when its
// column of characters looks like hex) from its offset and the next line's, read in hex,
// octal (od) or decimal: their distance, when it is at most have; after a "*" (squeezed, the
// line repeated up to the next offset), have when the distance is a multiple of it. It
// returns -1 when no reading fits.
func lineBytes(offset, next string, have int, squeezed bool) int {
	for _, base := range []int{16, 8, 10} {
		x, err1 := strconv.ParseUint(offset, base, 64)
		y, err2 := strconv.ParseUint(next, base, 64)
		if err1 != nil || err2 != nil || y <= x || have == 0 {
			continue
		}
		if d := y - x; squeezed && d%uint64(have) == 0 {
			return have
		} else if !squeezed && d <= uint64(have) {
			return int(d)
		}
	}
	return -1
}

// DumpRunStart returns, for a text that ends in a line break, where the run of lines of a hex
// dump that ends the text starts, when its last line holds bytes (the dump may go on with the
// lines still to come), or -1. A stream released line by line holds the text from there, so
// that the dump is read whole once it ends (hexDumps).
func DumpRunStart(text string) int { return dumpRunStart(text, Walk{}) }

func dumpRunStart(text string, known Walk) int {
	end := len(text) - 1
	if end < 0 || text[end] != '\n' {
		return -1
	}
	from := -1
	for end >= 0 {
		if known.reached(end) {
			return known.after(from)
		}
		start := strings.LastIndexByte(text[:end], '\n') + 1
		l, ok := parseDumpLine(strings.TrimSuffix(text[start:end], "\r"), start)
		if !ok || l.groups == l.gEnd {
			return from
		}
		from = start
		end = start - 1
	}
	return from
}
