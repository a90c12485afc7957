package grounding

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode"
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
	// delims are the template's delimiters (see Delimiters), lower-cased.
	delims []string
}

// MinDelimiterBytes is the least length of a delimiter (see Delimiters).
const MinDelimiterBytes = 3

// Delimiters returns the template's delimiters: each piece of its literal
// text (the text outside its actions, split at line breaks and trimmed of
// spaces) that is at least MinDelimiterBytes long and holds a character
// other than a letter, a digit or a space: `<doc id="`, `</doc>`, `---`,
// `"""`, `Sources:`. They frame the items in the block; an item whose text
// held one could close its frame early and write what follows as the
// template's own text (see Breaks).
func (t *Template) Delimiters() []string { return slices.Clone(t.delims) }

// Breaks returns the first of the template's delimiters, compared without
// regard to case, that the text of it holds (its ID, Content, Source or a
// string anywhere in its Metadata, keys included), and whether there is
// one. Such an item must not be rendered: it would break out of its frame.
func (t *Template) Breaks(it *Item) (string, bool) {
	if len(t.delims) == 0 {
		return "", false
	}
	var found string
	check := func(s string) bool {
		if len(s) < MinDelimiterBytes {
			return false
		}
		low := strings.ToLower(s)
		for _, d := range t.delims {
			if strings.Contains(low, d) {
				found = d
				return true
			}
		}
		return false
	}
	if check(it.ID) || check(it.Content) || check(it.Source) || anyString(it.Metadata, check, 0) {
		return found, true
	}
	return "", false
}

// maxMetadataDepth bounds the nesting Breaks walks: a value nested deeper
// counts as holding a delimiter (the item is refused, never let through
// unread).
const maxMetadataDepth = 64

// anyString reports whether check holds for a string in v (map keys
// included), or v nests deeper than maxMetadataDepth.
func anyString(v any, check func(string) bool, depth int) bool {
	if depth > maxMetadataDepth {
		return true
	}
	switch v := v.(type) {
	case string:
		return check(v)
	case map[string]any:
		for k, x := range v {
			if check(k) || anyString(x, check, depth+1) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if anyString(x, check, depth+1) {
				return true
			}
		}
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32:
	default:
		// Another Go type a template could print: read it as it prints.
		return check(fmt.Sprint(v))
	}
	return false
}

// delimiters collects the delimiters of a template's literal text.
func delimiters(root parse.Node, out map[string]bool) {
	walk(root, func(n parse.Node) {
		text, ok := n.(*parse.TextNode)
		if !ok {
			return
		}
		for _, line := range strings.Split(string(text.Text), "\n") {
			line = strings.TrimSpace(line)
			if len(line) < MinDelimiterBytes || !strings.ContainsFunc(line, func(r rune) bool {
				return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsSpace(r)
			}) {
				continue
			}
			out[strings.ToLower(line)] = true
		}
	})
}

// walk calls visit with every node of a template's lists, the lists under
// if, with and range included.
func walk(n parse.Node, visit func(parse.Node)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				walk(c, visit)
			}
		}
		return
	case *parse.IfNode:
		walk(n.List, visit)
		walk(n.ElseList, visit)
	case *parse.WithNode:
		walk(n.List, visit)
		walk(n.ElseList, visit)
	case *parse.RangeNode:
		walk(n.List, visit)
		walk(n.ElseList, visit)
	}
	visit(n)
}

// Parse parses src as a Go text/template and checks the fields it reads
// against Data. Errors are an *Error.
func Parse(src string) (*Template, error) {
	if len(src) > MaxTemplateBytes {
		return nil, &Error{Message: fmt.Sprintf("the template is %d bytes, over the limit of %d", len(src), MaxTemplateBytes)}
	}
	t, err := template.New("render").Option("missingkey=zero").Funcs(funcs).Parse(src)
	if err != nil {
		return nil, parseError(src, err)
	}
	c := &checker{src: src}
	c.list(t.Root, dataType)
	if c.err == nil {
		// A {{define}}d template could call itself, or two others twice
		// each, and render in time exponential in its text.
		var defs []*parse.ListNode
		for _, tt := range t.Templates() {
			if tt.Name() != t.Name() && tt.Tree != nil && tt.Root != nil {
				defs = append(defs, tt.Root)
			}
		}
		sort.Slice(defs, func(i, j int) bool { return defs[i].Pos < defs[j].Pos })
		if len(defs) > 0 {
			c.fail(defs[0], "template: {{define}} is not allowed; write the text in place")
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	emptyNoValue(t.Tree, t.Root)
	set := map[string]bool{}
	delimiters(t.Root, set)
	delims := make([]string, 0, len(set))
	for d := range set {
		delims = append(delims, d)
	}
	sort.Strings(delims)
	return &Template{t: t, delims: delims}, nil
}

// emptyNoValue ends the pipeline of every action that prints with
// noValueEmpty, so that a metadata key an item lacks ({{.Metadata.tier}})
// prints as nothing rather than "<no value>".
func emptyNoValue(tree *parse.Tree, root parse.Node) {
	walk(root, func(n parse.Node) {
		if n, ok := n.(*parse.ActionNode); ok && len(n.Pipe.Decl) == 0 {
			id := parse.NewIdentifier(noValueFunc).SetTree(tree).SetPos(n.Pos)
			n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{id}})
		}
	})
}

// noValueFunc is the function emptyNoValue appends to the actions that
// print.
const noValueFunc = "noValueEmpty"

// noValueEmpty returns "" for a missing value (a nil interface), else v.
func noValueEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// parseError turns a text/template parse error ("template: render:3: ...")
// into an *Error at the place it names: text/template gives the line, and
// the column only sometimes; without it the place is found on the line
// (errorAt).
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
	if col == 0 && text != "unexpected EOF" {
		off = errorAt(src, off, msg)
	}
	return &Error{Offset: min(off, len(src)), Message: "template: " + text}
}

// maxErrorScan bounds the parses errorAt makes after its search.
const maxErrorScan = 64

// errorAt returns the offset of the action holding the parse error msg on
// the line of src that starts at lineStart: parsing stops at the error, so
// the longest prefix of src that parses, but for its unclosed blocks
// ("unexpected EOF"), ends where that action begins. The prefixes tried end
// where an action may begin ({{) on the line: a search finds the first
// that holds the whole action and fails with msg, and the one before it
// that parses is the answer; lineStart when none is found within
// maxErrorScan parses. Each parse reads the prefix up to its end or its
// error, so the parses are a few per action whatever the line's length.
func errorAt(src string, lineStart int, msg string) int {
	end := strings.IndexByte(src[lineStart:], '\n')
	if end < 0 {
		end = len(src)
	} else {
		end += lineStart
	}
	var starts []int
	for i := lineStart; i < end; {
		j := strings.Index(src[i:end], "{{")
		if j < 0 {
			break
		}
		starts = append(starts, i+j)
		i += j + 1
	}
	parse := func(n int) error {
		_, err := template.New("render").Funcs(funcs).Parse(src[:n])
		return err
	}
	// The prefixes that end past the action fail with msg; those that
	// end before it do not.
	after := sort.Search(len(starts), func(i int) bool {
		err := parse(starts[i])
		return err != nil && err.Error() == msg
	})
	for i := after - 1; i >= 0 && after-i <= maxErrorScan; i-- {
		if err := parse(starts[i]); err == nil || strings.HasSuffix(err.Error(), ": unexpected EOF") {
			return starts[i]
		}
	}
	return lineStart
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

// funcs replace the builtin functions whose result can be longer than their
// arguments: each fails past MaxBlockBytes, so that variables declared one
// from another ({{$b := print $a $a}}) cannot build a string of any size.
var funcs = template.FuncMap{
	"printf":    boundedPrintf,
	"print":     bounded(fmt.Sprint),
	"println":   bounded(fmt.Sprintln),
	"html":      bounded(template.HTMLEscaper),
	"js":        bounded(template.JSEscaper),
	"urlquery":  bounded(template.URLQueryEscaper),
	noValueFunc: noValueEmpty,
}

var errResultTooLarge = fmt.Errorf("a function result exceeds %d bytes", MaxBlockBytes)

// bounded wraps f to fail when its string arguments or its result are over
// MaxBlockBytes.
func bounded(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := checkArgs(args); err != nil {
			return "", err
		}
		if s := f(args...); len(s) <= MaxBlockBytes {
			return s, nil
		}
		return "", errResultTooLarge
	}
}

// checkArgs fails when the strings among args add up to more than
// MaxBlockBytes.
func checkArgs(args []any) error {
	n := 0
	for _, a := range args {
		if s, ok := a.(string); ok {
			if n += len(s); n > MaxBlockBytes {
				return errResultTooLarge
			}
		}
	}
	return nil
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
	if err := checkArgs(args); err != nil {
		return "", err
	}
	if s := fmt.Sprintf(format, args...); len(s) <= MaxBlockBytes {
		return s, nil
	}
	return "", errResultTooLarge
}

// Fit renders the block of the highest-scored items that fits in maxTokens
// (0: no budget), as estimate counts tokens. Items are ranked by score,
// highest first (a NaN score last), ties in retrieval order. The block holds
// the k best for the largest k whose rendering fits, found by bisection (a
// template that renders each item once grows with k); then each item ranked
// below them, best first, that still fits beside those kept and whose text
// is shorter than that of every item found not to fit, so that one item
// too large for the budget (a huge document ranked first) is dropped alone
// rather than taking every item with it. The items keep their
// retrieval order in the block. It returns the block ("" when no item
// fits), the items rendered and the items dropped by the budget, both in
// retrieval order.
func (t *Template) Fit(query string, items []Item, maxTokens int64, estimate func(string) int64) (block string, kept, dropped []Item, err error) {
	if len(items) == 0 {
		return "", nil, nil, nil
	}
	ranked := make([]Item, len(items))
	copy(ranked, items)
	sort.SliceStable(ranked, func(i, j int) bool { return scoreAbove(ranked[i].Score, ranked[j].Score) })
	// fits renders sel in retrieval order and reports whether it is within
	// the budget; with a budget, a block over MaxBlockBytes does not fit
	// rather than fails.
	fits := func(sel []Item) (string, []Item, bool, error) {
		sel = sortedByIndex(sel)
		s, err := t.Render(query, sel)
		if maxTokens > 0 && (errors.Is(err, errBlockTooLarge) || errors.Is(err, errResultTooLarge)) {
			return "", nil, false, nil
		}
		if err != nil {
			return "", nil, false, err
		}
		return s, sel, maxTokens <= 0 || estimate(s) <= maxTokens, nil
	}
	k := len(ranked)
	block, kept, ok, err := fits(ranked)
	if err != nil {
		return "", nil, nil, err
	}
	if ok {
		return block, kept, nil, nil
	}
	lo, hi := 0, k-1 // the largest k that fits is in [lo, hi]; no item always fits
	for lo < hi {
		mid := (lo + hi + 1) / 2
		_, _, ok, err := fits(ranked[:mid])
		if err != nil {
			return "", nil, nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	chosen := slices.Clone(ranked[:lo])
	var out []Item
	out = append(out, ranked[lo]) // the best left out: it did not fit beside the k best
	// An item whose text is no shorter than one that did not fit is not
	// rendered to find it does not fit either: items of like size (the
	// usual case) cost no render past the bisection.
	failed := textSize(ranked[lo])
	for _, it := range ranked[lo+1:] {
		if textSize(it) >= failed {
			out = append(out, it)
			continue
		}
		s, sel, ok, err := fits(append(slices.Clone(chosen), it))
		if err != nil {
			return "", nil, nil, err
		}
		if !ok {
			out = append(out, it)
			failed = textSize(it)
			continue
		}
		chosen = append(chosen, it)
		block, kept = s, sel
	}
	if len(chosen) == 0 {
		return "", nil, sortedByIndex(ranked), nil
	}
	if len(chosen) == lo {
		if block, kept, _, err = fits(chosen); err != nil {
			return "", nil, nil, err
		}
	}
	return block, kept, sortedByIndex(out), nil
}

// textSize is the length of an item's own text: its id, content and
// source.
func textSize(it Item) int { return len(it.ID) + len(it.Content) + len(it.Source) }

// scoreAbove orders scores highest first, a NaN below every number: a NaN
// compares false to anything, which would let it sit anywhere in the
// ranking and push better-scored items out of the budget.
func scoreAbove(a, b float64) bool {
	if math.IsNaN(b) {
		return !math.IsNaN(a)
	}
	return a > b
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
	intType  = reflect.TypeFor[int]()
	strType  = reflect.TypeFor[string]()
)

// rangeMsg is the error for a range over anything but the items or an
// item's metadata.
const rangeMsg = "template: range only over .Items, an item's .Metadata or a variable bound to them"

// checker walks a template's parse tree and reports the first problem: a
// field read that the dot's or a variable's type does not have, or a
// construct whose render would not be bounded by the items (a range over
// anything but .Items or an item's .Metadata, a range over the items inside
// another, {{define}}, {{template}} and {{block}}, a variable assigned
// again). A nil type is unknown (a map value, the result of a function):
// nothing under it is checked.
type checker struct {
	src string
	err *Error
	// vars are the variables in scope, innermost last.
	vars []variable
	// inItems and inMap count the enclosing ranges over the items and over
	// a map: a range over the items loops once per item, one over a map
	// once per metadata key, so that a render loops at most as many times
	// as the items and their metadata hold.
	inItems, inMap int
}

type variable struct {
	name string
	t    reflect.Type
}

func (c *checker) fail(n parse.Node, format string, args ...any) {
	if c.err == nil {
		c.err = &Error{Offset: min(max(int(n.Position()), 0), len(c.src)), Message: fmt.Sprintf(format, args...)}
	}
}

// list checks a list in its own variable scope.
func (c *checker) list(l *parse.ListNode, dot reflect.Type) {
	if l == nil {
		return
	}
	scope := len(c.vars)
	for _, n := range l.Nodes {
		c.node(n, dot)
	}
	c.vars = c.vars[:scope]
}

func (c *checker) node(n parse.Node, dot reflect.Type) {
	switch n := n.(type) {
	case *parse.ActionNode:
		c.pipe(n.Pipe, dot)
	case *parse.IfNode:
		scope := len(c.vars)
		c.pipe(n.Pipe, dot)
		c.list(n.List, dot)
		c.list(n.ElseList, dot)
		c.vars = c.vars[:scope]
	case *parse.WithNode:
		scope := len(c.vars)
		t := c.pipe(n.Pipe, dot)
		c.list(n.List, t)
		c.list(n.ElseList, dot)
		c.vars = c.vars[:scope]
	case *parse.RangeNode:
		c.rangeNode(n, dot)
	case *parse.TemplateNode:
		c.fail(n, "template: {{template}} and {{block}} are not allowed; write the text in place")
	}
}

func (c *checker) rangeNode(n *parse.RangeNode, dot reflect.Type) {
	scope := len(c.vars)
	decl := n.Pipe.Decl
	n.Pipe.Decl = nil // the declarations bind the key and element, not the pipe
	t := c.pipe(n.Pipe, dot)
	n.Pipe.Decl = decl
	var key, elem reflect.Type
	items := t == reflect.TypeFor[[]Item]()
	switch {
	case t == nil || t.Kind() != reflect.Slice && t.Kind() != reflect.Map:
		c.fail(n, rangeMsg)
	case items && c.inItems > 0:
		c.fail(n, "template: a range over the items inside another is not allowed")
	case !items && c.inMap > 0:
		c.fail(n, "template: a range over a map inside another is not allowed")
	case items:
		key, elem = intType, t.Elem()
	default:
		key, elem = t.Key(), t.Elem()
	}
	switch len(decl) {
	case 1:
		c.declare(decl[0], elem)
	case 2:
		c.declare(decl[0], key)
		c.declare(decl[1], elem)
	}
	if items {
		c.inItems++
	} else {
		c.inMap++
	}
	c.list(n.List, elem)
	if items {
		c.inItems--
	} else {
		c.inMap--
	}
	c.vars = c.vars[:scope]
	c.list(n.ElseList, dot)
}

func (c *checker) declare(v *parse.VariableNode, t reflect.Type) {
	c.vars = append(c.vars, variable{name: v.Ident[0], t: t})
}

func (c *checker) lookup(name string) reflect.Type {
	if name == "$" {
		return dataType
	}
	for i := len(c.vars) - 1; i >= 0; i-- {
		if c.vars[i].name == name {
			return c.vars[i].t
		}
	}
	return nil
}

// pipe checks a pipeline, binds the variables it declares and returns the
// type of its result when it is a plain field or variable read, else nil.
func (c *checker) pipe(p *parse.PipeNode, dot reflect.Type) reflect.Type {
	if p == nil {
		return nil
	}
	if p.IsAssign {
		c.fail(p, "template: assigning a variable again (=) is not allowed; declare a new one (:=)")
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
	if !p.IsAssign {
		for _, v := range p.Decl {
			c.declare(v, last)
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
		return c.fields(n, dot, "", n.Ident)
	case *parse.VariableNode:
		return c.fields(n, c.lookup(n.Ident[0]), n.Ident[0], n.Ident[1:])
	case *parse.ChainNode:
		t := c.arg(n.Node, dot)
		return c.fields(n, t, "", n.Field)
	case *parse.PipeNode:
		scope := len(c.vars)
		t := c.pipe(n, dot)
		c.vars = c.vars[:scope]
		return t
	case *parse.StringNode:
		return strType
	}
	return nil
}

// fields follows a chain of field names from t, read from what the
// template names from (a variable, or "" for the dot).
func (c *checker) fields(n parse.Node, t reflect.Type, from string, names []string) reflect.Type {
	read := from
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
			if read == "" {
				read = "the dot"
			}
			c.fail(n, "template: %s is a %s and has no field %s", read, t.Kind(), name)
			return nil
		}
		read += "." + name
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
