package compiler

import (
	"regexp"
	"regexp/syntax"
	"unicode"
)

// maxMeetStates bounds the pairs of states patternsMeet explores; past
// it, the two patterns are taken to share a value.
const maxMeetStates = 100000

// patternsMeet reports whether some string matches both a and b, two
// regular expressions in Go's syntax read as a JSON Schema pattern, Go's
// MatchString and CEL's matches() read them: a match anywhere in the
// string, ^ and $ at its ends (\A, \z). It is false only where no string
// matches both: the two patterns' programs are run side by side over
// every string, a pair of states at a time, and no pair reaches both
// matches. What the walk cannot decide is taken to let a value through,
// so false is never said wrongly: an assertion other than ^, $, \A and
// \z (\b, \B, ^ and $ under (?m)) is taken to hold, two character
// classes each of more than 4096 characters to share one, and a walk
// past maxMeetStates pairs, or a pattern Go does not compile, to meet.
func patternsMeet(a, b string) bool {
	pa, okA := searchProg(a)
	pb, okB := searchProg(b)
	if !okA || !okB {
		return true
	}
	if endMatch(pa, uint32(pa.Start), true) && endMatch(pb, uint32(pb.Start), true) {
		return true // the empty string
	}
	type pair struct{ a, b uint32 }
	seen := map[pair]bool{}
	var queue []pair
	push := func(as, bs []uint32) {
		for _, x := range as {
			for _, y := range bs {
				if len(seen) > maxMeetStates {
					return
				}
				if p := (pair{x, y}); !seen[p] {
					seen[p] = true
					queue = append(queue, p)
				}
			}
		}
	}
	push(closure(pa, uint32(pa.Start), true), closure(pb, uint32(pb.Start), true))
	for len(queue) > 0 {
		if len(seen) > maxMeetStates {
			return true
		}
		p := queue[0]
		queue = queue[1:]
		ia, ib := &pa.Inst[p.a], &pb.Inst[p.b]
		if !runesMeet(ia, ib) {
			continue
		}
		if endMatch(pa, ia.Out, false) && endMatch(pb, ib.Out, false) {
			return true
		}
		push(closure(pa, ia.Out, false), closure(pb, ib.Out, false))
	}
	return false
}

// searchProg compiles re as a search reads it: any text may come before
// and after a match.
func searchProg(re string) (*syntax.Prog, bool) {
	if _, err := regexp.Compile(re); err != nil {
		return nil, false
	}
	parsed, err := syntax.Parse(`(?s:.*)(?:`+re+`)(?s:.*)`, syntax.Perl)
	if err != nil {
		return nil, false
	}
	prog, err := syntax.Compile(parsed.Simplify())
	return prog, err == nil
}

// closure returns the rune instructions of prog reachable from pc without
// reading a rune, at a position before the text's end that is its start
// where begin is set.
func closure(prog *syntax.Prog, pc uint32, begin bool) (runes []uint32) {
	seen := map[uint32]bool{}
	var walk func(pc uint32)
	walk = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		in := &prog.Inst[pc]
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
	return runes
}

// endMatch reports whether prog reaches a match from pc at the text's end
// (its start too, where begin is set) without reading a rune.
func endMatch(prog *syntax.Prog, pc uint32, begin bool) bool {
	seen := map[uint32]bool{}
	var walk func(pc uint32) bool
	walk = func(pc uint32) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		in := &prog.Inst[pc]
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
	return walk(pc)
}

// emptyHolds reports whether the assertions op may hold at a position
// that is (or is not) the text's start and end: ^ (\A) and $ (\z) are
// decided, the others taken to hold.
func emptyHolds(op syntax.EmptyOp, begin, end bool) bool {
	return (op&syntax.EmptyBeginText == 0 || begin) && (op&syntax.EmptyEndText == 0 || end)
}

// maxEnumerated is the most characters runesMeet lists of a class.
const maxEnumerated = 4096

// runesMeet reports whether one character matches both rune instructions;
// true where both classes are too large to list.
func runesMeet(x, y *syntax.Inst) bool {
	for _, pair := range [2][2]*syntax.Inst{{x, y}, {y, x}} {
		if cands, ok := candidates(pair[0]); ok {
			for _, r := range cands {
				if matchRune(x, r) && matchRune(y, r) {
					return true
				}
			}
			return false
		}
	}
	return true
}

// matchRune reports whether the rune instruction in matches r.
func matchRune(in *syntax.Inst, r rune) bool {
	switch in.Op {
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	case syntax.InstRune1:
		return r == in.Rune[0]
	}
	return in.MatchRune(r)
}

// candidates lists the characters a rune instruction may match (those of
// its ranges and, under case folding, their other cases); false where
// they are more than maxEnumerated.
func candidates(in *syntax.Inst) ([]rune, bool) {
	var ranges []rune
	switch {
	case in.Op == syntax.InstRune1 || in.Op == syntax.InstRune && len(in.Rune) == 1:
		ranges = []rune{in.Rune[0], in.Rune[0]}
	case in.Op == syntax.InstRune:
		ranges = in.Rune
	default:
		return nil, false // any character
	}
	n := 0
	for i := 0; i+1 < len(ranges); i += 2 {
		n += int(ranges[i+1]-ranges[i]) + 1
		if n > maxEnumerated {
			return nil, false
		}
	}
	fold := in.Op == syntax.InstRune && syntax.Flags(in.Arg)&syntax.FoldCase != 0
	var out []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			out = append(out, r)
			if fold {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					out = append(out, f)
				}
			}
		}
	}
	return out, true
}
