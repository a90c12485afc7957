package predicate

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
)

// Rule ids of the issues Check reports (docs/rules.md).
const (
	RuleSyntax  = "cel/syntax"
	RuleType    = "cel/type"
	RuleNotBool = "cel/not-bool"
	RuleCost    = "cel/cost"
	// RuleUntypedArgs is the warning a caller reports when Checked.ReadsUntypedArgs is set.
	RuleUntypedArgs = "cel/untyped-args"
)

// Issue is one problem found in a predicate. Line and Col are 1-based; Col counts bytes from
// the start of the line, like go/token and CUE positions. Offset is the byte offset into the
// source, so a caller that embeds the predicate in another file can map it back.
type Issue struct {
	Rule    string
	Line    int
	Col     int
	Offset  int
	Message string
}

// String formats the issue as "line:col: rule: message".
func (i Issue) String() string {
	return fmt.Sprintf("%d:%d: %s: %s", i.Line, i.Col, i.Rule, i.Message)
}

// positions converts cel-go locations (line plus code-point column, or absolute code-point
// offsets) into byte positions of one source.
type positions struct {
	src        string
	lineStarts []int // byte offset of each line start
	ascii      bool
}

func newPositions(src string) *positions {
	p := &positions{src: src, lineStarts: []int{0}, ascii: true}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			p.lineStarts = append(p.lineStarts, i+1)
		}
		if src[i] >= utf8.RuneSelf {
			p.ascii = false
		}
	}
	return p
}

// runeToByte converts a code-point offset from start into a byte offset.
func (p *positions) runeToByte(start, runes int) int {
	if p.ascii {
		return min(start+runes, len(p.src))
	}
	off := start
	for n := 0; n < runes && off < len(p.src); n++ {
		_, size := utf8.DecodeRuneInString(p.src[off:])
		off += size
	}
	return off
}

// fromLocation converts a cel-go location (1-based line, 0-based code-point column).
func (p *positions) fromLocation(loc common.Location) int {
	if loc == nil || loc.Line() < 1 || loc.Line() > len(p.lineStarts) {
		return 0
	}
	return p.runeToByte(p.lineStarts[loc.Line()-1], max(loc.Column(), 0))
}

// fromRuneOffset converts an absolute code-point offset.
func (p *positions) fromRuneOffset(off int) int {
	return p.runeToByte(0, max(off, 0))
}

// issue builds an Issue at a byte offset.
func (p *positions) issue(rule string, offset int, msg string) Issue {
	offset = max(0, min(offset, len(p.src)))
	line := 1
	for i := 1; i < len(p.lineStarts) && p.lineStarts[i] <= offset; i++ {
		line = i + 1
	}
	return Issue{Rule: rule, Line: line, Col: offset - p.lineStarts[line-1] + 1, Offset: offset, Message: msg}
}

// celIssues converts cel-go issues, dropping duplicates.
func (p *positions) celIssues(rule string, iss *cel.Issues) []Issue {
	var out []Issue
	seen := map[string]bool{}
	for _, e := range iss.Errors() {
		msg := cleanMessage(e.Message)
		if strings.Contains(msg, "recursion") {
			msg = fmt.Sprintf("expression nests too deeply (more than %d levels)", MaxNestingDepth)
		}
		key := fmt.Sprintf("%d:%d:%s", e.Location.Line(), e.Location.Column(), msg)
		if seen[key] {
			continue
		}
		seen[key] = true
		off := p.fromLocation(e.Location)
		// cel-go places field errors on the dot; the caret belongs under the field name.
		if off < len(p.src) && p.src[off] == '.' {
			off = skipSelector(p.src, off)
		}
		out = append(out, p.issue(rule, off, msg))
	}
	return out
}

// skipSelector advances from a '.' (or '.?') past blanks to the field name.
func skipSelector(src string, off int) int {
	for off < len(src) && strings.IndexByte(".? \t\r\n", src[off]) >= 0 {
		off++
	}
	return off
}

// cleanMessage turns a cel-go message into an agentc one: the core message only, lower-case,
// without the "ERROR: <input>:1:5:" prefix, source snippets or empty container notes.
func cleanMessage(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	if strings.HasPrefix(msg, "ERROR: ") {
		// ERROR: <input>:1:5: message
		rest := msg[len("ERROR: "):]
		if i := strings.Index(rest, ": "); i >= 0 {
			msg = rest[i+2:]
		}
	}
	msg = strings.ReplaceAll(msg, " (in container '')", "")
	// ANTLR lists every token it would accept; name the one it found instead.
	if i := strings.Index(msg, " expecting {"); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.Replace(msg, "mismatched input '<EOF>'", "unexpected end of expression", 1)
	msg = strings.Replace(msg, "mismatched input ", "unexpected ", 1)
	msg = strings.ReplaceAll(msg, "<input>", "expression")
	if r, size := utf8.DecodeRuneInString(msg); size > 0 && unicode.IsUpper(r) {
		next, _ := utf8.DecodeRuneInString(msg[size:])
		if !unicode.IsUpper(next) { // keep acronyms
			msg = string(unicode.ToLower(r)) + msg[size:]
		}
	}
	return msg
}
