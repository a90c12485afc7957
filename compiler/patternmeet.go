package compiler

import (
	"regexp/syntax"
	"slices"
	"unicode"
)

// meetBudget bounds the work of patternsMeet: each pair of states it
// looks at (again or for the first time), each instruction it follows to
// find a state's next ones and each range of characters it compares is a
// step; past it, the two patterns are taken to share a value.
const meetBudget = 200000

// patternsMeet reports whether some string matches both a and b, two
// regular expressions in Go's syntax read as a JSON Schema pattern, Go's
// MatchString and CEL's matches() read them: a match anywhere in the
// string, ^ and $ at its ends (\A, \z). It is false only where no string
// matches both: the two patterns' programs are run side by side over
// every string, a pair of states at a time, and no pair reaches both
// matches. What the walk cannot decide is taken to let a value through,
// so false is never said wrongly: an assertion other than ^, $, \A and
// \z (\b, \B, ^ and $ under (?m)) is taken to hold, and a walk past
// meetBudget steps, or a pattern Go does not compile, to meet.
func patternsMeet(a, b string) bool {
	sa, okA := newSearch(a)
	sb, okB := newSearch(b)
	return !okA || !okB || sa.meets(sb)
}

// A search is the program of a pattern read as a search, with what
// patternsMeet has learnt of its states.
type search struct {
	prog *syntax.Prog
	// after holds, by instruction, the rune instructions reachable from
	// it without reading a rune, at a position neither the text's start
	// nor its end; ends whether a match is reachable so at its end;
	// ranges the characters a rune instruction matches.
	after  map[uint32][]uint32
	ends   map[uint32]bool
	ranges map[uint32][]rune
	// steps counts the work of the walk under way (meetBudget).
	steps *int
}

// newSearch compiles re as a search reads it: any text may come before
// and after a match. The search is not safe for concurrent use.
func newSearch(re string) (*search, bool) {
	if _, err := syntax.Parse(re, syntax.Perl); err != nil {
		return nil, false
	}
	parsed, err := syntax.Parse(`(?s:.*)(?:`+re+`)(?s:.*)`, syntax.Perl)
	if err != nil {
		return nil, false
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, false
	}
	return &search{prog: prog, after: map[uint32][]uint32{}, ends: map[uint32]bool{}, ranges: map[uint32][]rune{}}, true
}

// meets reports whether some string matches both s and t (patternsMeet).
func (s *search) meets(t *search) bool {
	steps := 0
	s.steps, t.steps = &steps, &steps
	if s.endMatch(uint32(s.prog.Start), true) && t.endMatch(uint32(t.prog.Start), true) {
		return true // the empty string
	}
	type pair struct{ a, b uint32 }
	seen := map[pair]bool{}
	var queue []pair
	push := func(as, bs []uint32) {
		for _, x := range as {
			for _, y := range bs {
				if steps++; steps > meetBudget {
					return
				}
				if p := (pair{x, y}); !seen[p] {
					seen[p] = true
					queue = append(queue, p)
				}
			}
		}
	}
	push(s.closure(uint32(s.prog.Start), true), t.closure(uint32(t.prog.Start), true))
	for len(queue) > 0 {
		if steps > meetBudget {
			return true
		}
		p := queue[0]
		queue = queue[1:]
		ra, rb := s.runes(p.a), t.runes(p.b)
		steps += len(ra) + len(rb)
		if !rangesMeet(ra, rb) {
			continue
		}
		outA, outB := s.prog.Inst[p.a].Out, t.prog.Inst[p.b].Out
		if s.endMatch(outA, false) && t.endMatch(outB, false) {
			return true
		}
		push(s.closure(outA, false), t.closure(outB, false))
	}
	return steps > meetBudget
}

// closure returns the rune instructions reachable from pc without
// reading a rune, at a position before the text's end that is its start
// where begin is set.
func (s *search) closure(pc uint32, begin bool) []uint32 {
	if runes, ok := s.after[pc]; ok && !begin {
		return runes
	}
	runes := []uint32{}
	seen := map[uint32]bool{}
	var walk func(pc uint32)
	walk = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		*s.steps++
		in := &s.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			walk(in.Out)
			walk(in.Arg)
		case syntax.InstEmptyWidth:
			if emptyHolds(syntax.EmptyOp(in.Arg), begin, false) {
				walk(in.Out)
			}
		case syntax.InstCapture, syntax.InstNop:
			walk(in.Out)
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			runes = append(runes, pc)
		}
	}
	walk(pc)
	if !begin {
		s.after[pc] = runes
	}
	return runes
}

// endMatch reports whether the program reaches a match from pc at the
// text's end (its start too, where begin is set) without reading a rune.
func (s *search) endMatch(pc uint32, begin bool) bool {
	if end, ok := s.ends[pc]; ok && !begin {
		return end
	}
	seen := map[uint32]bool{}
	var walk func(pc uint32) bool
	walk = func(pc uint32) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		*s.steps++
		in := &s.prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return walk(in.Out) || walk(in.Arg)
		case syntax.InstEmptyWidth:
			return emptyHolds(syntax.EmptyOp(in.Arg), begin, true) && walk(in.Out)
		case syntax.InstCapture, syntax.InstNop:
			return walk(in.Out)
		}
		return false
	}
	end := walk(pc)
	if !begin {
		s.ends[pc] = end
	}
	return end
}

// emptyHolds reports whether the assertions op may hold at a position
// that is (or is not) the text's start and end: ^ (\A) and $ (\z) are
// decided, the others taken to hold.
func emptyHolds(op syntax.EmptyOp, begin, end bool) bool {
	return (op&syntax.EmptyBeginText == 0 || begin) && (op&syntax.EmptyEndText == 0 || end)
}

// runes returns the characters the rune instruction pc matches, as
// sorted, disjoint ranges (lo, hi pairs): a class's own, a character's
// with its other cases where it is folded.
func (s *search) runes(pc uint32) []rune {
	if r, ok := s.ranges[pc]; ok {
		return r
	}
	in := &s.prog.Inst[pc]
	var out []rune
	switch in.Op {
	case syntax.InstRuneAny:
		out = []rune{0, unicode.MaxRune}
	case syntax.InstRuneAnyNotNL:
		out = []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}
	case syntax.InstRune1:
		out = []rune{in.Rune[0], in.Rune[0]}
	case syntax.InstRune:
		if len(in.Rune) == 1 {
			chars := []rune{in.Rune[0]}
			if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(in.Rune[0]); f != in.Rune[0]; f = unicode.SimpleFold(f) {
					chars = append(chars, f)
				}
			}
			slices.Sort(chars)
			for _, c := range chars {
				out = append(out, c, c)
			}
		} else {
			out = sortedRanges(in.Rune)
		}
	}
	s.ranges[pc] = out
	return out
}

// sortedRanges returns the lo, hi pairs of r sorted by lo.
func sortedRanges(r []rune) []rune {
	pairs := make([][2]rune, 0, len(r)/2)
	for i := 0; i+1 < len(r); i += 2 {
		pairs = append(pairs, [2]rune{r[i], r[i+1]})
	}
	slices.SortFunc(pairs, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	out := make([]rune, 0, len(r))
	for _, p := range pairs {
		out = append(out, p[0], p[1])
	}
	return out
}

// rangesMeet reports whether two lists of ranges, each sorted by its
// start, share a character.
func rangesMeet(a, b []rune) bool {
	for i, j := 0, 0; i+1 < len(a) && j+1 < len(b); {
		switch {
		case a[i+1] < b[j]:
			i += 2
		case b[j+1] < a[i]:
			j += 2
		default:
			return true
		}
	}
	return false
}
