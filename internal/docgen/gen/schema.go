package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// def is a top-level definition of the schemas package, such as #Retry.
type def struct {
	Name string // "#Retry"
	File string // "schemas/retry.cue"
	Doc  string
	Expr ast.Expr
}

// field is one row of a field table.
type field struct {
	Path     string // "breaker.failures", "arg_patterns[].arg"
	Required bool   // a `!` field, or a regular field without a default
	Cond     string // "strategy == \"summarize\"" for a field inside an if
	Type     string // markdown
	Bounds   string // markdown
	Default  string // CUE text of the default, or ""
	Doc      string
}

// schemaSet is the parsed schemas package.
type schemaSet struct {
	defs  map[string]*def
	order []string // definition names in file order, files sorted
}

// loadSchemas parses every .cue file of dir (the schemas package) with
// comments, keeping its top-level definitions.
func loadSchemas(root string) (*schemaSet, error) {
	dir := filepath.Join(root, "schemas")
	names, err := filepath.Glob(filepath.Join(dir, "*.cue"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	s := &schemaSet{defs: map[string]*def{}}
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		rel := "schemas/" + filepath.Base(name)
		f, err := parser.ParseFile(rel, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			id, ok := fd.Label.(*ast.Ident)
			if !ok || !strings.HasPrefix(id.Name, "#") {
				continue
			}
			if _, dup := s.defs[id.Name]; dup {
				return nil, fmt.Errorf("%s: %s is defined twice", rel, id.Name)
			}
			s.defs[id.Name] = &def{Name: id.Name, File: rel, Doc: docOf(fd), Expr: fd.Value}
			s.order = append(s.order, id.Name)
		}
	}
	return s, nil
}

// docOf returns the doc comment of a node: its comment groups placed
// before it, as text.
func docOf(n ast.Node) string {
	var lines []string
	for _, cg := range ast.Comments(n) {
		if !cg.Doc || cg.Line {
			continue
		}
		for _, c := range cg.List {
			t := strings.TrimPrefix(c.Text, "//")
			t = strings.TrimPrefix(t, " ")
			lines = append(lines, t)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// flow joins the lines of a doc comment into one paragraph per blank line,
// and sets the definition names it mentions (#Policy) in code.
func flow(doc string) string {
	var paras []string
	for _, p := range strings.Split(doc, "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paras = append(paras, defRef.ReplaceAllString(p, "$1`$2`"))
		}
	}
	return strings.Join(paras, "\n\n")
}

// defRef matches a definition name in prose, outside code.
var defRef = regexp.MustCompile("(^|[\\s(])(#[A-Z][A-Za-z0-9]*)")

// cueText formats an expression as one line of CUE.
func cueText(e ast.Node) string {
	b, err := format.Node(e, format.Simplify())
	if err != nil {
		return fmt.Sprintf("%v", e)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// linker renders a reference to a definition; it returns "" for a name it
// does not document.
type linker func(name string) string

// fields lists the rows of a struct definition's field table, nested
// structs and lists of structs flattened into dotted paths.
func fields(e ast.Expr, link linker) []field {
	var out []field
	collectFields(e, "", "", link, &out)
	return out
}

func collectFields(e ast.Expr, prefix, cond string, link linker, out *[]field) {
	st, ok := unparen(e).(*ast.StructLit)
	if !ok {
		return
	}
	for _, d := range st.Elts {
		switch d := d.(type) {
		case *ast.Field:
			name, ok := labelName(d.Label)
			if !ok {
				continue // a pattern constraint; described by its parent
			}
			path := prefix + name
			f := field{Path: path, Cond: cond, Doc: flow(docOf(d))}
			f.Type, f.Bounds, f.Default = describe(d.Value, link)
			f.Required = d.Constraint == token.NOT || (d.Constraint != token.OPTION && f.Default == "")
			*out = append(*out, f)
			v := unparen(d.Value)
			if isFieldStruct(v) {
				collectFields(v, path+".", cond, link, out)
			}
			if l, ok := v.(*ast.ListLit); ok {
				if el := listElem(l); el != nil && isFieldStruct(unparen(el)) {
					collectFields(unparen(el), path+"[].", cond, link, out)
				}
			}
		case *ast.Comprehension:
			c := cond
			for _, cl := range d.Clauses {
				if ic, ok := cl.(*ast.IfClause); ok {
					t := condText(ic.Condition)
					if c != "" {
						t = c + " and " + t
					}
					c = t
				}
			}
			n := len(*out)
			collectFields(d.Value, prefix, c, link, out)
			// A comment above the `if` documents the fields inside it.
			if doc := flow(docOf(d)); doc != "" {
				for i := n; i < len(*out); i++ {
					if (*out)[i].Doc == "" {
						(*out)[i].Doc = doc
					}
				}
			}
		}
	}
}

// condText renders an if condition; `x != _|_` reads "x is set".
func condText(e ast.Expr) string {
	if b, ok := e.(*ast.BinaryExpr); ok {
		if _, bottom := b.Y.(*ast.BottomLit); bottom {
			switch b.Op {
			case token.NEQ:
				return "`" + cueText(b.X) + "` is set"
			case token.EQL:
				return "`" + cueText(b.X) + "` is not set"
			}
		}
	}
	return "`" + cueText(e) + "`"
}

func labelName(l ast.Label) (string, bool) {
	switch l := l.(type) {
	case *ast.Ident:
		return l.Name, true
	case *ast.BasicLit:
		if s, err := strconv.Unquote(l.Value); err == nil {
			return s, true
		}
	}
	return "", false
}

// isFieldStruct reports whether e is a struct literal with named fields.
func isFieldStruct(e ast.Expr) bool {
	st, ok := e.(*ast.StructLit)
	if !ok {
		return false
	}
	for _, d := range st.Elts {
		switch d := d.(type) {
		case *ast.Field:
			if _, ok := labelName(d.Label); ok {
				return true
			}
		case *ast.Comprehension:
			return true
		}
	}
	return false
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// listElem returns the element type of a list: the type after `...`, or
// the first element.
func listElem(l *ast.ListLit) ast.Expr {
	for _, el := range l.Elts {
		if ell, ok := el.(*ast.Ellipsis); ok && ell.Type != nil {
			return ell.Type
		}
	}
	if len(l.Elts) > 0 {
		if _, ok := l.Elts[0].(*ast.Ellipsis); !ok {
			return l.Elts[0]
		}
	}
	return nil
}

// describe splits a field's value into its type, its bounds and its
// default, each as markdown (the default as CUE text).
func describe(e ast.Expr, link linker) (typ, bounds, dflt string) {
	e = unparen(e)
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.OR {
		var alts []ast.Expr
		for _, d := range disjuncts(b) {
			if u, ok := d.(*ast.UnaryExpr); ok && u.Op == token.MUL {
				dflt = cueText(u.X)
				if isLiteral(u.X) && !allLiterals(disjuncts(b)) {
					continue // the default of a type: `*3 | int & >=1`
				}
				d = u.X
			}
			alts = append(alts, d)
		}
		if allLiterals(alts) {
			var vs []string
			for _, a := range alts {
				vs = append(vs, "`"+cueText(a)+"`")
			}
			return "one of " + strings.Join(vs, ", "), "", dflt
		}
		var ts, bs []string
		for _, a := range alts {
			t, bnd, _ := describe(a, link)
			ts = append(ts, t)
			if bnd != "" {
				bs = append(bs, bnd)
			}
		}
		return strings.Join(ts, " or "), strings.Join(bs, "; "), dflt
	}
	var bases []string
	var bs []string
	numeric, text := false, false
	for _, t := range conjuncts(e) {
		if u, ok := t.(*ast.UnaryExpr); ok {
			switch u.Op {
			case token.GEQ, token.GTR, token.LEQ, token.LSS:
				bs = append(bs, "`"+u.Op.String()+cueText(u.X)+"`")
				numeric = true
				continue
			case token.NEQ:
				if lit, ok := u.X.(*ast.BasicLit); ok && lit.Value == `""` {
					bs = append(bs, "non-empty")
					text = true
				} else {
					bs = append(bs, "`!="+cueText(u.X)+"`")
				}
				continue
			case token.MAT, token.NMAT:
				bs = append(bs, "`"+u.Op.String()+cueText(u.X)+"`")
				text = true
				continue
			}
		}
		bases = append(bases, baseType(t, link))
	}
	switch {
	case len(bases) > 0:
		typ = strings.Join(bases, " & ")
	case text:
		typ = "`string`"
	case numeric:
		typ = "`number`"
	default:
		typ = "`" + cueText(e) + "`"
	}
	return typ, strings.Join(bs, ", "), dflt
}

// baseType renders a term that is not a bound.
func baseType(e ast.Expr, link linker) string {
	switch e := unparen(e).(type) {
	case *ast.Ident:
		if strings.HasPrefix(e.Name, "#") {
			if l := link(e.Name); l != "" {
				return l
			}
		}
		return "`" + e.Name + "`"
	case *ast.BasicLit:
		return "`" + e.Value + "`"
	case *ast.ListLit:
		min := 0
		var elem ast.Expr
		open := false
		for _, el := range e.Elts {
			if ell, ok := el.(*ast.Ellipsis); ok {
				open = true
				if ell.Type != nil {
					elem = ell.Type
				}
				continue
			}
			min++
			if elem == nil {
				elem = el
			}
		}
		if elem == nil {
			return "list"
		}
		t, b, _ := describe(elem, link)
		if b != "" {
			t += " (" + b + ")"
		}
		if isFieldStruct(unparen(elem)) {
			t = "struct"
		}
		switch {
		case !open:
			return fmt.Sprintf("list of %d %s", min, t)
		case min == 0:
			return "list of " + t
		default:
			return fmt.Sprintf("list of %s, at least %d", t, min)
		}
	case *ast.StructLit:
		if len(e.Elts) == 1 {
			if _, ok := e.Elts[0].(*ast.Ellipsis); ok {
				return "struct (any fields)"
			}
		}
		for _, d := range e.Elts {
			if f, ok := d.(*ast.Field); ok {
				if l, ok := f.Label.(*ast.ListLit); ok && len(l.Elts) == 1 {
					k := l.Elts[0]
					if a, ok := k.(*ast.Alias); ok {
						k = a.Expr
					}
					kt, kb, _ := describe(k, link)
					if kb != "" {
						kt += " (" + kb + ")"
					}
					vt, vb, _ := describe(f.Value, link)
					if vb != "" {
						vt += " (" + vb + ")"
					}
					return "map from " + kt + " to " + vt
				}
			}
		}
		return "struct"
	}
	return "`" + cueText(e) + "`"
}

func disjuncts(e ast.Expr) []ast.Expr {
	if b, ok := unparen(e).(*ast.BinaryExpr); ok && b.Op == token.OR {
		return append(disjuncts(b.X), disjuncts(b.Y)...)
	}
	return []ast.Expr{e}
}

func conjuncts(e ast.Expr) []ast.Expr {
	if b, ok := unparen(e).(*ast.BinaryExpr); ok && b.Op == token.AND {
		return append(conjuncts(b.X), conjuncts(b.Y)...)
	}
	return []ast.Expr{unparen(e)}
}

func isLiteral(e ast.Expr) bool {
	_, ok := unparen(e).(*ast.BasicLit)
	return ok
}

func allLiterals(es []ast.Expr) bool {
	for _, e := range es {
		if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.MUL {
			e = u.X
		}
		if !isLiteral(e) {
			return false
		}
	}
	return len(es) > 0
}

// refs returns the definitions an expression names, in order of
// appearance.
func refs(e ast.Node) []string {
	var out []string
	seen := map[string]bool{}
	ast.Walk(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "#") && !seen[id.Name] {
			seen[id.Name] = true
			out = append(out, id.Name)
		}
		return true
	}, nil)
	return out
}
