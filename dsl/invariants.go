package dsl

import (
	"cuelang.org/go/cue"
)

// decodeInvariants decodes the invariants section and checks that
// max_executions names declared tools.
func (l *loader) decodeInvariants(p *Policy, v cue.Value) {
	iv := v.LookupPath(fieldPath("invariants"))
	if !iv.Exists() {
		return
	}
	in := &Invariants{Pos: l.userPos([]string{"invariants"}), MaxExecutions: map[string]int{}, Custom: map[string]*Expr{}}
	_ = iv.LookupPath(fieldPath("off")).Decode(&in.Off)
	user := l.user.LookupPath(fieldPath("invariants"))
	eachField(user, iv, "max_executions", func(name string, nv cue.Value) {
		n, _ := nv.Int64()
		in.MaxExecutions[name] = int(n)
		if _, ok := p.Tools[name]; !ok {
			l.errorf(l.userPos([]string{"invariants", "max_executions", name}), "schema/bad-reference",
				"invariants.max_executions names tool %q, which is not declared in tools%s", name, suggestName(name, keys(p.Tools)))
		}
	})
	eachField(user, iv, "custom", func(name string, cv cue.Value) {
		if x := l.expr([]string{"invariants", "custom", name}, cv); x != nil {
			in.Custom[name] = x
		}
	})
	p.Invariants = in
}
