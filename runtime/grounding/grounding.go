package grounding

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
)

// MaxTemplateBytes bounds a render template.
const MaxTemplateBytes = 64 << 10

// MaxBlockBytes bounds a rendered block: a template whose output grows past
// it fails to render.
const MaxBlockBytes = 1 << 20

// MaxFormatWidth bounds the width and precision of a printf verb in a
// template, so that one verb cannot build a string of any size.
const MaxFormatWidth = 1000

// Item is one admitted item as a template sees it.
type Item struct {
	ID       string
	Content  string
	Source   string
	Score    float64
	Metadata map[string]any
	// Index is the item's position in the retrieval, from 0.
	Index int
}

// Data is what a template is executed over.
type Data struct {
	// Query is the text the items were retrieved for.
	Query string
	// Items are the items that reach the block, in retrieval order.
	Items []Item
}

// Error is a template that does not parse or reads a field Data does not
// have. Offset is the byte offset of the problem in the template.
type Error struct {
	Offset  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Template is a parsed, checked render template.
type Template struct {
	t *template.Template
}

// Parse parses src as a Go text/template and checks the fields it reads
// against Data. Errors are an *Error.
func Parse(src string) (*Template, error) {
	if len(src) > MaxTemplateBytes {
		return nil, &Error{Message: fmt.Sprintf("the template is %d bytes, over the limit of %d", len(src), MaxTemplateBytes)}
	}
	t, err := template.New("render").Option("missingkey=zero").Funcs(template.FuncMap{"printf": boundedPrintf}).Parse(src)
	if err != nil {
		return nil, parseError(src, err)
	}
	c := &checker{src: src}
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		// A {{define}}d template's dot is whatever it is invoked with.
		var dot reflect.Type
		if tt.Name() == t.Name() {
			dot = dataType
		}
		c.list(tt.Root, dot)
	}
	if c.err != nil {
		return nil, c.err
	}
	return &Template{t: t}, nil
}

// parseError turns a text/template parse error ("template: render:3: ...")
// into an *Error at the start of the line it names.
func parseError(src string, err error) *Error {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "template: render:")
	if !ok {
		return &Error{Message: msg}
	}
	line := 0
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		line = line*10 + int(rest[i]-'0')
		i++
	}
	// A column may follow the line ("3:14:"); text/template does not
	// always give one.
	col := 0
	if i < len(rest) && rest[i] == ':' {
		j := i + 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			col = col*10 + int(rest[j]-'0')
			j++
		}
		if j > i+1 && j < len(rest) && rest[j] == ':' {
			i = j
		} else {
			col = 0
		}
	}
	text := strings.TrimSpace(strings.TrimPrefix(rest[i:], ":"))
	off := lineOffset(src, line) + col
	return &Error{Offset: min(off, len(src)), Message: "template: " + text}
}

// lineOffset returns the offset of the start of 1-based line n of src.
func lineOffset(src string, n int) int {
	off := 0
	for l := 1; l < n; l++ {
		i := strings.IndexByte(src[off:], '\n')
		if i < 0 {
			return len(src)
		}
		off += i + 1
	}
	return off
}

// Render executes the template over query and items. Output past
// MaxBlockBytes fails it.
func (t *Template) Render(query string, items []Item) (string, error) {
	w := &cappedWriter{}
	if err := t.t.Execute(w, Data{Query: query, Items: items}); err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	return w.b.String(), nil
}

var errBlockTooLarge = fmt.Errorf("the rendered block exceeds %d bytes", MaxBlockBytes)

// cappedWriter collects at most MaxBlockBytes.
type cappedWriter struct{ b strings.Builder }

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > MaxBlockBytes {
		return 0, errBlockTooLarge
	}
	return w.b.Write(p)
}

// boundedPrintf is fmt.Sprintf with every width and precision of the format
// at most MaxFormatWidth, and none given as an argument (*).
func boundedPrintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0; i++ {
		}
		for i < len(format) && (format[i] >= '0' && format[i] <= '9' || format[i] == '.' || format[i] == '*' || format[i] == '[' || format[i] == ']') {
			n := 0
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				n = min(n*10+int(format[i]-'0'), MaxFormatWidth+1)
				i++
			}
			if n > MaxFormatWidth {
				return "", fmt.Errorf("printf: a width or precision above %d", MaxFormatWidth)
			}
			if i < len(format) && format[i] == '*' {
				return "", fmt.Errorf("printf: a width or precision from an argument (*)")
			}
			if i < len(format) && (format[i] == '.' || format[i] == '[' || format[i] == ']') {
				i++
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// Fit renders the block of the highest-scored items that fits in maxTokens
// (0: no budget), as estimate counts tokens. Items are ranked by score,
// highest first, ties in retrieval order; the block holds the k best for the
// largest k whose rendering fits, found by bisection (a template that renders
// each item once grows with k), in retrieval order. It returns the block
// ("" when no item fits), the items rendered and the items dropped by the
// budget, both in retrieval order.
func (t *Template) Fit(query string, items []Item, maxTokens int64, estimate func(string) int64) (block string, kept, dropped []Item, err error) {
	if len(items) == 0 {
		return "", nil, nil, nil
	}
	ranked := make([]Item, len(items))
	copy(ranked, items)
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].Score > ranked[j].Score })
	render := func(k int) (string, []Item, error) {
		sel := sortedByIndex(ranked[:k])
		s, err := t.Render(query, sel)
		return s, sel, err
	}
	k := len(ranked)
	block, kept, err = render(k)
	if err != nil {
		return "", nil, nil, err
	}
	if maxTokens > 0 && estimate(block) > maxTokens {
		lo, hi := 0, k-1 // the largest k that fits is in [lo, hi]; no item always fits
		for lo < hi {
			mid := (lo + hi + 1) / 2
			s, _, err := render(mid)
			if err != nil {
				return "", nil, nil, err
			}
			if estimate(s) <= maxTokens {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if k = lo; k == 0 {
			return "", nil, sortedByIndex(ranked), nil
		}
		if block, kept, err = render(k); err != nil {
			return "", nil, nil, err
		}
	}
	return block, kept, sortedByIndex(ranked[k:]), nil
}

func sortedByIndex(items []Item) []Item {
	if len(items) == 0 {
		return nil
	}
	out := make([]Item, len(items))
	copy(out, items)
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// The types a template's dot may have.
var (
	dataType = reflect.TypeFor[Data]()
	itemType = reflect.TypeFor[Item]()
)

// checker walks a template's parse tree and reports the first field read
// that the dot's type does not have. A nil type is unknown (a variable, a
// map value, the result of a function): nothing under it is checked.
type checker struct {
	src string
	err *Error
	// numeric are the variables bound to a pipeline holding a number
	// literal.
	numeric map[string]bool
}

func (c *checker) fail(n parse.Node, format string, args ...any) {
	if c.err == nil {
		c.err = &Error{Offset: int(n.Position()), Message: fmt.Sprintf(format, args...)}
	}
}

func (c *checker) list(l *parse.ListNode, dot reflect.Type) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.node(n, dot)
	}
}

func (c *checker) node(n parse.Node, dot reflect.Type) {
	switch n := n.(type) {
	case *parse.ActionNode:
		c.pipe(n.Pipe, dot)
	case *parse.IfNode:
		c.pipe(n.Pipe, dot)
		c.list(n.List, dot)
		c.list(n.ElseList, dot)
	case *parse.WithNode:
		t := c.pipe(n.Pipe, dot)
		c.list(n.List, t)
		c.list(n.ElseList, dot)
	case *parse.RangeNode:
		if c.literalNumber(n.Pipe) {
			c.fail(n, "template: range over a number written in the template is not allowed; range over .Items")
		}
		t := c.pipe(n.Pipe, dot)
		var elem reflect.Type // the dot inside: the element of a list read as a field
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		c.list(n.List, elem)
		c.list(n.ElseList, dot)
	case *parse.TemplateNode:
		c.pipe(n.Pipe, dot)
	}
}

// literalNumber reports whether a pipeline holds a number written in the
// template, or a variable bound to one: ranging over it would loop as many
// times as the template says, whatever the items ({{range 1000000000}}).
func (c *checker) literalNumber(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.NumberNode:
		return true
	case *parse.VariableNode:
		return len(n.Ident) > 0 && c.numeric[n.Ident[0]]
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, cmd := range n.Cmds {
			if c.literalNumber(cmd) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if c.literalNumber(a) {
				return true
			}
		}
	case *parse.ChainNode:
		return c.literalNumber(n.Node)
	}
	return false
}

// pipe checks a pipeline and returns the type of its result when it is a
// plain field read, else nil.
func (c *checker) pipe(p *parse.PipeNode, dot reflect.Type) reflect.Type {
	if p == nil {
		return nil
	}
	if len(p.Decl) > 0 && c.literalNumber(p) {
		if c.numeric == nil {
			c.numeric = map[string]bool{}
		}
		for _, v := range p.Decl {
			c.numeric[v.Ident[0]] = true
		}
	}
	var last reflect.Type
	for i, cmd := range p.Cmds {
		last = nil
		for j, arg := range cmd.Args {
			t := c.arg(arg, dot)
			if i == len(p.Cmds)-1 && j == 0 && len(cmd.Args) == 1 {
				last = t
			}
		}
	}
	return last
}

// arg checks one operand and returns its type when known.
func (c *checker) arg(n parse.Node, dot reflect.Type) reflect.Type {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		return c.fields(n, dot, n.Ident)
	case *parse.ChainNode:
		t := c.arg(n.Node, dot)
		return c.fields(n, t, n.Field)
	case *parse.PipeNode:
		return c.pipe(n, dot)
	}
	return nil
}

// fields follows a chain of field names from t.
func (c *checker) fields(n parse.Node, t reflect.Type, names []string) reflect.Type {
	prev := ""
	for _, name := range names {
		if t == nil {
			return nil
		}
		switch t.Kind() {
		case reflect.Map, reflect.Interface:
			return nil
		case reflect.Struct:
			f, ok := t.FieldByName(name)
			if !ok || !f.IsExported() {
				c.fail(n, "template: %s has no field %s (it has %s)", typeName(t), name, fieldList(t))
				return nil
			}
			t = f.Type
		default:
			c.fail(n, "template: .%s is a %s and has no field %s", prev, t.Kind(), name)
			return nil
		}
		prev = name
	}
	return t
}

func typeName(t reflect.Type) string {
	if t == itemType {
		return "an item"
	}
	return "the data"
}

func fieldList(t reflect.Type) string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		names = append(names, "."+t.Field(i).Name)
	}
	return strings.Join(names, ", ")
}
