package contentfilter

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
)

// Config lists what a Filter refuses.
type Config struct {
	// Keywords are banned words or phrases.
	Keywords []string
	// Patterns are banned RE2 regular expressions.
	Patterns []string
}

// RuleKind says whether a Match came from a keyword or a pattern.
type RuleKind string

// The rule kinds.
const (
	KindKeyword RuleKind = "keyword"
	KindPattern RuleKind = "pattern"
)

// Match reports the rule that matched and where.
type Match struct {
	Kind RuleKind
	// Rule is the keyword or the pattern source as configured.
	Rule string
	// Start and End are byte offsets in the checked text (End exclusive).
	Start, End int
}

// Filter checks text against banned keywords and patterns.
type Filter struct {
	byFirstWord map[string][]phrase // keywords made only of words, indexed by first word
	regexRules  []regexRule         // patterns, and keywords containing symbols
	// symbolKeywords is set when regexRules holds keywords.
	symbolKeywords bool
}

type phrase struct {
	words   []string // lower case
	keyword string
	order   int
}

type regexRule struct {
	re    *regexp.Regexp
	group int // submatch that holds the rule's text; 0 for the whole match
	kind  RuleKind
	rule  string
	order int
}

// New builds a Filter. An empty keyword or an invalid pattern is an error naming it.
func New(cfg Config) (*Filter, error) {
	f := &Filter{byFirstWord: map[string][]phrase{}}
	order := 0
	for _, kw := range cfg.Keywords {
		words := strings.Fields(textnorm.Fold(kw).Text)
		if len(words) == 0 {
			return nil, fmt.Errorf("contentfilter: empty keyword")
		}
		if allWordRunes(words) {
			lower := make([]string, len(words))
			for i, w := range words {
				lower[i] = strings.ToLower(w)
			}
			f.byFirstWord[lower[0]] = append(f.byFirstWord[lower[0]], phrase{words: lower, keyword: kw, order: order})
		} else {
			re, err := keywordRegexp(words)
			if err != nil {
				return nil, fmt.Errorf("contentfilter: keyword %q: %w", kw, err)
			}
			f.regexRules = append(f.regexRules, regexRule{re: re, group: 1, kind: KindKeyword, rule: kw, order: order})
			f.symbolKeywords = true
		}
		order++
	}
	for _, p := range cfg.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("contentfilter: pattern %q: %w", p, err)
		}
		f.regexRules = append(f.regexRules, regexRule{re: re, kind: KindPattern, rule: p, order: order})
		order++
	}
	return f, nil
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func allWordRunes(words []string) bool {
	for _, w := range words {
		for _, r := range w {
			if !isWordRune(r) {
				return false
			}
		}
	}
	return true
}

// keywordRegexp matches a keyword that contains symbols ("c++", "$$$"): case-insensitive,
// words joined by any run of whitespace (Unicode spaces included: a no-break space
// separates words as a space does), and a word boundary on each side that ends in a word
// character. Group 1 holds the keyword itself.
func keywordRegexp(words []string) (*regexp.Regexp, error) {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = regexp.QuoteMeta(w)
	}
	const boundary = `[^\p{L}\p{N}_]`
	expr := `(?i)`
	first, _ := utf8.DecodeRuneInString(words[0])
	if isWordRune(first) {
		expr += `(?:^|` + boundary + `)`
	}
	expr += `(` + strings.Join(quoted, `[\s\p{Z}]+`) + `)`
	last, _ := utf8.DecodeLastRuneInString(words[len(words)-1])
	if isWordRune(last) {
		expr += `(?:` + boundary + `|$)`
	}
	return regexp.Compile(expr)
}

// Check reports the earliest banned keyword or pattern in text and whether there was one.
// When two rules match at the same offset, the one configured first wins (keywords before
// patterns).
func (f *Filter) Check(text string) (Match, bool) {
	best, bestOrder := Match{Start: -1}, 0
	better := func(start, order int) bool {
		return best.Start < 0 || start < best.Start || (start == best.Start && order < bestOrder)
	}
	// Keywords are matched on the folded text, so that invisible characters and look-alike
	// letters do not hide them; their offsets are mapped back to text.
	var folded textnorm.Folded
	if len(f.byFirstWord) > 0 || f.symbolKeywords {
		folded = textnorm.Fold(text)
	}
	if len(f.byFirstWord) > 0 {
		if m, order, ok := f.checkWords(folded.Text); ok {
			m.Start, m.End = folded.Span(m.Start, m.End)
			best, bestOrder = m, order
		}
	}
	for _, r := range f.regexRules {
		subject := text
		if r.kind == KindKeyword {
			subject = folded.Text
		}
		loc := r.re.FindStringSubmatchIndex(subject)
		if loc == nil {
			continue
		}
		start, end := loc[2*r.group], loc[2*r.group+1]
		if r.kind == KindKeyword {
			start, end = folded.Span(start, end)
		}
		if better(start, r.order) {
			best, bestOrder = Match{Kind: r.kind, Rule: r.rule, Start: start, End: end}, r.order
		}
	}
	return best, best.Start >= 0
}

// token is one word of the checked text.
type token struct {
	start, end int
}

// checkWords finds the earliest word-only keyword by walking the words of text.
func (f *Filter) checkWords(text string) (Match, int, bool) {
	tokens := tokenize(text)
	var lower []byte
	lowerAt := func(t token) string {
		w := text[t.start:t.end]
		upper := false
		for i := 0; i < len(w); i++ {
			c := w[i]
			if c >= utf8.RuneSelf {
				return strings.ToLower(w)
			}
			upper = upper || (c >= 'A' && c <= 'Z')
		}
		if !upper {
			return w
		}
		lower = append(lower[:0], w...)
		for k, c := range lower {
			if c >= 'A' && c <= 'Z' {
				lower[k] = c + 'a' - 'A'
			}
		}
		return string(lower)
	}
	for i, t := range tokens {
		// Candidates are in configuration order: the first that matches here wins.
		for _, p := range f.byFirstWord[lowerAt(t)] {
			if i+len(p.words) > len(tokens) {
				continue
			}
			ok := true
			for k := 1; k < len(p.words) && ok; k++ {
				ok = lowerAt(tokens[i+k]) == p.words[k]
			}
			if ok {
				end := tokens[i+len(p.words)-1].end
				return Match{Kind: KindKeyword, Rule: p.keyword, Start: t.start, End: end}, p.order, true
			}
		}
	}
	return Match{}, 0, false
}

func tokenize(text string) []token {
	var tokens []token
	start := -1
	for i, r := range text {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			tokens = append(tokens, token{start, i})
			start = -1
		}
	}
	if start >= 0 {
		tokens = append(tokens, token{start, len(text)})
	}
	return tokens
}
