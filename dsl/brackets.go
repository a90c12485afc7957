package dsl

import (
	"fmt"
	"strings"
)

// opener is an open bracket of a policy text.
type opener struct {
	c      byte
	pos    Pos
	indent int // the indentation of its line
}

// unclosedBracket finds the first bracket of src that is never closed:
// the innermost open bracket when a closing bracket of another kind, or
// the end of the file, comes first. It returns where the closing bracket
// is most likely missing, judged by indentation (the end of the last line
// before the text returns to the bracket's own indentation), and a
// message naming the bracket. ok is false when the brackets balance.
// Strings and comments are skipped.
func unclosedBracket(name string, src []byte) (at Pos, msg string, ok bool) {
	lines := strings.Split(string(src), "\n")
	var stack []opener
	line, col := 1, 0
	inStr := ""
	for i := 0; i < len(src); i++ {
		c := src[i]
		col++
		if c == '\n' {
			line, col = line+1, 0
			if inStr == `"` || inStr == `'` {
				inStr = "" // a single-line string cannot span lines
			}
			continue
		}
		if inStr != "" {
			if c == '\\' {
				i++
				col++
			} else if strings.HasPrefix(string(src[i:]), inStr) {
				i += len(inStr) - 1
				col += len(inStr) - 1
				inStr = ""
			}
			continue
		}
		switch c {
		case '/':
			if i+1 < len(src) && src[i+1] == '/' {
				for i < len(src) && src[i] != '\n' {
					i++
				}
				i--
			}
		case '"', '\'':
			inStr = string(c)
			if strings.HasPrefix(string(src[i:]), strings.Repeat(string(c), 3)) {
				inStr = strings.Repeat(string(c), 3)
				i += 2
				col += 2
			}
		case '{', '[', '(':
			stack = append(stack, opener{c, Pos{File: name, Line: line, Col: col}, indentOf(lines[line-1])})
		case '}', ']', ')':
			if len(stack) == 0 {
				return Pos{}, "", false // an extra closer: CUE says it well
			}
			top := stack[len(stack)-1]
			if closerOf(top.c) == c {
				stack = stack[:len(stack)-1]
				continue
			}
			return missingAt(name, lines, top, line), missingMsg(top), true
		}
	}
	if len(stack) > 0 {
		top := stack[len(stack)-1]
		return missingAt(name, lines, top, len(lines)+1), missingMsg(top), true
	}
	return Pos{}, "", false
}

func closerOf(c byte) byte {
	switch c {
	case '{':
		return '}'
	case '[':
		return ']'
	}
	return ')'
}

func missingMsg(o opener) string {
	return fmt.Sprintf("missing '%c': the '%c' at line %d, column %d is never closed", closerOf(o.c), o.c, o.pos.Line, o.pos.Col)
}

// missingAt guesses where the closer of o is missing, searching the lines
// after o's up to line (exclusive): before the first line that goes back
// to o's indentation (or less) without starting with the closer, at the
// end of the last non-blank line before it.
func missingAt(name string, lines []string, o opener, line int) Pos {
	last := o.pos.Line
	for n := o.pos.Line + 1; n < line && n <= len(lines); n++ {
		text := strings.TrimSpace(lines[n-1])
		if text == "" || strings.HasPrefix(text, "//") {
			continue
		}
		if indentOf(lines[n-1]) <= o.indent && text[0] != closerOf(o.c) {
			break
		}
		last = n
	}
	end := strings.TrimRight(lines[last-1], " \t\r")
	if i := strings.Index(end, "//"); i >= 0 && last != o.pos.Line {
		end = strings.TrimRight(end[:i], " \t")
	}
	return Pos{File: name, Line: last, Col: len(end) + 1}
}

// indentOf is the width of a line's leading blanks, a tab counting as one
// column more than a space so that mixed indentation still orders.
func indentOf(s string) int {
	n := 0
	for _, c := range s {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 2
		default:
			return n
		}
	}
	return n
}

// syntaxHint completes a CUE parse error caused by another language's habit
// (a regular expression's \d in a "..." string, a # comment) with what CUE
// writes instead; "" when the error is no such slip. at is the error's
// position in src.
func syntaxHint(src []byte, at Pos, msg string) string {
	lines := strings.Split(string(src), "\n")
	if at.Line < 1 || at.Line > len(lines) {
		return ""
	}
	line := lines[at.Line-1]
	switch {
	case msg == "unknown escape sequence" && at.Col >= 2 && at.Col <= len(line) && line[at.Col-2] == '\\':
		esc := line[at.Col-2 : at.Col]
		return fmt.Sprintf(": `%s` is not an escape of a CUE string; a regular expression's backslash is written `\\%s` in a \"...\" string, or as it is in a raw string, #\"%s\"#", esc, esc, esc)
	case strings.TrimSpace(line) == "#" || strings.HasPrefix(strings.TrimSpace(line), "# "):
		return ": a CUE comment starts with //, not #"
	}
	return ""
}
