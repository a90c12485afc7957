package redact

import (
	"regexp/syntax"
	"sync"
	"unicode/utf8"
)

// openProg is a rule's program, run by openMatch to find the matches a text ending in a line
// break leaves open: begun in it, and able to run on into the text still to come. Go's
// regexp has no partial-match API, so the program is run here, as regexp's own NFA runs
// it: threads in priority order, one a state, each carrying where its match started.
type openProg struct {
	prog *syntax.Prog
	// tail is the program of the prefixes of the rule's matches, reversed, its assertions
	// dropped (prefixTree): mayOpen runs it back from the end of a text, as far as a match
	// could begin that the text ends inside of, and openMatch runs prog only when one may.
	// Nil when that program would be too large: prog is always run then.
	tail *syntax.Prog
	// afterBreak holds the states of tail once it read the line break a text ends in (the
	// same for every text: computed once), and breakMatch whether one of them matched.
	afterBreak []uint32
	breakMatch bool
	pool       sync.Pool // *scratch
	// first holds the bytes a match can start with: no thread starts elsewhere.
	first [256]bool
	// anyStart: the rule is tried at chosen places, anchored (keyedSpans, anchorSpans), not
	// by a search of the whole text: every place is read as a start of its own, an assertion
	// holds when it would at the start of a text too (a key word after "_" is tried as one),
	// and no match ends another thread: a thread lives until its program fails, a reading
	// that holds at least as long as the rule's.
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
	if tail, err := syntax.Compile(reverse(prefixTree(loose(re.Simplify()))).Simplify()); err == nil && len(tail.Inst) <= maxTailInsts {
		p.tail = tail
		sc := p.scratch()
		cur, next := &sc.tail[0], &sc.tail[1]
		cur.clear()
		next.clear()
		p.addTail(cur, uint32(tail.Start))
		for _, t := range cur.ts {
			if in := &tail.Inst[t.pc]; in.MatchRune('\n') && p.addTail(next, in.Out) {
				p.breakMatch = true
			}
		}
		for _, t := range next.ts {
			p.afterBreak = append(p.afterBreak, t.pc)
		}
	}
	return p
}

// maxTailInsts bounds the program of a rule's prefixes (openProg.tail): a rule whose
// repetitions nest deeply may take more, and is then run forward on every text.
const maxTailInsts = 20000

// loose returns re without its assertions (\b, ^, $: each matches the empty text) and its
// capture groups: a language that holds re's.
func loose(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch}
	case syntax.OpCapture:
		return loose(re.Sub[0])
	}
	if len(re.Sub) == 0 {
		return re
	}
	out := *re
	out.Sub = make([]*syntax.Regexp, len(re.Sub))
	for i, sub := range re.Sub {
		out.Sub[i] = loose(sub)
	}
	return &out
}

// prefixTree returns an expression that matches the prefixes of the texts re (simplified,
// loose) matches, the empty one included.
func prefixTree(re *syntax.Regexp) *syntax.Regexp {
	quest := func(sub *syntax.Regexp) *syntax.Regexp {
		return &syntax.Regexp{Op: syntax.OpQuest, Sub: []*syntax.Regexp{sub}}
	}
	cat := func(a, b *syntax.Regexp) *syntax.Regexp {
		return &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{a, b}}
	}
	switch re.Op {
	case syntax.OpLiteral:
		// "abc": (a(b(c)?)?)?
		var out *syntax.Regexp
		for i := len(re.Rune) - 1; i >= 0; i-- {
			r := &syntax.Regexp{Op: syntax.OpLiteral, Flags: re.Flags, Rune: []rune{re.Rune[i]}}
			if out != nil {
				r = cat(r, out)
			}
			out = quest(r)
		}
		if out == nil {
			return &syntax.Regexp{Op: syntax.OpEmptyMatch}
		}
		return out
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return quest(re)
	case syntax.OpConcat:
		// A B C: pref(A) | A pref(B C)
		if len(re.Sub) == 0 {
			return re
		}
		if len(re.Sub) == 1 {
			return prefixTree(re.Sub[0])
		}
		rest := &syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[1:]}
		return &syntax.Regexp{Op: syntax.OpAlternate, Sub: []*syntax.Regexp{prefixTree(re.Sub[0]), cat(re.Sub[0], prefixTree(rest))}}
	case syntax.OpAlternate:
		out := &syntax.Regexp{Op: syntax.OpAlternate}
		for _, sub := range re.Sub {
			out.Sub = append(out.Sub, prefixTree(sub))
		}
		return out
	case syntax.OpStar, syntax.OpPlus:
		// A*, A+: A* pref(A)
		return cat(&syntax.Regexp{Op: syntax.OpStar, Sub: re.Sub}, prefixTree(re.Sub[0]))
	case syntax.OpQuest:
		return prefixTree(re.Sub[0])
	}
	return re // the empty text, or none
}

// reverse returns an expression that matches the texts re matches, written backwards.
func reverse(re *syntax.Regexp) *syntax.Regexp {
	out := *re
	switch re.Op {
	case syntax.OpLiteral:
		out.Rune = make([]rune, len(re.Rune))
		for i, r := range re.Rune {
			out.Rune[len(re.Rune)-1-i] = r
		}
		return &out
	case syntax.OpConcat:
		out.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, sub := range re.Sub {
			out.Sub[len(re.Sub)-1-i] = reverse(sub)
		}
		return &out
	}
	if len(re.Sub) > 0 {
		out.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, sub := range re.Sub {
			out.Sub[i] = reverse(sub)
		}
	}
	return &out
}

// mayOpen reports whether text ends inside a match of the rule, read without its
// assertions: whether a part of text that runs to its end, not empty, is the start of a
// match. It reads text back from its end only as far as that may be; over a run of bytes
// that leave its threads as they are ("[\s\S]*" waiting for the text a match begins with)
// it reads each byte once, not each thread.
func (p *openProg) mayOpen(text string) bool {
	if p.tail == nil {
		return true
	}
	sc := p.scratch()
	defer p.pool.Put(sc)
	cur, next := &sc.tail[0], &sc.tail[1]
	cur.clear()
	end := len(text)
	if end > 0 && text[end-1] == '\n' {
		// The line break every text ends in was read once, by newOpenProg.
		if p.breakMatch {
			return true
		}
		for _, pc := range p.afterBreak {
			p.addTail(cur, pc)
		}
		end--
	} else {
		p.addTail(cur, uint32(p.tail.Start))
	}
	var same [utf8.RuneSelf]bool // the ASCII bytes that leave cur as it is
	for end > 0 && len(cur.ts) > 0 {
		c := text[end-1]
		if c < utf8.RuneSelf && same[c] {
			end--
			continue
		}
		r, w := utf8.DecodeLastRuneInString(text[:end])
		end -= w
		next.clear()
		for _, t := range cur.ts {
			if in := &p.tail.Inst[t.pc]; in.MatchRune(r) && p.addTail(next, in.Out) {
				return true
			}
		}
		if sameThreads(cur, next) {
			if r < utf8.RuneSelf {
				same[r] = true
			}
			continue
		}
		same = [utf8.RuneSelf]bool{}
		cur, next = next, cur
	}
	return false
}

// sameThreads reports whether next holds the states cur holds.
func sameThreads(cur, next *queue) bool {
	if len(cur.ts) != len(next.ts) {
		return false
	}
	for _, t := range next.ts {
		if cur.on[t.pc] != cur.gen {
			return false
		}
	}
	return true
}

// addTail puts pc's closure in tail into q, and reports whether it reaches a match.
func (p *openProg) addTail(q *queue, pc uint32) bool {
	if q.on[pc] == q.gen {
		return false
	}
	q.on[pc] = q.gen
	in := &p.tail.Inst[pc]
	switch in.Op {
	case syntax.InstAlt, syntax.InstAltMatch:
		a := p.addTail(q, in.Out)
		return p.addTail(q, in.Arg) || a
	case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
		return p.addTail(q, in.Out)
	case syntax.InstMatch:
		return true
	case syntax.InstFail:
		return false
	}
	q.ts = append(q.ts, thread{pc: pc})
	return false
}

// scratch is the queues of one run of prog and of tail, kept for the next (openProg.pool).
type scratch struct {
	prog, tail [2]queue
}

func (p *openProg) scratch() *scratch {
	if sc, ok := p.pool.Get().(*scratch); ok {
		return sc
	}
	sc := &scratch{}
	for i := range 2 {
		sc.prog[i].on = make([]uint32, len(p.prog.Inst))
		if p.tail != nil {
			sc.tail[i].on = make([]uint32, len(p.tail.Inst))
		}
	}
	return sc
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
	if !p.mayOpen(text) {
		return -1
	}
	sc := p.scratch()
	defer p.pool.Put(sc)
	m := machine{p: p, text: text, open: -1}
	cur, next := &sc.prog[0], &sc.prog[1]
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
				m.add(cur, uint32(p.prog.Start), at, at, prev, r)
			}
			if at == len(text) {
				for _, t := range cur.ts {
					if p.prog.Inst[t.pc].Op == syntax.InstMatch {
						if !p.anyStart {
							break // the threads after it are of lower priority
						}
						continue
					}
					m.hold(t.start)
				}
				return m.open
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
					m.add(next, in.Out, t.start, at+w, r, nr)
				}
			}
			cur, next = next, cur
			at += w
			if !p.anyStart && matched && len(cur.ts) == 0 {
				break
			}
			if len(cur.ts) == 0 && !matched {
				// No thread: skip to the next byte a match can start with.
				k := at
				for k < len(text) && !p.first[text[k]] {
					k++
				}
				if k == len(text) {
					return m.open
				}
				at = k
			}
		}
		// The search found a match ending at end: the next one starts there.
		if end == pos {
			_, w := utf8.DecodeRuneInString(text[pos:])
			end += max(w, 1)
		}
		pos = end
	}
	return m.open
}

// machine is one run of openMatch.
type machine struct {
	p    *openProg
	text string
	open int // the earliest start of a match left open, -1 for none
}

func (m *machine) hold(start int) {
	if start < len(m.text) && (m.open < 0 || start < m.open) {
		m.open = start
	}
}

// add puts pc's closure for a thread started at start at position pos into q; prev and r
// are the characters around pos (-1 at an end).
func (m *machine) add(q *queue, pc uint32, start, pos int, prev, r rune) {
	if q.on[pc] == q.gen {
		return
	}
	q.on[pc] = q.gen
	in := &m.p.prog.Inst[pc]
	switch in.Op {
	case syntax.InstFail:
	case syntax.InstAlt, syntax.InstAltMatch:
		m.add(q, in.Out, start, pos, prev, r)
		m.add(q, in.Arg, start, pos, prev, r)
	case syntax.InstCapture, syntax.InstNop:
		m.add(q, in.Out, start, pos, prev, r)
	case syntax.InstEmptyWidth:
		if pos == len(m.text) {
			m.hold(start) // what follows decides
			return
		}
		ctx := syntax.EmptyOpContext(prev, r)
		if m.p.anyStart {
			// Read also as the start of a text: a key word after "_" is tried there.
			ctx |= syntax.EmptyOpContext(-1, r)
		}
		if syntax.EmptyOp(in.Arg)&^ctx == 0 {
			m.add(q, in.Out, start, pos, prev, r)
		}
	default:
		q.ts = append(q.ts, thread{pc: pc, start: start})
	}
}
