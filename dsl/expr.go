package dsl

import (
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
)

// Expr is a CEL expression written as a CUE string. It keeps the string
// literal as written so that a position inside the expression maps back to
// the line and column of the .cue file.
type Expr struct {
	// Source is the expression text (the string's value).
	Source string
	// Pos is the position of the string literal's first quote.
	Pos Pos
	// lit is the literal as written, quotes included ("" when unknown).
	lit string
}

// exprOf returns the expression held by a CUE string value.
func exprOf(v cue.Value) *Expr {
	s, err := v.String()
	if err != nil {
		return nil
	}
	e := &Expr{Source: s, Pos: posOf(v)}
	if lit, ok := v.Source().(*ast.BasicLit); ok {
		e.lit = lit.Value
		if p := lit.Pos(); p.IsValid() {
			e.Pos = Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
		}
	} else if f, ok := v.Source().(*ast.Field); ok {
		if lit, ok := f.Value.(*ast.BasicLit); ok {
			e.lit = lit.Value
			p := lit.Pos()
			e.Pos = Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
		}
	}
	return e
}

// PosAt maps a byte offset into Source to its position in the policy file.
// It follows escapes, raw strings (#"..."#) and multi-line strings; when
// the literal is unknown it returns the literal's position.
func (e *Expr) PosAt(offset int) Pos {
	if e == nil {
		return Pos{}
	}
	if e.lit == "" || !e.Pos.IsValid() {
		return e.Pos
	}
	m := mapLiteral(e.lit)
	if m == nil {
		return e.Pos
	}
	if offset < 0 {
		offset = 0
	}
	if offset >= len(m) {
		offset = len(m) - 1
	}
	lc := m[offset]
	p := e.Pos
	if lc.line == 0 {
		p.Col += lc.col
	} else {
		p.Line += lc.line
		p.Col = lc.col + 1
	}
	return p
}

type lineCol struct{ line, col int }

// mapLiteral returns, for each byte of the decoded string plus one past its
// end, the (line offset, column offset) of the source byte it came from,
// relative to the literal's first character. It returns nil when the
// literal cannot be decoded.
func mapLiteral(lit string) []lineCol {
	hashes := 0
	for hashes < len(lit) && lit[hashes] == '#' {
		hashes++
	}
	body := lit[hashes:]
	multi := strings.HasPrefix(body, `"""`) || strings.HasPrefix(body, `'''`)
	quoteLen := 1
	if multi {
		quoteLen = 3
	}
	if len(body) < 2*quoteLen+hashes {
		return nil
	}
	if _, err := literal.Unquote(lit); err != nil {
		return nil
	}
	inner := body[quoteLen : len(body)-quoteLen-hashes]
	start := hashes + quoteLen // offset of inner within lit

	// Position of each byte of lit.
	line, col := 0, 0
	pos := make([]lineCol, len(lit)+1)
	for i := 0; i < len(lit); i++ {
		pos[i] = lineCol{line, col}
		if lit[i] == '\n' {
			line++
			col = 0
		} else {
			col++
		}
	}
	pos[len(lit)] = lineCol{line, col}

	escape := "\\" + strings.Repeat("#", hashes)
	var out []lineCol
	emit := func(src int, n int) {
		for k := 0; k < n; k++ {
			out = append(out, pos[src])
		}
	}
	i := 0
	if multi {
		// Drop the first newline and the indentation of the closing quote
		// from every line.
		if j := strings.IndexByte(inner, '\n'); j >= 0 {
			i = j + 1
		}
		indent := ""
		if k := strings.LastIndexByte(inner, '\n'); k >= 0 {
			indent = inner[k+1:]
			inner = inner[:k]
		}
		atLineStart := true
		for i < len(inner) {
			if atLineStart {
				if strings.HasPrefix(inner[i:], indent) {
					i += len(indent)
				}
				atLineStart = false
				continue
			}
			n := decodeOne(inner[i:], escape)
			emit(start+i, valueLen(inner[i:i+n], escape))
			if inner[i] == '\n' {
				atLineStart = true
			}
			i += n
		}
	} else {
		for i < len(inner) {
			n := decodeOne(inner[i:], escape)
			emit(start+i, valueLen(inner[i:i+n], escape))
			i += n
		}
	}
	out = append(out, pos[start+len(inner)])
	return out
}

// decodeOne returns the length in source bytes of the next character or
// escape sequence of s.
func decodeOne(s, escape string) int {
	if strings.HasPrefix(s, escape) && len(s) > len(escape) {
		rest := s[len(escape):]
		switch rest[0] {
		case 'u':
			return len(escape) + min(5, len(rest))
		case 'U':
			return len(escape) + min(9, len(rest))
		case 'x':
			return len(escape) + min(3, len(rest))
		case '0', '1', '2', '3', '4', '5', '6', '7':
			return len(escape) + min(3, len(rest))
		default:
			return len(escape) + 1
		}
	}
	_, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return 1
	}
	return n
}

// valueLen returns how many bytes the source character or escape src
// decodes to.
func valueLen(src, escape string) int {
	if strings.HasPrefix(src, escape) && len(src) > len(escape) {
		v, err := literal.Unquote(`"` + `\` + src[len(escape):] + `"`)
		if err != nil {
			return 1
		}
		return len(v)
	}
	return len(src)
}
