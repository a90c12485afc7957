package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"

	"github.com/agentc-dev/agentc/dsl"
)

// maxExcerptFile bounds the size of a policy file read again to show an
// excerpt; a larger one is shown without.
const maxExcerptFile = 8 << 20

// maxExcerptWidth is the widest source line an excerpt shows; a longer one
// is cut around the column, with "…" where it was cut.
const maxExcerptWidth = 120

// isTerminal reports whether w is a character device, as a terminal is.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&fs.ModeCharDevice != 0
}

// sources reads the policy files diagnostics point into, once each.
type sources struct {
	wd    string
	files map[string][]byte
}

// excerpt returns the source line at p and a line with a caret under its
// column, each indented by a tab, or "" when the file cannot be read or p
// names no line of it. Control characters in the line are shown as '?', so
// that a policy file cannot send escape sequences to the terminal.
func (s *sources) excerpt(p dsl.Pos) string {
	if !p.IsValid() {
		return ""
	}
	src, ok := s.files[p.File]
	if !ok {
		name := p.File
		if !filepath.IsAbs(name) {
			name = filepath.Join(s.wd, name)
		}
		if st, err := os.Stat(name); err == nil && st.Mode().IsRegular() && st.Size() <= maxExcerptFile {
			src, _ = os.ReadFile(name)
			// The loader skips a leading byte order mark (dsl.ReadFile):
			// positions count from the text after it.
			src = bytes.TrimPrefix(src, []byte("\uFEFF"))
		}
		if s.files == nil {
			s.files = map[string][]byte{}
		}
		s.files[p.File] = src
	}
	line, ok := lineAt(src, p.Line)
	if !ok {
		return ""
	}
	col := min(max(p.Col, 1)-1, len(line))
	return sourceExcerpt(line, col)
}

// lineAt returns the n-th (1-based) line of src without its line ending.
func lineAt(src []byte, n int) (string, bool) {
	if len(src) == 0 {
		return "", false
	}
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src, '\n')
		if j < 0 {
			return "", false
		}
		src = src[j+1:]
	}
	if len(src) == 0 && n > 1 {
		return "", false
	}
	if j := bytes.IndexByte(src, '\n'); j >= 0 {
		src = src[:j]
	}
	return strings.TrimSuffix(string(src), "\r"), true
}

// sourceExcerpt renders line, with a caret under the character at byte
// offset col: "\t<line>\n\t<spaces>^". Tabs before the column are kept in
// the caret line so that it lines up whatever the terminal's tab width.
func sourceExcerpt(line string, col int) string {
	type cell struct {
		text  string
		width int
	}
	var cells []cell
	caret := -1
	for off := 0; off < len(line); {
		r, size := utf8.DecodeRuneInString(line[off:])
		if off <= col && col < off+size {
			caret = len(cells)
		}
		switch {
		case r == '\t':
			cells = append(cells, cell{"\t", 0})
		case r == utf8.RuneError && size == 1, unicode.IsControl(r), !unicode.IsPrint(r) && r != ' ':
			cells = append(cells, cell{"?", 1})
		default:
			w := 1
			if isWide(r) {
				w = 2
			}
			cells = append(cells, cell{string(r), w})
		}
		off += size
	}
	if caret < 0 {
		caret = len(cells) // past the end: the caret goes after the last character
	}
	// Cut a long line to a window around the caret.
	lo, hi := 0, len(cells)
	width := func(a, b int) int {
		n := 0
		for _, c := range cells[a:b] {
			n += max(c.width, 1)
		}
		return n
	}
	if width(0, len(cells)) > maxExcerptWidth {
		lo = caret
		for lo > 0 && width(lo-1, caret) < maxExcerptWidth/2 {
			lo--
		}
		hi = caret
		for hi < len(cells) && width(lo, hi+1) < maxExcerptWidth {
			hi++
		}
	}
	var text, under strings.Builder
	text.WriteByte('\t')
	under.WriteByte('\t')
	if lo > 0 {
		text.WriteString("…")
		under.WriteByte(' ')
	}
	for i := lo; i < hi; i++ {
		text.WriteString(cells[i].text)
		if i < caret {
			if cells[i].text == "\t" {
				under.WriteByte('\t')
			} else {
				under.WriteString(strings.Repeat(" ", cells[i].width))
			}
		}
	}
	if hi < len(cells) {
		text.WriteString("…")
	}
	under.WriteByte('^')
	return strings.TrimRight(text.String(), " ") + "\n" + under.String()
}

// isWide reports whether r takes two columns on a terminal: the East Asian
// wide and full-width characters (Unicode's East Asian Width).
func isWide(r rune) bool {
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return true
	}
	return false
}
