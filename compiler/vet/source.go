package vet

import (
	"bufio"
	"bytes"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/schemas"
)

// constraintSource is where a builtin constraint is written in the embedded
// schemas. An empty outer or inner stands for a comprehension variable (the
// constraint is generated for several kinds).
type constraintSource struct {
	pos                dsl.Pos
	id, outer, inner   string
	outerSet, innerSet bool
}

var (
	constraintStart = regexp.MustCompile(`^(\s*)constraints:\s*"[^"]*":\s*\{`)
	constraintField = regexp.MustCompile(`^\s*(id|outer|inner):\s*(?:"([^"]*)"|[A-Za-z_]\w*)`)
)

// builtinSources reads the constraint blocks of the embedded schema files.
var builtinSources = sync.OnceValue(func() []constraintSource {
	var out []constraintSource
	entries, _ := fs.ReadDir(schemas.CUE, ".")
	for _, e := range entries {
		b, err := fs.ReadFile(schemas.CUE, e.Name())
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		var cur *constraintSource
		var indent string
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			if m := constraintStart.FindStringSubmatch(text); m != nil {
				out = append(out, constraintSource{pos: dsl.Pos{File: "schemas/" + e.Name(), Line: line, Col: len(m[1]) + 1}})
				cur, indent = &out[len(out)-1], m[1]
				continue
			}
			if cur == nil {
				continue
			}
			if strings.TrimRight(text, " \t") == indent+"}" {
				cur = nil
				continue
			}
			if m := constraintField.FindStringSubmatch(text); m != nil {
				quoted := strings.Contains(text, `"`)
				switch m[1] {
				case "id":
					cur.id = m[2]
				case "outer":
					cur.outer, cur.outerSet = m[2], quoted
				case "inner":
					cur.inner, cur.innerSet = m[2], quoted
				}
			}
		}
	}
	return out
})

// ConstraintPos returns where c is written: in the policy for the policy's
// own constraints, in the embedded schemas (schemas/<builtin>.cue) for the
// builtins'. It returns the zero Pos when it cannot tell.
func ConstraintPos(c *dsl.Constraint) dsl.Pos {
	if !c.Builtin {
		return c.Pos
	}
	for _, s := range builtinSources() {
		if s.id == c.ID && (!s.outerSet || s.outer == c.Outer) && (!s.innerSet || s.inner == c.Inner) {
			return s.pos
		}
	}
	return dsl.Pos{}
}
