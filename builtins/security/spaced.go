package security

import (
	"unicode"
	"unicode/utf8"
)

// minSpacedRun is the least count of single letters in a row that collapseSpaced reads as
// one letter-spaced text ("i g n o r e"): shorter runs are initials, list markers and
// variables ("a b c").
const minSpacedRun = 6

// spacedSep reports whether r may stand between the letters of a letter-spaced text: a
// space, a tab or a dot (the invisible characters are dropped before: textnorm.Visible).
func spacedSep(r rune) bool { return r == ' ' || r == '\t' || r == '.' || r == '\u00a0' }

// collapseSpaced reads letter-spaced text as the words it spells: each run of at least
// minSpacedRun single letters separated by spaces, tabs or dots ("i g n o r e   a l l",
// "i.g.n.o.r.e") has the separators between its letters dropped, and a gap other than the
// one most of the run's gaps are (the three spaces between "e" and "a", the space after
// "i.g.n.o.r.e") read as one space, so that the words stay apart. A run spaced evenly throughout reads as one word. offsets maps each
// byte of the result, and its end, to the text's. changed is false when no run was found.
func collapseSpaced(text string) (out string, offsets []int, changed bool) {
	type letter struct{ start, end int }
	var buf []byte
	flush := func(from int, run []letter) {
		// copy text[from:run[0].start] as is, then the run collapsed
		for i := from; i < run[0].start; i++ {
			buf = append(buf, text[i])
			offsets = append(offsets, i)
		}
		// the gap between letters is the one most of the run's gaps are; another is a
		// word break
		counts := map[string]int{}
		letterGap := ""
		for k := 1; k < len(run); k++ {
			g := text[run[k-1].end:run[k].start]
			counts[g]++
			if counts[g] > counts[letterGap] {
				letterGap = g
			}
		}
		for k, l := range run {
			if k > 0 && text[run[k-1].end:run[k].start] != letterGap {
				buf = append(buf, ' ')
				offsets = append(offsets, run[k-1].end)
			}
			for i := l.start; i < l.end; i++ {
				buf = append(buf, text[i])
				offsets = append(offsets, i)
			}
		}
	}
	copied := 0
	var run []letter
	end := func() {
		if len(run) >= minSpacedRun {
			flush(copied, run)
			copied = run[len(run)-1].end
			changed = true
		}
		run = run[:0]
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(r) {
			if !spacedSep(r) {
				end()
			}
			i += n
			continue
		}
		// a single letter: no letter or digit on either side
		j := i + n
		next, _ := utf8.DecodeRuneInString(text[j:])
		prev, _ := utf8.DecodeLastRuneInString(text[:i])
		single := (j == len(text) || !(unicode.IsLetter(next) || unicode.IsDigit(next))) &&
			(i == 0 || !(unicode.IsLetter(prev) || unicode.IsDigit(prev)))
		if !single {
			end()
			i = j
			continue
		}
		if len(run) > 0 && !gapIsSpacing(text[run[len(run)-1].end:i]) {
			end()
		}
		run = append(run, letter{i, j})
		i = j
	}
	end()
	if !changed {
		return text, nil, false
	}
	for i := copied; i < len(text); i++ {
		buf = append(buf, text[i])
		offsets = append(offsets, i)
	}
	offsets = append(offsets, len(text))
	return string(buf), offsets, true
}

// gapIsSpacing reports whether the text between two letters of a run is separators only.
func gapIsSpacing(gap string) bool {
	if gap == "" {
		return false
	}
	for _, r := range gap {
		if !spacedSep(r) {
			return false
		}
	}
	return true
}
