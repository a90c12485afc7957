package security

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
)

// Pattern is one injection signature.
type Pattern struct {
	// ID names the pattern in a Match and in block messages ("ignore-previous-instructions").
	ID string
	// Regex is an RE2 expression. Non-raw patterns see the normalized text (see the package
	// documentation), so they are written in lower case with single spaces between words;
	// their letters with diacritics or look-alikes are folded as the text's are
	// ("olvídate" reads "olvidate").
	Regex string
	// Raw matches Regex against the text as a model reads it (textnorm.Visible: invisible
	// characters dropped, tag characters as ASCII) and as given, instead of the normalized
	// form; use it for signatures made of punctuation, such as chat-template tokens, or for
	// the invisible characters themselves.
	Raw bool
}

// Config configures a Detector.
type Config struct {
	// Patterns extends the default set (or replaces it with DisableDefaults). An ID may
	// repeat: several expressions can share one name.
	Patterns []Pattern
	// DisableDefaults drops the default patterns and the default families.
	DisableDefaults bool
	// IgnoreEncoded turns off decoding rot13 text and runs of base64, base32 and hex (as
	// textnorm.Encodings finds them) and checking the decoded text.
	IgnoreEncoded bool
	// Threshold is the least sum of family scores that blocks (see Family); 0 means
	// DefaultThreshold. Signatures (Patterns and DefaultPatterns) block whatever it is.
	Threshold float64
}

// Match reports the pattern that matched and where.
type Match struct {
	// PatternID is the ID of the matching pattern.
	PatternID string
	// Start and End are byte offsets in the original text (End exclusive). For an encoded
	// match they span the whole encoded run.
	Start, End int
	// Score is the sum of the scores of the families that matched when families, not a
	// signature, made the text an injection; PatternID then joins their ids with "+"
	// ("amoral-persona+never-refuse") and Start and End span all their matches. It is 0
	// for a signature match.
	Score float64
	// Encoding is "base64", "base32", "hex" or "rot13" when the instruction was found in
	// decoded text,
	// "leetspeak" when it was found after folding digits and symbols that stand for letters
	// ("1gn0r3" for "ignore"), "spaced" when it was found with letter-spaced runs read as
	// words ("i g n o r e"), "escaped" when it was found with the text's escapes decoded
	// (percent-encoding, HTML character references, JSON's escapes), "" otherwise.
	Encoding string
}

type compiled struct {
	id      string
	re      *regexp.Regexp
	raw     bool
	needles []string // the pattern is skipped unless one of these occurs
}

// anchoredPattern is a default normalized pattern, tried only where one of its start words
// begins, anchored there.
type anchoredPattern struct {
	id string
	re *regexp.Regexp
}

// compiledFamily is a Family ready to match. An anchored family is tried only where one of its
// start words begins (see startWords), its expression anchored there.
type compiledFamily struct {
	id       string
	score    float64
	re       *regexp.Regexp
	raw      bool
	anchored bool
	document bool     // see Family.Document
	hidden   bool     // see Family.hidden
	needles  []string // see Family.needles
	marks    string   // see Family.marks
}

// Detector finds prompt-injection patterns.
type Detector struct {
	anchored      []anchoredPattern
	startWords    map[string][]int // start word -> indices into anchored, in order
	scanned       []compiled       // raw patterns and user patterns, matched over the whole text
	families      []compiledFamily
	familyStarts  map[string][]int // start word -> indices into families, anchored ones only
	threshold     float64
	decodeEncoded bool
}

// DefaultPatterns returns the built-in signatures, in the order they are tried.
func DefaultPatterns() []Pattern {
	out := make([]Pattern, len(builtinPatterns))
	for i, b := range builtinPatterns {
		out[i] = b.Pattern
	}
	return out
}

// DefaultFamilies returns the built-in weighted phrase families.
func DefaultFamilies() []Family {
	return slices.Clone(defaultFamilies)
}

// MaxFamilyScore is the most the default families can sum to, every one of
// them matching a document: a threshold above it leaves the families unable
// to block.
func MaxFamilyScore() float64 {
	sum := 0.0
	for _, f := range defaultFamilies {
		sum += f.Score
	}
	return math.Round(sum*1e6) / 1e6
}

// New compiles the configured patterns. An empty ID, an invalid regular expression or a
// negative Threshold is an error naming the pattern or the field.
func New(cfg Config) (*Detector, error) {
	if cfg.Threshold < 0 {
		return nil, fmt.Errorf("security: threshold %v is negative", cfg.Threshold)
	}
	d := &Detector{decodeEncoded: !cfg.IgnoreEncoded, startWords: map[string][]int{}, threshold: cfg.Threshold}
	if d.threshold == 0 {
		d.threshold = DefaultThreshold
	}
	if !cfg.DisableDefaults {
		def := defaultDetector()
		// The defaults are read-only once compiled: share them, and copy
		// the scanned list that user patterns extend.
		d.anchored, d.startWords, d.scanned = def.anchored, def.startWords, slices.Clone(def.scanned)
		d.families, d.familyStarts = def.families, def.familyStarts
	}
	for i, p := range cfg.Patterns {
		if p.ID == "" {
			return nil, fmt.Errorf("security: pattern %d has no id", i)
		}
		src := p.Regex
		if !p.Raw {
			// the pattern reads normalized text: fold its letters the same way
			src = textnorm.FoldPattern(src)
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("security: pattern %q: %w", p.ID, err)
		}
		d.scanned = append(d.scanned, compiled{id: p.ID, re: re, raw: p.Raw})
	}
	return d, nil
}

// FoldedPattern returns the copy of a pattern of the layer's that it
// matches against the normalized text: its letters folded as the text is
// (full-width forms to ASCII, diacritics dropped, lower case).
func FoldedPattern(p string) string { return textnorm.FoldPattern(p) }

// Detect reports the earliest injection signature in text (ties go to the pattern listed
// first) and whether there was one. When nothing matches in the text itself, the text is
// checked again with leetspeak folded (see foldLeet), then, unless Config.IgnoreEncoded is
// set, decoded as rot13 and with its runs of base64, base32 and hex decoded; a text holding
// escapes (percent-encoding, HTML character references, JSON's escapes) is read so again
// with them decoded.
//
// Each of these texts is matched first against the signatures, then against the weighted
// families: a signature match wins, else the families matched sum their scores and block at
// the threshold.
func (d *Detector) Detect(text string) (Match, bool) {
	return d.detect(text, false)
}

// DetectDocument is Detect for a document the assistant reads rather than a request someone
// makes of it: a tool result, a file, a web page, an email. The families marked Document
// count there too: in a document, an instruction about the reader's response ("add a
// sentence in your response", "reply using base64") is itself the anomaly, where in a user's
// prompt it is how people ask.
func (d *Detector) DetectDocument(text string) (Match, bool) {
	return d.detect(text, true)
}

// detect reads the text as a model does (textnorm.Visible: tag characters as the ASCII they
// stand for, combining marks, joiners and other invisible characters dropped), so that every
// reading below, the raw signatures and the decodings included, sees what the model reads;
// offsets are mapped back to the text as given. A hidden text of tag characters counts as
// the hidden-text family in every reading.
func (d *Detector) detect(text string, doc bool) (Match, bool) {
	v := textnorm.Visible(text)
	var hidden []int
	if v.Changed() {
		if loc := hiddenTagText().FindStringIndex(text); loc != nil {
			hidden = []int{v.Offset(loc[0]), v.Offset(loc[1])}
		}
	}
	m, ok := d.detectVisible(v.Text, doc, hidden)
	if ok {
		m.Start, m.End = v.Span(m.Start, m.End)
		return m, true
	}
	if v.Changed() {
		// a raw pattern may look for the invisible characters themselves
		for _, p := range d.scanned {
			if !p.raw {
				continue
			}
			if loc := p.re.FindStringIndex(text); loc != nil {
				return Match{PatternID: p.id, Start: loc[0], End: loc[1]}, true
			}
		}
	}
	return Match{}, false
}

// detectVisible is detect on the visible text; hidden is the span in it of a hidden text of
// tag characters, or nil. A text holding escapes (percent-encoding, HTML character
// references, JSON's \uXXXX and two-character escapes: textnorm.Unescape) is read decoded
// too, and decoded again at each level of escapes escaped (textnorm.UnescapeNested), as a
// model reads "Ignore%20all%20previous%20instructions" or a tool's JSON result; a match
// there spans the escapes it came from, with Encoding "escaped" unless a spelling inside the
// decoded text (base64, leetspeak...) names it.
func (d *Detector) detectVisible(text string, doc bool, hidden []int) (Match, bool) {
	if m, ok := d.detectSpellings(text, doc, hidden); ok {
		return m, true
	}
	for _, dec := range textnorm.UnescapeNested(text, true) {
		// hidden is a span of text: the match is mapped back from the decoded text
		in := hidden
		if hidden != nil {
			start, end := dec.From(hidden[0], hidden[1])
			in = []int{start, end}
		}
		if m, ok := d.detectSpellings(dec.Text, doc, in); ok {
			m.Start, m.End = dec.Span(m.Start, m.End)
			if m.Encoding == "" {
				m.Encoding = "escaped"
			}
			return m, true
		}
	}
	return Match{}, false
}

// detectSpellings matches text as it is, with leetspeak folded, letter-spaced runs read as
// words (collapseSpaced) and, unless IgnoreEncoded,
// decoded as rot13 and with its runs of base64, base32 and hex decoded.
func (d *Detector) detectSpellings(text string, doc bool, hidden []int) (Match, bool) {
	if m, ok := d.detectText(text, doc, hidden); ok {
		return m, true
	}
	// Both folds map ASCII bytes to ASCII bytes, so offsets in the folded text are offsets in
	// the original.
	if folded, changed := foldLeet(text); changed {
		if m, ok := d.detectText(folded, doc, hidden); ok {
			m.Encoding = "leetspeak"
			return m, true
		}
	}
	// Letter-spaced text ("i g n o r e   a l l", "i.g.n.o.r.e") read as the words it spells.
	if spaced, offsets, changed := collapseSpaced(text); changed {
		if m, ok := d.detectText(spaced, doc, hidden); ok {
			m.Start, m.End = offsets[m.Start], offsets[m.End-1]+1
			m.Encoding = "spaced"
			return m, true
		}
	}
	if !d.decodeEncoded {
		return Match{}, false
	}
	if m, ok := d.detectText(rot13(text), doc, hidden); ok {
		m.Encoding = "rot13"
		return m, true
	}
	for _, e := range textnorm.Encodings(text) {
		// hidden is not a span of the decoded text, but a match in it spans the encoded run
		if m, ok := d.detectText(e.Text, doc, hidden); ok {
			return Match{PatternID: m.PatternID, Score: m.Score, Start: e.Start, End: e.End, Encoding: e.Kind}, true
		}
	}
	return Match{}, false
}

// detectText matches one form of the text: signatures first, then families (with the
// Document ones when doc is set).
func (d *Detector) detectText(text string, doc bool, hidden []int) (Match, bool) {
	norm := textnorm.Normalize(text)
	if m, ok := d.detectPlain(text, norm); ok {
		return m, true
	}
	return d.scoreFamilies(text, norm, doc, hidden)
}

// scoreFamilies sums the scores of the families that match and reports a match when the sum
// reaches the threshold. hidden is where the hidden-text family matched, or nil.
func (d *Detector) scoreFamilies(text string, norm *textnorm.Normalized, doc bool, hidden []int) (Match, bool) {
	if len(d.families) == 0 {
		return Match{}, false
	}
	locs := make([][]int, len(d.families))
	t := norm.Text
	// An anchored family is tried at every occurrence of its start words, each attempt on
	// a maxAnchoredMatch window; a window it already failed on (a text repeating a phrase)
	// is not tried again. A match a page names rather than gives (see reported) does not
	// count.
	failures := newFailMemo(t)
	walkWords(t, func(i int, word, window string) bool {
		for _, k := range d.familyStarts[word] {
			if locs[k] != nil || (d.families[k].document && !doc) || failures.has(k, window) {
				continue
			}
			if loc := d.families[k].re.FindStringIndex(window); loc != nil {
				if start, end := norm.OrigStart(i), norm.OrigEnd(i+loc[1]); !reported(t[:i], window[:loc[1]], text[end:]) {
					locs[k] = []int{start, end}
				}
			} else {
				failures.add(k, window)
			}
		}
		return true
	})
	var ids []string
	m := Match{Start: -1}
	for k, f := range d.families {
		loc := locs[k]
		switch {
		case f.document && !doc:
			loc = nil
		case f.hidden:
			loc = hidden
		case f.anchored:
		case f.marks != "" && !strings.ContainsAny(text, f.marks):
		case len(f.needles) > 0 && !containsAny(t, f.needles):
		case f.raw:
			loc = f.re.FindStringIndex(text)
		default:
			if loc = f.re.FindStringIndex(t); loc != nil {
				loc = []int{norm.OrigStart(loc[0]), norm.OrigEnd(loc[1])}
			}
		}
		if loc == nil {
			continue
		}
		ids = append(ids, f.id)
		m.Score += f.score
		if m.Start < 0 || loc[0] < m.Start {
			m.Start = loc[0]
		}
		m.End = max(m.End, loc[1])
	}
	// Scores are tenths: round the sum so that 0.3+0.7 reaches 1.
	if len(ids) == 0 || math.Round(m.Score*1e6) < math.Round(d.threshold*1e6) {
		return Match{}, false
	}
	m.PatternID = strings.Join(ids, "+")
	return m, true
}

// defaultDetector compiles the built-in signatures once per process: every
// pipeline built with a security layer shares them.
var defaultDetector = sync.OnceValue(func() *Detector {
	d := &Detector{startWords: map[string][]int{}}
	for _, b := range builtinPatterns {
		if len(b.starts) > 0 {
			d.startWords = indexStarts(d.startWords, b.starts, len(d.anchored))
			d.anchored = append(d.anchored, anchoredPattern{id: b.ID, re: regexp.MustCompile(`^(?:` + b.Regex + `)`)})
			continue
		}
		d.scanned = append(d.scanned, compiled{id: b.ID, re: regexp.MustCompile(b.Regex), raw: b.Raw, needles: b.needles})
	}
	d.familyStarts = map[string][]int{}
	for i, f := range defaultFamilies {
		c := compiledFamily{id: f.ID, score: f.Score, raw: f.Raw, document: f.Document, hidden: f.hidden, needles: f.needles, marks: f.marks}
		if starts, ok := startWords(f.Regex); ok && !f.Raw {
			c.anchored = true
			c.re = regexp.MustCompile(`^(?:` + f.Regex + `)`)
			d.familyStarts = indexStarts(d.familyStarts, starts, i)
		} else {
			c.re = regexp.MustCompile(f.Regex)
		}
		d.families = append(d.families, c)
	}
	return d
})

func indexStarts(index map[string][]int, starts []string, i int) map[string][]int {
	for _, w := range starts {
		if l := index[w]; len(l) == 0 || l[len(l)-1] != i {
			index[w] = append(l, i)
		}
	}
	return index
}

func (d *Detector) detectPlain(text string, norm *textnorm.Normalized) (Match, bool) {
	best := Match{Start: -1}
	if len(d.anchored) > 0 {
		if m, ok := d.detectAnchored(text, norm); ok {
			best = m
		}
	}
	for _, p := range d.scanned {
		if len(p.needles) > 0 && !containsAny(text, p.needles) {
			continue
		}
		var loc []int
		if p.raw {
			loc = p.re.FindStringIndex(text)
		} else if loc = p.re.FindStringIndex(norm.Text); loc != nil {
			loc = []int{norm.OrigStart(loc[0]), norm.OrigEnd(loc[1])}
		}
		if loc != nil && (best.Start < 0 || loc[0] < best.Start) {
			best = Match{PatternID: p.id, Start: loc[0], End: loc[1]}
		}
	}
	return best, best.Start >= 0
}

// maxAnchoredMatch bounds the text an anchored default pattern is tried on; every default
// pattern matches far less than this, and the bound keeps each attempt cheap.
const maxAnchoredMatch = 256

// detectAnchored walks the words of the normalized text and tries, at each word that starts
// some default pattern, those patterns anchored there. The first success is the leftmost
// match of all default patterns, a reported one (see reported) aside.
func (d *Detector) detectAnchored(text string, norm *textnorm.Normalized) (Match, bool) {
	var m Match
	found := false
	failures := newFailMemo(norm.Text)
	walkWords(norm.Text, func(i int, word, window string) bool {
		for _, k := range d.startWords[word] {
			if failures.has(k, window) {
				continue
			}
			if loc := d.anchored[k].re.FindStringIndex(window); loc != nil {
				start, end := norm.OrigStart(i), norm.OrigEnd(i+loc[1])
				if reported(norm.Text[:i], window[:loc[1]], text[end:]) {
					continue
				}
				m, found = Match{PatternID: d.anchored[k].id, Start: start, End: end}, true
				return false
			}
			failures.add(k, window)
		}
		return true
	})
	return m, found
}

// failMemo remembers the windows on which an anchored expression failed, so that a text
// repeating a phrase ("repeat repeat ...", "no no ...") pays one attempt per distinct
// window rather than one per word. It holds at most maxFailMemo windows, and only texts of
// memoMinText bytes or more use it: a shorter one costs fewer attempts than the map.
type failMemo map[failKey]struct{}

type failKey struct {
	k      int
	window string
}

const (
	maxFailMemo = 1 << 12
	memoMinText = 8 << 10
)

// newFailMemo returns the memo for the normalized text t: nil, remembering nothing, when t
// is short.
func newFailMemo(t string) failMemo {
	if len(t) < memoMinText {
		return nil
	}
	return failMemo{}
}

func (f failMemo) has(k int, window string) bool {
	_, ok := f[failKey{k, window}]
	return ok
}

func (f failMemo) add(k int, window string) {
	if f != nil && len(f) < maxFailMemo {
		f[failKey{k, window}] = struct{}{}
	}
}

// walkWords calls fn with the offset of each word of the normalized text t, the word, and
// the text from there on, cut at maxAnchoredMatch bytes, until fn returns false.
func walkWords(t string, fn func(i int, word, window string) bool) {
	for i := 0; i < len(t); {
		j := strings.IndexByte(t[i:], ' ')
		if j < 0 {
			j = len(t) - i
		}
		if !fn(i, t[i:i+j], t[i:min(len(t), i+maxAnchoredMatch)]) {
			return
		}
		i += j + 1
	}
}

func containsAny(s string, needles []string) bool {
	for _, n := range needles {
		if strings.Contains(s, n) {
			return true
		}
	}
	return false
}

// leetLetter maps the digits and symbols commonly written for letters to those letters.
func leetLetter(b byte) (byte, bool) {
	switch b {
	case '0':
		return 'o', true
	case '1':
		return 'i', true
	case '3':
		return 'e', true
	case '4', '@':
		return 'a', true
	case '5', '$':
		return 's', true
	case '7':
		return 't', true
	}
	return 0, false
}

// foldLeet replaces leet characters by letters inside words that mix them with ASCII letters
// ("1gn0r3", "pr3v10u5", "@ll"); words of digits alone, such as numbers, stay as they are. It
// reports whether anything changed.
func foldLeet(text string) (string, bool) {
	var out []byte
	for i := 0; i < len(text); {
		j := i
		letters, leet := false, false
		for j < len(text) {
			c := text[j]
			if _, ok := leetLetter(c); ok {
				leet = true
			} else if (c|0x20) >= 'a' && (c|0x20) <= 'z' {
				letters = true
			} else {
				break
			}
			j++
		}
		if j == i {
			i++
			continue
		}
		if letters && leet {
			if out == nil {
				out = []byte(text)
			}
			for k := i; k < j; k++ {
				if l, ok := leetLetter(text[k]); ok {
					out[k] = l
				}
			}
		}
		i = j
	}
	if out == nil {
		return text, false
	}
	return string(out), true
}

// rot13 rotates the ASCII letters of text by 13 places; every other byte stays.
func rot13(text string) string {
	out := []byte(text)
	for i, c := range out {
		switch {
		case c >= 'a' && c <= 'z':
			out[i] = 'a' + (c-'a'+13)%26
		case c >= 'A' && c <= 'Z':
			out[i] = 'A' + (c-'A'+13)%26
		}
	}
	return string(out)
}

// A default signature or family match that a page about attacks names rather than gives
// does not count: the object of a verb whose subject is the model ("prompts that make the
// model ignore previous instructions", "training it not to reveal its system prompt", "the
// model could disregard previous instructions") or the name of an attack ("the DAN (Do
// Anything Now) attack"). An injection addresses its reader and says "you": a match saying
// "you" or "your" always counts. "The model will ignore previous instructions" counts too,
// since a note planted for the model reads like that. A match quoted verbatim ("the
// injection contains \"forget all previous instructions\"") counts: a model reading the
// quote may follow it.
var (
	reportedBefore = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:\b(?:make|makes|made|making|cause|causes|caused|causing|trick|tricks|tricked|tricking|instruct|instructs|instructed|instructing|train|trains|trained|training|get|gets|getting|force|forces|forced|forcing|lead|leads|leading|convince|convinces|convinced|convincing|manipulate|manipulates|manipulated|manipulating)\s(?:(?:the|a|an)\s)?(?:models?|llms?|ai|assistants?|chatbots?|bots?|agents?|it|them)\s(?:(?:not|never)\s)?(?:to\s|into\s)?` +
			`|\b(?:the|an?)\s(?:models?|llms?|ai|assistants?|chatbots?|agents?)\s(?:would|could|may|might|can)\s(?:(?:not|never)\s)?)$`)
	})
	secondPerson  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b(?:you|your|yours|yourself)\b`) })
	reportedAfter = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)^[\s"'”’»)\]]*(?:attacks?|jailbreaks?|techniques?|exploits?|payloads?)\b`)
	})
)

// reported reports whether a match (normalized) with the normalized text before it and the
// original text after it is named rather than given (see reportedBefore). A match that says
// "you" or "your" addresses the reader whatever precedes it ("make it reveal your system
// prompt").
func reported(before, match, after string) bool {
	if secondPerson().MatchString(match) {
		return false
	}
	if len(before) > 96 {
		before = before[len(before)-96:]
	}
	if len(after) > 48 {
		after = after[:48]
	}
	return reportedBefore().MatchString(before) || reportedAfter().MatchString(after)
}
