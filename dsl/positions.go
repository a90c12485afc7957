package dsl

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"

	"github.com/agentc-dev/agentc/internal/fieldpath"
)

// positions maps a path such as "chains.chat.0.use" to where the user wrote
// it. CUE places list elements at their list; the syntax tree does not.
type positions struct {
	label map[string]Pos // the field's label
	value map[string]Pos // the field's value, or the list element
	node  map[string]ast.Expr
	// spans holds every place the path is written (CUE joins a field
	// written twice), from the label, or a list element's start, to the
	// end of the value. Only a policy with errors needs them: they are
	// indexed from files on first use.
	spans     map[string][]span
	files     []*ast.File
	spansOnce sync.Once
}

// span is a stretch of one file.
type span struct {
	start, end Pos
	value      Pos // where the value starts
	elems      int // the elements of a list written there; -1 for another value
}

// listsOf returns the places path is written as a list.
func (ps *positions) listsOf(path []string) []span {
	keys := make([]string, len(path))
	for i, name := range path {
		keys[i] = labelKey(name)
	}
	var out []span
	for _, s := range ps.spansOf(strings.Join(keys, ".")) {
		if s.elems >= 0 && s.value.IsValid() {
			out = append(out, s)
		}
	}
	return out
}

// elems returns the elements of x when it is a list, else -1.
func elems(x ast.Expr) int {
	if l, ok := x.(*ast.ListLit); ok {
		return len(l.Elts)
	}
	return -1
}

// holds reports whether p falls within one of the places path is written.
func (ps *positions) holds(path string, p Pos) bool {
	before := func(a, b Pos) bool { return a.Line < b.Line || (a.Line == b.Line && a.Col <= b.Col) }
	for _, s := range ps.spansOf(path) {
		if s.start.IsValid() && s.end.IsValid() && p.File == s.start.File && before(s.start, p) && before(p, s.end) {
			return true
		}
	}
	return false
}

func indexPositions(files []*ast.File) *positions {
	ps := &positions{label: map[string]Pos{}, value: map[string]Pos{}, node: map[string]ast.Expr{}, files: files}
	for _, f := range files {
		ps.decls("", f.Decls)
	}
	return ps
}

// spansOf returns the places path is written.
func (ps *positions) spansOf(path string) []span {
	ps.spansOnce.Do(func() {
		all := &positions{label: map[string]Pos{}, value: map[string]Pos{}, node: map[string]ast.Expr{}, spans: map[string][]span{}}
		for _, f := range ps.files {
			all.decls("", f.Decls)
		}
		ps.spans = all.spans
	})
	return ps.spans[path]
}

func (ps *positions) decls(prefix string, decls []ast.Decl) {
	for _, d := range decls {
		f, ok := d.(*ast.Field)
		if !ok {
			if em, ok := d.(*ast.EmbedDecl); ok {
				ps.expr(prefix, em.Expr)
			}
			continue
		}
		name := labelName(f.Label)
		if name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if ps.spans != nil && f.Value != nil {
			ps.spans[path] = append(ps.spans[path], span{cuePos(f.Label.Pos(), Pos{}), cuePos(f.Value.End(), Pos{}), cuePos(f.Value.Pos(), Pos{}), elems(f.Value)})
		}
		if _, seen := ps.label[path]; !seen {
			ps.label[path] = cuePos(f.Label.Pos(), Pos{})
			if f.Value != nil {
				ps.value[path] = cuePos(f.Value.Pos(), Pos{})
				ps.node[path] = f.Value
			}
		}
		ps.expr(path, f.Value)
	}
}

func (ps *positions) expr(path string, x ast.Expr) {
	switch x := x.(type) {
	case *ast.StructLit:
		ps.decls(path, x.Elts)
	case *ast.ListLit:
		for i, el := range x.Elts {
			p := path + "." + strconv.Itoa(i)
			if ps.spans != nil {
				ps.spans[p] = append(ps.spans[p], span{cuePos(el.Pos(), Pos{}), cuePos(el.End(), Pos{}), cuePos(el.Pos(), Pos{}), elems(el)})
			}
			if _, seen := ps.value[p]; !seen {
				ps.value[p] = cuePos(el.Pos(), Pos{})
				ps.label[p] = ps.value[p]
				ps.node[p] = el
			}
			ps.expr(p, el)
		}
	case *ast.BinaryExpr:
		// a & b: both sides may carry fields.
		ps.expr(path, x.X)
		ps.expr(path, x.Y)
	case *ast.ParenExpr:
		ps.expr(path, x.X)
	}
}

func labelName(l ast.Label) string {
	switch l := l.(type) {
	case *ast.Ident:
		return l.Name
	case *ast.BasicLit:
		s, err := literal.Unquote(l.Value)
		if err != nil {
			return ""
		}
		return labelKey(s)
	}
	return ""
}

// labelKey is the key of a label in a path of positions: a name holding
// a dot is quoted, so that the dot is not read as a step of the path. A
// selector quoted already (as a CUE error's path gives "gpt-4.1") is kept.
func labelKey(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	if u, err := strconv.Unquote(s); err == nil && strings.Contains(u, ".") && s[0] == '"' {
		return s
	}
	return strconv.Quote(s)
}

// lookup returns the position recorded for path, or of its closest
// ancestor. label selects the field's label rather than its value.
func (ps *positions) lookup(path []string, label bool) (Pos, bool) {
	keys := make([]string, len(path))
	for i, name := range path {
		keys[i] = labelKey(name) // a model named "gpt-4.1", a test case "v1.2 ok"
	}
	for n := len(keys); n > 0; n-- {
		key := strings.Join(keys[:n], ".")
		m := ps.value
		if label && n == len(path) {
			m = ps.label
		}
		if p, ok := m[key]; ok && p.IsValid() {
			return p, true
		}
	}
	return Pos{}, false
}

// SourceIndex tells where a CUE or JSON file writes each of its paths, for
// messages about data read from it (a test file's cases).
type SourceIndex struct {
	file string
	ps   *positions
}

// IndexSource indexes the paths src writes; it returns nil when src does
// not parse.
func IndexSource(file string, src []byte) *SourceIndex {
	f, err := parser.ParseFile(file, src)
	if err != nil {
		return nil
	}
	return &SourceIndex{file: file, ps: indexPositions([]*ast.File{f})}
}

// Pos returns where the file writes path ("tests", "a", "want", "steps",
// "0"): the label of a field, the start of a list element. A path the file
// does not write as such (a value built by a reference) is placed at the
// value of the deepest of its ancestors that it writes; ok is false when
// none is.
func (s *SourceIndex) Pos(path ...string) (p Pos, ok bool) {
	if s == nil {
		return Pos{}, false
	}
	return s.ps.lookup(path, true)
}

// At returns where the file writes path, a path such as
// "steps[1].tool.name" or models."gpt-4.1"[0] (fieldpath) under the keys
// of prefix, as Pos does; ok is false for a path that does not read.
func (s *SourceIndex) At(prefix []string, path string) (Pos, bool) {
	steps, ok := fieldpath.Split(path)
	if !ok {
		return Pos{}, false
	}
	parts := slices.Clone(prefix)
	for _, st := range steps {
		parts = append(parts, st.String())
	}
	return s.Pos(parts...)
}
