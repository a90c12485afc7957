package textnorm

import "strings"

// Walk remembers where a walk back over the lines of a text (WrappedRunStart, DumpRunStart,
// HexRunStart) ended, so that the walk of the same text with lines appended stops at the end
// of the text walked before and takes its result: a stream that holds a run of lines until it
// ends walks each line once, not once for each line added after it. The zero Walk knows
// nothing.
type Walk struct {
	end  int // the length of the text walked; 0 for none
	from int // what the walk returned
}

// reached reports whether a walk back is at the line break that ended the text w walked.
func (w Walk) reached(lineBreak int) bool { return w.end > 0 && lineBreak == w.end-1 }

// after returns the result of a walk that reached the end of the text w walked, from being
// where the run starts in the lines after it (-1 for none): the run goes on from the lines
// walked before when their walk found one.
func (w Walk) after(from int) int {
	if w.from >= 0 {
		return w.from
	}
	return from
}

// known returns w when the text it walked is the first same bytes of the text walked now,
// else the zero Walk.
func (w *Walk) known(same int) Walk {
	if w.end > 0 && w.end <= same {
		return *w
	}
	return Walk{}
}

// WrappedRunStart is WrappedRunStart of text, whose first same bytes are those of the texts w
// walked before (a stream's held text, appended to since).
func (w *Walk) WrappedRunStart(text string, same int) int {
	from := wrappedRunStart(text, w.known(same))
	*w = Walk{len(text), from}
	return from
}

// DumpRunStart is DumpRunStart of text, whose first same bytes are those of the texts w
// walked before.
func (w *Walk) DumpRunStart(text string, same int) int {
	from := dumpRunStart(text, w.known(same))
	*w = Walk{len(text), from}
	return from
}

// HexRunStart is HexRunStart of text, whose first same bytes are those of the texts w walked
// before.
func (w *Walk) HexRunStart(text string, same int) int {
	from := hexRunStart(text, w.known(same))
	*w = Walk{len(text), from}
	return from
}

// HexRunStart returns, for a text that ends in a line break, where the run of hex bytes with
// separators or prefixes that ends its last line starts ("41 4b 49", "0x41, 0x4b,", "\x41\x4b"),
// when it may go on over the line break as separatedHex reads it (a byte array wrapped over
// lines, od -An's lines), or -1: the last line ends in bytes of hex with one separator or
// prefix, two or more of them with those of the lines before it that it goes on from. A stream released
// line by line holds the text from there, so that the bytes are read whole once they end.
func HexRunStart(text string) int { return hexRunStart(text, Walk{}) }

func hexRunStart(text string, known Walk) int {
	end := len(text) - 1
	if end < 0 || text[end] != '\n' {
		return -1
	}
	from, units := -1, 0
	run := func() int {
		if units < 2 {
			return -1 // one byte of hex is no run
		}
		return from
	}
	for end >= 0 {
		if known.reached(end) {
			if known.from >= 0 {
				return known.from
			}
			return run()
		}
		start := strings.LastIndexByte(text[:end], '\n') + 1
		at, n := hexLineTail(strings.TrimSuffix(text[start:end], "\r"))
		if n == 0 {
			return run()
		}
		from, units = start+at, units+n
		if strings.TrimLeft(text[start:from], " \t") != "" {
			return run() // the run starts inside its line
		}
		end = start - 1
	}
	return run()
}

// hexLineTail returns where the bytes of hex that end line start (after its blanks, and the
// part of a separator before a space, which a wrapped array's lines end in) and their number:
// bytes separated by one of hexSeps, or each after one prefix ("0x", "\x"), or both; 0 when
// the line ends in no such byte.
func hexLineTail(line string) (at, n int) {
	s := strings.TrimRight(line, " \t")
	if k := len(s) - 1; k >= 0 && (s[k] == ',' || s[k] == ':' || s[k] == '-') {
		s = s[:k]
	}
	// unit returns where the byte of hex ending at e starts (with its prefix), or -1.
	prefix := ""
	unit := func(e int) int {
		if e < 2 || !isHex(s[e-1]) || !isHex(s[e-2]) || (e < len(s) && isHex(s[e])) {
			return -1
		}
		b := e - 2
		if b >= 2 && (s[b-2] == '0' || s[b-2] == '\\') && s[b-1]|0x20 == 'x' {
			if prefix == "" && n == 0 {
				prefix = s[b-2 : b]
			}
			if s[b-2:b] == prefix {
				return b - 2
			}
		}
		if prefix != "" || (b > 0 && isHexWordByte(s[b-1])) {
			return -1
		}
		return b
	}
	at = unit(len(s))
	if at < 0 {
		return 0, 0
	}
	n = 1
	sep := "\x00" // not yet known
	for {
		// the separator before the byte at at, one of hexSeps, the same throughout
		gap := ""
		if prefix != "" && at >= 2 && unit(at) >= 0 {
			gap = "" // prefixed bytes written one after another
		} else {
			for _, c := range hexSeps {
				if strings.HasSuffix(s[:at], c) && unit(at-len(c)) >= 0 {
					gap = c
					break
				}
			}
			if gap == "" {
				break
			}
		}
		if sep != "\x00" && gap != sep {
			break
		}
		sep = gap
		at = unit(at - len(gap))
		n++
	}
	return at, n
}
