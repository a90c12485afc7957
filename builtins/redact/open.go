package redact

import (
	"regexp/syntax"
	"unicode/utf8"
)

// openProg is a rule's program, run by openMatch to find the matches a text ending in a line
// break leaves open: begun in it, and able to run on into the text still to come. Go's
// regexp has no partial-match API, so the program is run here, as regexp's own NFA runs
// it: threads in priority order, one a state, each carrying where its match started.
type openProg struct {
	prog *syntax.Prog
	// first holds the bytes a match can start with: no thread starts elsewhere.
	first [256]bool
	// anyStart: the rule is tried at chosen places, anchored (keyedSpans, anchorSpans), not
	// by a search of the whole text: every place is read as a start of its own, also as the
	// start of a text (a key word after "_"), and no match ends another thread: a thread
	// lives until its program fails, a reading that holds at least as long as the rule's.
	anyStart bool
}

// newOpenProg compiles expr for openMatch, or returns nil when no match of it can hold a line
// break: such a rule never runs on past a text that ends in one. expr compiled with regexp
// before, so it parses.
func newOpenProg(expr string, anyStart bool) *openProg {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil
	}
	crosses := false
	for i := range prog.Inst {
		in := &prog.Inst[i]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny:
			crosses = crosses || in.MatchRune('\n')
		}
	}
	if !crosses {
		return nil
	}
	p := &openProg{prog: prog, anyStart: anyStart}
	p.firstBytes(uint32(prog.Start), make([]bool, len(prog.Inst)))
	return p
}

// firstBytes marks the bytes a match reaching pc can start with.
func (p *openProg) firstBytes(pc uint32, seen []bool) {
	if seen[pc] {
		return
	}
	seen[pc] = true
	in := &p.prog.Inst[pc]
	switch in.Op {
	case syntax.InstAlt, syntax.InstAltMatch:
		p.firstBytes(in.Out, seen)
		p.firstBytes(in.Arg, seen)
	case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
		p.firstBytes(in.Out, seen)
	case syntax.InstMatch:
		// An empty match starts anywhere.
		for b := range p.first {
			p.first[b] = true
		}
	case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		for b := range utf8.RuneSelf {
			p.first[b] = p.first[b] || in.MatchRune(rune(b))
		}
		// A rune outside ASCII begins with any byte from 0x80: mark them all when the
		// instruction may take one (a class reaching past ASCII, or a letter folded to one).
		wide := in.Op != syntax.InstRune1 || syntax.Flags(in.Arg)&syntax.FoldCase != 0
		for i := 1; i < len(in.Rune) && !wide; i += 2 {
			wide = in.Rune[i] >= utf8.RuneSelf
		}
		if in.Op == syntax.InstRune && len(in.Rune) == 1 {
			wide = in.Rune[0] >= utf8.RuneSelf || syntax.Flags(in.Arg)&syntax.FoldCase != 0
		}
		if wide {
			for b := utf8.RuneSelf; b < len(p.first); b++ {
				p.first[b] = true
			}
		}
	}
}

// thread is a state of the program and where its match started.
type thread struct {
	pc    uint32
	start int
}

// queue is the threads at one position, in priority order, at most one a state: on[pc] is
// gen when the closure at this position went through pc.
type queue struct {
	on  []uint32
	gen uint32
	ts  []thread
}

func (q *queue) clear() {
	q.gen++
	q.ts = q.ts[:0]
}

// openMatch returns the earliest start of a match text leaves open, or -1. text ends in a
// line break, and what follows it is unknown: a thread still waiting for a character at its
// end, or for what an assertion (\b, $) says of the next one, may go on into that text; a
// match that ended before it was found whole, and goes out masked. Matches are sought as
// regexp's FindAll seeks them (leftmost-first: a match found ends the threads of lower
// priority, then the search goes on from its end), so a match closed by a lazy repetition
// ("BEGIN.*?END") closes the hold. For an anyStart rule each place is a start of its own.
func (p *openProg) openMatch(text string) int {
	n := len(p.prog.Inst)
	cur, next := &queue{on: make([]uint32, n), gen: 1}, &queue{on: make([]uint32, n), gen: 1}
	open := -1
	hold := func(start int) {
		if start < len(text) && (open < 0 || start < open) {
			open = start
		}
	}
	// add puts pc's closure for a thread started at start at position pos into q; prev and
	// r are the characters around pos (-1 at an end).
	var add func(q *queue, pc uint32, start, pos int, prev, r rune)
	add = func(q *queue, pc uint32, start, pos int, prev, r rune) {
		if q.on[pc] == q.gen {
			return
		}
		q.on[pc] = q.gen
		in := &p.prog.Inst[pc]
		switch in.Op {
		case syntax.InstFail:
		case syntax.InstAlt, syntax.InstAltMatch:
			add(q, in.Out, start, pos, prev, r)
			add(q, in.Arg, start, pos, prev, r)
		case syntax.InstCapture, syntax.InstNop:
			add(q, in.Out, start, pos, prev, r)
		case syntax.InstEmptyWidth:
			if pos == len(text) {
				hold(start) // what follows decides
				return
			}
			if syntax.EmptyOp(in.Arg)&^syntax.EmptyOpContext(prev, r) == 0 {
				add(q, in.Out, start, pos, prev, r)
			}
		default:
			q.ts = append(q.ts, thread{pc: pc, start: start})
		}
	}
	pos := 0
	for pos <= len(text) {
		cur.clear()
		matched, end := false, -1
		for at := pos; ; {
			prev, r, w := rune(-1), rune(-1), 0
			if at > 0 {
				prev, _ = utf8.DecodeLastRuneInString(text[:at])
			}
			if at < len(text) {
				r, w = utf8.DecodeRuneInString(text[at:])
			}
			if at < len(text) && (p.anyStart || !matched) && p.first[text[at]] {
				add(cur, uint32(p.prog.Start), at, at, prev, r)
				if p.anyStart && prev == '_' {
					add(cur, uint32(p.prog.Start), at, at, -1, r)
				}
			}
			if at == len(text) {
				for _, t := range cur.ts {
					if p.prog.Inst[t.pc].Op == syntax.InstMatch {
						if !p.anyStart {
							break // the threads after it are of lower priority
						}
						continue
					}
					hold(t.start)
				}
				return open
			}
			next.clear()
			nr := rune(-1)
			if at+w < len(text) {
				nr, _ = utf8.DecodeRuneInString(text[at+w:])
			}
			for _, t := range cur.ts {
				in := &p.prog.Inst[t.pc]
				if in.Op == syntax.InstMatch {
					if p.anyStart {
						continue // the others go on: read each alone
					}
					matched, end = true, at
					break // the threads after it are of lower priority
				}
				if in.MatchRune(r) {
					add(next, in.Out, t.start, at+w, r, nr)
				}
			}
			cur, next = next, cur
			at += w
			if !p.anyStart && matched && len(cur.ts) == 0 {
				break
			}
		}
		// The search found a match ending at end: the next one starts there.
		if end == pos {
			_, w := utf8.DecodeRuneInString(text[pos:])
			end += max(w, 1)
		}
		pos = end
	}
	return open
}
