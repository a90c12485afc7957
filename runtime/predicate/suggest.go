package predicate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/common/types"
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
	if best := closest(name, names); best != "" {
		is.Message += fmt.Sprintf("; did you mean '%s'?", best)
	}
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

// closest returns the candidate nearest to name, or "" when none is within
// a third of its length (plus one) edits.
func closest(name string, candidates []string) string {
	best, bestD := "", len(name)/3+2
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (bytes): insertions, deletions, substitutions and transpositions of
// neighbours each cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
