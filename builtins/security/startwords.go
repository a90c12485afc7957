package security

import (
	"regexp/syntax"
	"slices"
	"strings"
)

// maxStartWords bounds the start words derived from one expression; past it the expression is
// matched over the whole text instead.
const maxStartWords = 512

// startWords returns every word a match of the normalized-text expression expr can begin
// with, and false when they cannot be listed (an alternative begins with \w+, a wide character
// class or a repetition). A word ends at the first space or separator class; an expression
// that may begin with a space cannot be listed either.
func startWords(expr string) ([]string, bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, false
	}
	prefixes, ok := wordPrefixes(re.Simplify(), []wordPrefix{{}})
	if !ok {
		return nil, false
	}
	// A word still open at the end of the expression ends there.
	var words []string
	for _, p := range prefixes {
		if p.word == "" {
			return nil, false
		}
		words = append(words, p.word)
	}
	slices.Sort(words)
	return slices.Compact(words), true
}

// wordPrefix is the start of a match: the letters read so far and whether the first word is
// complete.
type wordPrefix struct {
	word string
	done bool
}

// wordPrefixes extends each prefix in in with what re can match next.
func wordPrefixes(re *syntax.Regexp, in []wordPrefix) ([]wordPrefix, bool) {
	var open []wordPrefix
	out := make([]wordPrefix, 0, len(in))
	for _, p := range in {
		if p.done {
			out = append(out, p)
		} else {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return out, true
	}
	var next []wordPrefix
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpBeginLine, syntax.OpBeginText:
		next = open
	case syntax.OpEndText, syntax.OpEndLine:
		for _, p := range open {
			next = append(next, wordPrefix{p.word, true})
		}
	case syntax.OpLiteral:
		lit := string(re.Rune)
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		for _, p := range open {
			if i := strings.IndexByte(lit, ' '); i >= 0 {
				next = append(next, wordPrefix{p.word + lit[:i], true})
			} else {
				next = append(next, wordPrefix{p.word + lit, false})
			}
		}
	case syntax.OpCharClass:
		runes := classRunes(re.Rune)
		if runes == nil {
			return nil, false
		}
		for _, p := range open {
			for _, r := range runes {
				if isSeparator(r) {
					next = append(next, wordPrefix{p.word, true})
				} else {
					next = append(next, wordPrefix{p.word + string(r), false})
				}
			}
		}
	case syntax.OpCapture:
		return wordPrefixes(re.Sub[0], in)
	case syntax.OpConcat:
		next = open
		for _, sub := range re.Sub {
			var ok bool
			if next, ok = wordPrefixes(sub, next); !ok {
				return nil, false
			}
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			alt, ok := wordPrefixes(sub, open)
			if !ok {
				return nil, false
			}
			next = append(next, alt...)
		}
	case syntax.OpQuest:
		alt, ok := wordPrefixes(re.Sub[0], open)
		if !ok {
			return nil, false
		}
		next = append(slices.Clone(open), alt...)
	default:
		return nil, false
	}
	if len(next) > maxStartWords {
		return nil, false
	}
	return append(out, next...), true
}

// classRunes lists the runes of a small character class, or nil for a wide one.
func classRunes(ranges []rune) []rune {
	var out []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i+1]-ranges[i] > 8 {
			return nil
		}
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			out = append(out, r)
		}
	}
	return out
}

// isSeparator reports whether r becomes a space in the normalized text.
func isSeparator(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
}
