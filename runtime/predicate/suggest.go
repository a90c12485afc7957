package predicate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/internal/textdist"
)

// suggestField adds a did-you-mean to an "undefined field 'x'" issue: it
// types the selector chain before the field (args, request.params,
// args.shipping) in the environment and names the closest field its type
// has. Operands it cannot type alone (a comprehension variable, a call)
// get no suggestion.
func (e *Env) suggestField(src string, is *Issue) {
	name, ok := strings.CutPrefix(is.Message, "undefined field '")
	if !ok || !strings.HasSuffix(name, "'") {
		return
	}
	name = strings.TrimSuffix(name, "'")
	// is.Offset is the field name's start: step back over the blanks,
	// '?' and '.' of the selection to the operand's end.
	end := is.Offset
	for end > 0 && strings.IndexByte(" \t\r\n?", src[end-1]) >= 0 {
		end--
	}
	if end == 0 || src[end-1] != '.' {
		return
	}
	end--
	start := end
	for start > 0 && (isIdentByte(src[start-1]) || src[start-1] == '.') {
		start--
	}
	operand := src[start:end]
	if operand == "" || !isIdentByte(operand[0]) || operand[0] >= '0' && operand[0] <= '9' {
		return
	}
	if note := e.splitField(operand, name); note != "" {
		is.Message += note
		return
	}
	t := e.typeOf(operand)
	if t == nil {
		// A comprehension variable: `xs.exists(x, x.f)` types x as an
		// element of xs.
		head, rest, _ := strings.Cut(operand, ".")
		if r := comprehensionRange(src[:start], head); r != "" {
			if lt := e.typeOf(r); lt != nil && lt.Kind() == types.ListKind && len(lt.Parameters()) == 1 {
				t = lt.Parameters()[0]
				if rest != "" {
					t = nil // a field of the element: not typed here
				}
			}
		}
	}
	if t == nil || t.Kind() != types.StructKind {
		return
	}
	names, ok := e.prov.FindStructFieldNames(t.TypeName())
	if !ok {
		return
	}
	best := textdist.Closest(name, names)
	if best == "" && slices.Contains(textNames, name) {
		best = textField(names)
	}
	if best != "" {
		is.Message += fmt.Sprintf("; did you mean '%s'?", best)
	}
}

// splitField explains an undefined field of args (or of an object under
// it) that some of the schemas the entry is scoped to declare: args holds
// only the fields every one declares with one type, so a field two tools
// type differently (a number and an integer amount), or that one of them
// lacks, is not there. It returns "" when no schema declares the field.
func (e *Env) splitField(operand, name string) string {
	if e.cfg.Stage != Tool || len(e.cfg.ArgsSchemas) < 2 {
		return ""
	}
	path := strings.Split(operand, ".")
	if path[0] != "args" {
		return ""
	}
	var kinds []string
	declared := 0
	for _, raw := range e.cfg.ArgsSchemas {
		n, typed, err := parseArgsSchema(raw)
		if err != nil || !typed {
			return "" // args would be untyped: not this case
		}
		for _, p := range path[1:] {
			if n == nil || n.kind != kindObject {
				n = nil
				break
			}
			n = n.props[p]
		}
		if n == nil || n.kind != kindObject || n.props[name] == nil {
			continue
		}
		declared++
		if k := kindName(n.props[name].kind); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	if declared == 0 {
		return ""
	}
	field := operand + "." + name
	if declared < len(e.cfg.ArgsSchemas) {
		verb := "declare"
		if declared == 1 {
			verb = "declares"
		}
		return fmt.Sprintf(": only %d of the %d tools the entry is scoped to %s %s, and args holds the fields every one of them declares with one type; give the others their own entry, or read dyn(args).%s behind has(dyn(args).%s)",
			declared, len(e.cfg.ArgsSchemas), verb, field, name, name)
	}
	slices.Sort(kinds)
	types := strings.Join(kinds, ", ")
	if len(kinds) == 1 {
		types = kinds[0] + "s of different elements"
	}
	return fmt.Sprintf(": the tools the entry is scoped to declare %s with different types (%s), and args holds only the fields they all declare with one type; give the tools one type for it, or one entry each",
		field, types)
}

// kindName is the CEL type a schema node of kind k becomes.
func kindName(k schemaKind) string {
	switch k {
	case kindString:
		return "string"
	case kindInt:
		return "int"
	case kindDouble:
		return "double"
	case kindBool:
		return "bool"
	case kindObject:
		return "object"
	case kindMap:
		return "map"
	case kindList:
		return "list"
	}
	return "dyn"
}

// textNames are the names a field holding an object's text goes by: input
// and output call it text, a message and an item content.
var textNames = []string{"body", "content", "message", "text"}

// textField returns the field of names that holds the text ("text" or
// "content"), or "".
func textField(names []string) string {
	for _, n := range names {
		if n == "text" || n == "content" {
			return n
		}
	}
	return ""
}

var objectOperandRE = regexp.MustCompile(`applied to '(?:\((?:(agentc\.[a-z_]+), string|string, (agentc\.[a-z_]+))\)|(agentc\.[a-z_]+)\.\(string(?:, string)?\))'`)

// suggestTextOperand adds a hint to a "no matching overload" issue whose
// operands are an object and a string (input == 'hi', item.contains('x')):
// the object's text is one of its fields.
func (e *Env) suggestTextOperand(is *Issue) {
	m := objectOperandRE.FindStringSubmatch(is.Message)
	if m == nil {
		return
	}
	typ := m[1] + m[2] + m[3]
	o, ok := fixedObjects[typ]
	if !ok {
		return
	}
	f := textField(o.names)
	if f == "" {
		return
	}
	is.Message += fmt.Sprintf("; %s is an object: its text is its field %s", typ, f)
	for _, v := range stageVariables(e.cfg.Stage, e.cfg.Phase) {
		if v.typ.TypeName() == typ {
			is.Message += fmt.Sprintf(" (%s.%s)", v.name, f)
			break
		}
	}
}

var (
	schemaIndexRE = regexp.MustCompile(`for '_\[_\]' applied to '\((agentc\.(?:args|value|state)[^,]*), string\)'`)
	schemaInRE    = regexp.MustCompile(`for '@in' applied to '\(string, (agentc\.(?:args|value|state)[^)]*)\)'`)
	bracketKeyRE  = regexp.MustCompile(`^\[\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*\]`)
	identRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// suggestSchemaObjectIndex adds a hint to a "no matching overload" issue
// reading an object typed from a schema as a map: by a key in brackets
// (args['x-api-key']) or with in ('x-api-key' in args). Its fields are read
// by name, one that is not an identifier between backticks.
func suggestSchemaObjectIndex(src string, is *Issue) {
	var typ, operand, key string
	if m := schemaIndexRE.FindStringSubmatch(is.Message); m != nil && is.Offset >= 0 && is.Offset < len(src) {
		k := bracketKeyRE.FindStringSubmatch(src[is.Offset:])
		if k == nil {
			return
		}
		typ, key, operand = m[1], k[1]+k[2], operandBefore(src[:is.Offset])
	} else if m := schemaInRE.FindStringSubmatch(is.Message); m != nil && is.Offset >= 0 && is.Offset+2 <= len(src) {
		before := strings.TrimRight(src[:is.Offset], " \t\r\n")
		if before == "" || before[len(before)-1] != '\'' && before[len(before)-1] != '"' {
			return
		}
		q := before[len(before)-1]
		start := strings.LastIndexByte(before[:len(before)-1], q)
		if start < 0 {
			return
		}
		typ, key = m[1], before[start+1:len(before)-1]
		operand = operandAfter(strings.TrimLeft(src[is.Offset+2:], " \t\r\n"))
	} else {
		return
	}
	if operand == "" || key == "" {
		return
	}
	from := "its tools' args schemas"
	switch {
	case strings.HasPrefix(typ, valueRootName):
		from = "the field's schema"
	case strings.HasPrefix(typ, stateRootName):
		from = "the state fields' schemas"
	}
	field, note := operand+"."+key, ""
	if !identRE.MatchString(key) {
		field, note = operand+".`"+key+"`", " (a name that is not an identifier goes between backticks)"
	}
	if strings.Contains(is.Message, "'@in'") {
		is.Message += fmt.Sprintf("; %s is an object typed from %s, not a map: test its field with has(%s)%s", operand, from, field, note)
		return
	}
	is.Message += fmt.Sprintf("; %s is an object typed from %s, not a map: read its field as %s%s", operand, from, field, note)
}

// operandBefore returns the selector chain that ends src (args.ship in
// "x == args.ship"), backtick-quoted names and indexes included
// (args.items[0].sku), or "".
func operandBefore(src string) string {
	src = strings.TrimRight(src, " \t\r\n")
	start := len(src)
	for start > 0 {
		switch b := src[start-1]; {
		case isIdentByte(b) || b == '.':
			start--
		case b == '`':
			open := strings.LastIndexByte(src[:start-1], '`')
			if open < 0 {
				return ""
			}
			start = open
		case b == ']':
			depth, j := 0, start-1
			for ; j >= 0 && (src[j] != '[' || depth != 1); j-- {
				switch src[j] {
				case ']':
					depth++
				case '[':
					depth--
				}
			}
			if j < 0 {
				return ""
			}
			start = j
		default:
			return strings.TrimLeft(src[start:], ".")
		}
	}
	return strings.TrimLeft(src[start:], ".")
}

// operandAfter returns the selector chain that starts src, or "".
func operandAfter(src string) string {
	end := 0
	for end < len(src) {
		switch b := src[end]; {
		case isIdentByte(b) || b == '.':
			end++
		case b == '`':
			close := strings.IndexByte(src[end+1:], '`')
			if close < 0 {
				return ""
			}
			end += close + 2
		case b == '[' && end > 0:
			depth, j := 0, end
			for ; j < len(src) && (src[j] != ']' || depth != 1); j++ {
				switch src[j] {
				case '[':
					depth++
				case ']':
					depth--
				}
			}
			if j == len(src) {
				return ""
			}
			end = j + 1
		default:
			return strings.TrimRight(src[:end], ".")
		}
	}
	return strings.TrimRight(src[:end], ".")
}

var nullOperandRE = regexp.MustCompile(`for '_[!=]=_' applied to '\((?:null, .+|.+, null)\)'`)

// suggestNullOperand adds a hint to a "no matching overload" issue
// comparing a typed value with null (args.note == null): a JSON null reads
// as absent, so has() is the test for it.
func suggestNullOperand(src string, is *Issue) {
	if !nullOperandRE.MatchString(is.Message) {
		return
	}
	// is.Offset is the operator's: the operand is the selector chain
	// before it, or after it for null == args.note.
	operand := ""
	if is.Offset >= 0 && is.Offset <= len(src) {
		operand = operandBefore(src[:is.Offset])
		if operand == "null" && is.Offset+2 <= len(src) {
			operand = operandAfter(strings.TrimLeft(src[is.Offset+2:], " \t\r\n"))
		}
	}
	test, when := nullTest(strings.Contains(is.Message, "'_!=_'"))
	if m, k, ok := mapEntryAround(src, is.Offset); ok {
		// A map's entry read by its key: the key's presence is the test.
		test := "!(%s in %s)"
		if strings.Contains(is.Message, "'_!=_'") {
			test = "%s in %s"
		}
		is.Message += fmt.Sprintf("; a JSON null reads as absent, never as null: test "+test+" instead (%s)", k, m, when)
		return
	}
	if operand == "" || operand == "null" || !strings.Contains(operand, ".") || operand[0] == '[' {
		// Not a field read from a variable ((args.items[0]).sku).
		is.Message += "; a JSON null reads as absent, never as null: test the field with has() instead"
		return
	}
	is.Message += fmt.Sprintf("; a JSON null reads as absent, never as null: test "+test+" instead (%s)", operand, when)
}

var (
	entryBeforeRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.]*)\s*\[\s*('[^'\\]*'|"[^"\\]*")\s*\]\s*$`)
	entryAfterRE  = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\[\s*('[^'\\]*'|"[^"\\]*")\s*\]`)
)

// mapEntryAround returns the map and the quoted key of an entry read by
// its key (args.books['home']) on either side of the operator at offset.
func mapEntryAround(src string, offset int) (m, key string, ok bool) {
	if offset < 0 || offset+2 > len(src) {
		return "", "", false
	}
	g := entryBeforeRE.FindStringSubmatch(src[:offset])
	if g == nil && strings.HasSuffix(strings.TrimRight(src[:offset], " \t\r\n"), "null") {
		g = entryAfterRE.FindStringSubmatch(src[offset+2:]) // null == m['k']
	}
	if g == nil {
		return "", "", false
	}
	return g[1], g[2], true
}

// nullTest is the presence test (a format taking the field) that does what a comparison with
// null was written for, and when it is true: !has() for ==, has() for != (ne).
func nullTest(ne bool) (test, when string) {
	if ne {
		return "has(%s)", "false when it is null or missing"
	}
	return "!has(%s)", "true when it is null or missing"
}

// typeOf returns the type of a selector chain in the environment, or nil.
func (e *Env) typeOf(expr string) *types.Type {
	a, iss := e.cel.Compile(expr)
	if iss.Err() != nil {
		return nil
	}
	return a.OutputType()
}

// comprehensionRange returns the range of the innermost comprehension
// macro before the end of src that binds v (`request.tools.exists(v,`), or
// "".
func comprehensionRange(src, v string) string {
	r := ""
	for _, m := range macroRE.FindAllStringSubmatch(src, -1) {
		if m[3] == v {
			r = m[1] // the last one binding v is the innermost
		}
	}
	return r
}

var macroRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.]*)\.(all|exists|exists_one|map|filter)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,`)

func isIdentByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
