package vet

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
)

// Analysis holds what the rules share about one policy: every constraint
// pair that applies in each chain and whether it holds, the cycles among the
// constraints, and which tools can reach each tool-chain entry. It is
// computed once per policy by Analyze; the rules only read it. Its query
// methods cache their answers, so an Analysis is not safe for concurrent
// use.
type Analysis struct {
	// Policy is the policy analysed.
	Policy *dsl.Policy
	// Constraints are the builtins' constraints followed by the policy's own.
	Constraints []*dsl.Constraint
	// Pairs lists, chain by chain, every (constraint, outer entry, inner
	// entry) the constraints apply to.
	Pairs []*Pair
	// Cycles lists the contradictions among the constraints.
	Cycles []*ConstraintCycle
	// Problems are errors in the constraints themselves, such as a `when`
	// that does not compile.
	Problems dsl.Diagnostics

	whens     map[*dsl.Constraint]*whenProgram
	static    map[string]*staticPredicate // by source
	applies   map[appliesKey]bool
	chatWhens map[chatWhenKey]Meet
	blockers  map[string]*dsl.Entry    // by tool name; nil entries cached too
	reinvoke  map[string]reinvocations // by stage and scope (scopeKey)
	overlaps  int                      // Overlap evaluations, for the scaling tests
}

// reinvocations is a memoised result of Reinvocations.
type reinvocations struct {
	n       int
	factors string
}

type appliesKey struct {
	e    *dsl.Entry
	tool string
}

// Pair is one application of a constraint: Outer and Inner are entries of
// one chain that its outer and inner name and that can wrap the same call.
type Pair struct {
	Constraint   *dsl.Constraint
	Outer, Inner *dsl.Entry
	// Holds reports whether Outer sits outside Inner, as the constraint
	// wants.
	Holds bool
	// WhenErr is set when the constraint's `when` could not be evaluated
	// for this pair; the pair is then checked as if it held.
	WhenErr error
	// Depends marks a pair of chat layers whose `when`s decide whether
	// they see one call, from more than its model: a violation is then at
	// most a warning.
	Depends bool
	// InCycle marks a pair whose constraint is part of a reported cycle:
	// no order satisfies it, so its violation is reported as the cycle.
	InCycle bool
}

// Violated reports whether the pair breaks its constraint (cycles are
// reported on their own).
func (p *Pair) Violated() bool { return !p.Holds && !p.InCycle }

// ConstraintCycle is a set of constraints that no order of a chain can satisfy.
type ConstraintCycle struct {
	// Stage is the chain the cycle was found in, or "" when the cycle is
	// between constraints that apply to every chain.
	Stage string
	// Path names the layers around the cycle, the first repeated at the end
	// ("a", "b", "a").
	Path []string
	// Constraints[i] orders Path[i] outside Path[i+1].
	Constraints []*dsl.Constraint
}

// Rotate returns the same cycle starting with its i-th constraint.
func (c *ConstraintCycle) Rotate(i int) *ConstraintCycle {
	n := len(c.Constraints)
	out := &ConstraintCycle{Stage: c.Stage}
	for k := 0; k < n; k++ {
		out.Constraints = append(out.Constraints, c.Constraints[(i+k)%n])
		out.Path = append(out.Path, c.Path[(i+k)%n])
	}
	out.Path = append(out.Path, out.Path[0])
	return out
}

// String spells the cycle out: "a -> b -> a".
func (c *ConstraintCycle) String() string { return strings.Join(c.Path, " -> ") }

// Analyze computes the analysis of p with the builtins' constraints.
func Analyze(p *dsl.Policy, builtin []*dsl.Constraint) *Analysis {
	a := &Analysis{
		Policy:      p,
		whens:       map[*dsl.Constraint]*whenProgram{},
		static:      map[string]*staticPredicate{},
		applies:     map[appliesKey]bool{},
		chatWhens:   map[chatWhenKey]Meet{},
		reinvoke:    map[string]reinvocations{},
		blockers:    map[string]*dsl.Entry{},
		Constraints: append(append([]*dsl.Constraint{}, builtin...), p.Constraints...),
	}
	broken := map[*dsl.Constraint]bool{}
	// when compiles the `when` of c the first time a pair needs it; the
	// policy's own are compiled up front, so that their mistakes are
	// reported even where no pair applies. The builtins' are checked by
	// the tests.
	when := func(c *dsl.Constraint) (*whenProgram, bool) {
		if c.When == nil {
			return nil, true
		}
		if w, ok := a.whens[c]; ok {
			return w, true
		}
		if broken[c] {
			return nil, false
		}
		w, d := constraintWhen(c)
		if d != nil {
			a.Problems = append(a.Problems, *d)
			broken[c] = true
			return nil, false
		}
		a.whens[c] = w
		return w, true
	}
	for _, c := range a.Constraints {
		if !c.Builtin {
			if _, ok := when(c); ok {
				a.Problems = append(a.Problems, whenValueProblems(c)...)
			}
		}
	}
	for _, stage := range dsl.Stages {
		chain := p.Chains[stage]
		for _, c := range a.Constraints {
			if broken[c] || (c.Stage != "" && c.Stage != stage) {
				continue
			}
			for _, o := range chain {
				if !matches(o, c, c.Outer) {
					continue
				}
				for _, i := range chain {
					if i == o || !matches(i, c, c.Inner) {
						continue
					}
					meet := a.pairMeet(c, o, i)
					if meet == Never {
						continue
					}
					w, ok := when(c)
					if !ok {
						continue
					}
					pair := &Pair{Constraint: c, Outer: o, Inner: i, Holds: o.Index < i.Index, Depends: meet == Depends}
					if w != nil {
						ok, err := w.eval(o, i)
						if !ok {
							continue
						}
						pair.WhenErr = err
					}
					a.Pairs = append(a.Pairs, pair)
				}
			}
		}
	}
	a.findCycles()
	return a
}

// matches reports whether the outer or inner name of constraint c
// designates e. A builtin's or a custom middleware's constraint names
// middleware ids, so it designates the entries that use them, whatever
// their names; the policy's own constraint names an entry or an id.
func matches(e *dsl.Entry, c *dsl.Constraint, name string) bool {
	if c.Builtin || c.Module != "" {
		return e.Use == name
	}
	return e.Name == name || e.Use == name
}

// Violations returns the violated pairs of the constraints with id, builtin
// or the policy's own, in chain order.
func (a *Analysis) Violations(id string, builtin bool) []*Pair {
	var out []*Pair
	for _, p := range a.Pairs {
		if p.Constraint.ID == id && p.Constraint.Builtin == builtin && p.Violated() {
			out = append(out, p)
		}
	}
	return out
}

// PairsOf returns the pairs e takes part in, as outer or inner.
func (a *Analysis) PairsOf(e *dsl.Entry) []*Pair {
	var out []*Pair
	for _, p := range a.Pairs {
		if p.Outer == e || p.Inner == e {
			out = append(out, p)
		}
	}
	return out
}

// findCycles reports the contradictions among the constraints, twice over:
// between the entries of each chain (which sees that a constraint naming a
// builtin id and one naming an entry of it meet, and evaluates `when`), and
// between the names the constraints use (which sees contradictions before
// the chains hold both layers). A cycle is reported once, however many
// chains show it.
func (a *Analysis) findCycles() {
	seen := map[string]bool{}
	add := func(c *ConstraintCycle) {
		keys := make([]string, len(c.Constraints))
		for i, k := range c.Constraints {
			keys[i] = k.Key()
		}
		sort.Strings(keys)
		k := strings.Join(keys, "|")
		if seen[k] {
			return
		}
		seen[k] = true
		a.Cycles = append(a.Cycles, c)
	}
	inCycle := map[*dsl.Constraint]bool{}
	for _, stage := range dsl.Stages {
		g := newGraph()
		chain := a.Policy.Chains[stage]
		for _, p := range a.Pairs {
			if p.Outer.Stage == stage {
				g.edge(entryLabel(chain, p.Outer), entryLabel(chain, p.Inner), p.Constraint)
			}
		}
		for _, c := range g.cycles() {
			c.Stage = stage
			add(c)
			for _, k := range c.Constraints {
				inCycle[k] = true
			}
		}
	}
	for _, stage := range dsl.Stages {
		g := newGraph()
		for _, c := range a.Constraints {
			if c.When == nil && c.Outer != c.Inner && (c.Stage == "" || c.Stage == stage) {
				g.edge(c.Outer, c.Inner, c)
			}
		}
		for _, c := range g.cycles() {
			// Between names, the cycle belongs to a stage only when one of
			// its constraints names it.
			for _, k := range c.Constraints {
				if k.Stage != "" {
					c.Stage = k.Stage
				}
			}
			add(c)
			for _, k := range c.Constraints {
				inCycle[k] = true
			}
		}
	}
	for _, p := range a.Pairs {
		p.InCycle = inCycle[p.Constraint]
	}
}

// entryLabel names e in a cycle: its Ref, with its position in the chain
// when another entry has the same Ref.
func entryLabel(chain []*dsl.Entry, e *dsl.Entry) string {
	for _, o := range chain {
		if o != e && o.Ref() == e.Ref() {
			return fmt.Sprintf("%s #%d", e.Ref(), e.Index+1)
		}
	}
	return e.Ref()
}

// graph is a directed graph over names whose edges carry the constraint
// that orders them; nodes keep their insertion order so that results are
// stable.
type graph struct {
	nodes []string
	index map[string]int
	out   map[int][]graphEdge
}

type graphEdge struct {
	to int
	c  *dsl.Constraint
}

func newGraph() *graph { return &graph{index: map[string]int{}, out: map[int][]graphEdge{}} }

func (g *graph) node(n string) int {
	if i, ok := g.index[n]; ok {
		return i
	}
	g.index[n] = len(g.nodes)
	g.nodes = append(g.nodes, n)
	return len(g.nodes) - 1
}

func (g *graph) edge(from, to string, c *dsl.Constraint) {
	f, t := g.node(from), g.node(to)
	for _, e := range g.out[f] {
		if e.to == t {
			return
		}
	}
	g.out[f] = append(g.out[f], graphEdge{t, c})
}

// cycles returns one cycle per strongly connected component that has one
// (Tarjan's algorithm, then a breadth-first search for the shortest way back
// to the component's first node).
func (g *graph) cycles() []*ConstraintCycle {
	n := len(g.nodes)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var sccs [][]int
	next := 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range g.out[v] {
			if index[e.to] < 0 {
				strong(e.to)
				low[v] = min(low[v], low[e.to])
			} else if onStack[e.to] {
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] == index[v] {
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 {
				sort.Ints(scc)
				sccs = append(sccs, scc)
			}
		}
	}
	for v := 0; v < n; v++ {
		if index[v] < 0 {
			strong(v)
		}
	}
	sort.Slice(sccs, func(i, j int) bool { return sccs[i][0] < sccs[j][0] })
	var out []*ConstraintCycle
	for _, scc := range sccs {
		in := map[int]bool{}
		for _, v := range scc {
			in[v] = true
		}
		start := scc[0]
		// Breadth-first from start's successors back to start.
		type step struct {
			prev int
			c    *dsl.Constraint
		}
		from := map[int]step{}
		queue := []int{}
		for _, e := range g.out[start] {
			if in[e.to] {
				if _, ok := from[e.to]; !ok {
					from[e.to] = step{start, e.c}
					queue = append(queue, e.to)
				}
			}
		}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			if v == start {
				break
			}
			for _, e := range g.out[v] {
				if _, ok := from[e.to]; in[e.to] && !ok {
					from[e.to] = step{v, e.c}
					queue = append(queue, e.to)
				}
			}
		}
		var path []string
		var cs []*dsl.Constraint
		for v := start; ; {
			s := from[v]
			path = append(path, g.nodes[v])
			cs = append(cs, s.c)
			v = s.prev
			if v == start {
				path = append(path, g.nodes[v])
				break
			}
		}
		// The walk went backwards: reverse it.
		for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
			path[i], path[j] = path[j], path[i]
		}
		for i, j := 0, len(cs)-1; i < j; i, j = i+1, j-1 {
			cs[i], cs[j] = cs[j], cs[i]
		}
		out = append(out, &ConstraintCycle{Path: path, Constraints: cs})
	}
	return out
}

// describe says what a constraint asks for, for related lines and explain.
func describe(c *dsl.Constraint) string {
	kind := "constraint"
	if c.Builtin {
		kind = "builtin constraint"
	}
	s := fmt.Sprintf("%s %s orders %s outside %s", kind, c.ID, c.Outer, c.Inner)
	if c.Stage != "" {
		s += " in the " + c.Stage + " chain"
	}
	if c.When != nil {
		s += " when " + c.When.Source
	}
	return s
}
