package redact

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
)

// Pattern is one secret-masking rule.
type Pattern struct {
	// ID names the rule; it appears in the placeholder "[REDACTED:<id>]".
	ID string
	// Regex is an RE2 expression. A capture group named "secret" limits the masking to it.
	Regex string
}

// Config configures a Redactor.
type Config struct {
	// Patterns extends the default rules (or replaces them with DisableDefaults).
	Patterns []Pattern
	// DisableDefaults drops the default rules.
	DisableDefaults bool
}

type rule struct {
	id          string
	re          *regexp.Regexp
	secret      int // submatch index of the "secret" group, or 0 for the whole match
	needles     []string
	anchor      string         // exact text the rule starts with
	anchored    *regexp.Regexp // re anchored at the start, for keyed and anchored rules
	placeholder string
	// open finds the matches a released text would cut (Redactor.releasable); nil for a
	// rule no match of which holds a line break.
	open *openProg
}

// keyRef names one key of a keyed rule.
type keyRef struct {
	key  string
	rule int
}

// Redactor masks secrets.
type Redactor struct {
	rules []rule
	// keyRule is the index of the default rule "private-key", which also masks the body
	// of a key without its BEGIN line (keyBodySpans); -1 without the defaults.
	keyRule int
	// keysByFirst indexes the keys of keyed rules by their first letter.
	keysByFirst [26][]keyRef
	keyed       bool
}

// DefaultPatterns returns the built-in rules, in priority order: the credential shapes
// agentc knows (credential.Shapes, the list vet and the log scrubber read too: PEM private
// key blocks, including a block cut off before its END line, OpenAI- and Anthropic-style
// "sk-" keys, AWS access key ids, GitHub, GitLab, Slack, Google, Stripe and Hugging Face
// tokens, JWTs), then AWS secret keys, bearer and basic authorization values, passwords in
// URLs and generic "password=", "api_key: ", "token=" assignments.
func DefaultPatterns() []Pattern {
	out := make([]Pattern, len(builtinPatterns))
	for i, b := range builtinPatterns {
		out[i] = b.Pattern
	}
	return out
}

// New compiles the rules. An empty ID or an invalid regular expression is an error naming
// the rule.
func New(cfg Config) (*Redactor, error) {
	r := &Redactor{keyRule: -1}
	if !cfg.DisableDefaults {
		// The compiled defaults are read-only: share them, and copy the
		// rule list that user patterns extend.
		def := defaultRedactor()
		r.keysByFirst, r.keyed, r.rules, r.keyRule = def.keysByFirst, def.keyed, slices.Clone(def.rules), def.keyRule
	}
	for i, p := range cfg.Patterns {
		if p.ID == "" {
			return nil, fmt.Errorf("redact: pattern %d has no id", i)
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("redact: pattern %q: %w", p.ID, err)
		}
		r.rules = append(r.rules, compileRule(p, re, nil))
	}
	return r, nil
}

// defaultRedactor compiles the built-in rules once per process.
var defaultRedactor = sync.OnceValue(func() *Redactor {
	r := &Redactor{keyRule: -1}
	for _, b := range builtinPatterns {
		ru := compileRule(b.Pattern, regexp.MustCompile(b.Regex), b.needles)
		if len(b.keys) > 0 || b.anchor != "" {
			ru.anchored = regexp.MustCompile(`^(?:` + b.Regex + `)`)
			ru.anchor = b.anchor
			ru.open = newOpenProg(b.Regex, true)
		}
		for _, k := range b.keys {
			r.keysByFirst[k[0]-'a'] = append(r.keysByFirst[k[0]-'a'], keyRef{key: k, rule: len(r.rules)})
			r.keyed = true
		}
		if b.ID == "private-key" {
			r.keyRule = len(r.rules)
		}
		r.rules = append(r.rules, ru)
	}
	return r
})

func compileRule(p Pattern, re *regexp.Regexp, needles []string) rule {
	secret := re.SubexpIndex("secret")
	if secret < 0 {
		secret = 0
	}
	return rule{id: p.ID, re: re, secret: secret, needles: needles, placeholder: Placeholder(p.ID), open: newOpenProg(p.Regex, false)}
}

// Placeholder returns the text that replaces a secret found by rule id: "[REDACTED:<id>]".
func Placeholder(id string) string { return "[REDACTED:" + id + "]" }

type span struct {
	start, end    int // the masked part: the "secret" group, or the whole match
	match, matchE int // the whole match
	rule          int
	// inside: a run of an encoding whose decoding holds a secret (Redactor.encoded) with
	// decoded text before and after it (mask.Item.Inside).
	inside bool
}

// Redact returns text with every secret replaced by its placeholder, and the number of
// replacements. Overlapping matches are resolved in favour of the one that starts first, then
// the longer, then the rule listed first; one that starts inside it and runs past its end
// extends it, so no part of either is left. The text is also read folded
// (textnorm.FoldSeparators), so that a secret cannot be hidden by zero-width or other
// invisible characters inside it, written in full-width or look-alike letters or in tag
// characters (read as the ASCII they stand for, as a model reads them), or spaced by another
// space than the ASCII one, and, when it holds escapes, decoded
// (textnorm.UnescapeNested: percent-encoding, HTML character references, JSON's escapes, and
// these escaped again, as a JSON document quoted in a JSON string is): what
// matches there masks the span of the text as given that it came from, escapes and all. A
// run of base64 (standard or URL-safe), base32 or hex (also with its bytes separated) whose
// decoding is text is read as that text too (textnorm.Encodings), and masked whole when it
// holds a secret.
func (r *Redactor) Redact(text string) (string, int) {
	spans := r.find(text)
	if len(spans) == 0 {
		return text, 0
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, sp := range spans {
		b.WriteString(text[last:sp.start])
		b.WriteString(r.rules[sp.rule].placeholder)
		last = sp.end
	}
	b.WriteString(text[last:])
	return b.String(), len(spans)
}

// find returns the secrets of text Redact masks, in order and not overlapping.
func (r *Redactor) find(text string) []span {
	spans := r.readings(text)
	if len(spans) == 0 {
		return nil
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if a.end != b.end {
			return b.end - a.end
		}
		return a.rule - b.rule
	})
	out, last := spans[:0], 0
	for _, sp := range spans {
		switch {
		case sp.start >= last:
			out = append(out, sp)
			last = sp.end
		case sp.end > last:
			// It starts inside the previous one and runs past its end: what runs past is
			// part of this secret, so the previous placeholder covers both, and the match
			// runs over both matches (this one's may start first: a rule's "secret" group).
			prev := &out[len(out)-1]
			prev.end, prev.match, prev.matchE = sp.end, min(prev.match, sp.match), max(prev.matchE, sp.matchE)
			prev.inside = prev.inside && sp.inside
			last = sp.end
		}
	}
	return out
}

// readings returns the matches of every rule in text, in text folded, in text decoded and
// folded (and decoded again while it holds escapes: textnorm.UnescapeNested), and in the text
// its base64 and hex runs and hex dumps decode to (textnorm.Encodings), as spans of text,
// unordered and possibly overlapping.
func (r *Redactor) readings(text string) []span { return r.readingsAt(text, 0) }

// maxEncodedDepth bounds the encodings read inside one another: base64 of base64 is read,
// a third layer is not.
const maxEncodedDepth = 2

func (r *Redactor) readingsAt(text string, depth int) []span {
	var spans []span
	var buf [2 + textnorm.MaxUnescapeLevels]form
	for _, rd := range formsOf(text, buf[:0]) {
		for _, sp := range r.spans(rd.text) {
			sp.start, sp.end = rd.span(sp.start, sp.end)
			sp.match, sp.matchE = rd.span(sp.match, sp.matchE)
			spans = append(spans, sp)
		}
		if rd.encoded {
			spans = r.encoded(spans, rd.text, rd.span, depth)
		}
	}
	return spans
}

// form is a text Redact reads a text as, and the mapping of its spans to the text.
type form struct {
	text string
	span func(start, end int) (int, int)
	// encoded: its base64 and hex runs are read too (once a text: in the folded form).
	encoded bool
}

func sameSpan(start, end int) (int, int) { return start, end }

// formsOf appends to out the forms Redact reads text as: text itself, folded (when folding
// changes it), and decoded and folded (while it holds escapes: textnorm.UnescapeNested).
func formsOf(text string, out []form) []form {
	f := textnorm.FoldSeparators(text, false)
	out = append(out, form{text: text, span: sameSpan, encoded: f.Text == text})
	if f.Text != text {
		out = append(out, form{text: f.Text, span: f.Span, encoded: true})
	}
	for _, d := range textnorm.UnescapeNested(text, true) {
		f := textnorm.FoldSeparators(d.Text, false)
		out = append(out, form{text: f.Text, span: func(start, end int) (int, int) { return d.Span(f.Span(start, end)) }, encoded: true})
	}
	return out
}

// encoded appends to spans each base64 or hex run of form whose decoding holds a secret,
// mapped by mapSpan: the whole run is masked, with the placeholder of the first rule that
// matched in it; a run wrapped over lines whose short last line reads as a word of the text
// after it is masked up to that line when the run without it holds a secret
// (textnorm.Encoded.Readings).
func (r *Redactor) encoded(spans []span, form string, mapSpan func(start, end int) (int, int), depth int) []span {
	if depth >= maxEncodedDepth {
		return spans
	}
	for _, enc := range textnorm.Encodings(form) {
		var inner []span
		var e textnorm.Encoded
		for _, e = range enc.Readings() {
			if inner = r.readingsAt(e.Text, depth+1); len(inner) > 0 {
				break
			}
		}
		if len(inner) == 0 {
			continue
		}
		rule, from, to := inner[0].rule, inner[0].match, inner[0].matchE
		for _, sp := range inner[1:] {
			rule, from, to = min(rule, sp.rule), min(from, sp.match), max(to, sp.matchE)
		}
		s, end := mapSpan(e.Start, e.End)
		spans = append(spans, span{start: s, end: end, match: s, matchE: end, rule: rule, inside: from > 0 && to < len(e.Text)})
	}
	return spans
}

// spans returns the matches of every rule in text, unordered.
func (r *Redactor) spans(text string) []span {
	var spans []span
	if r.keyed {
		spans = r.keyedSpans(text, spans)
	}
	if r.keyRule >= 0 {
		spans = keyBodySpans(text, r.keyRule, spans)
	}
	for i, ru := range r.rules {
		if ru.anchored != nil {
			if ru.anchor != "" {
				spans = ru.anchorSpans(text, i, spans)
			}
			continue
		}
		if len(ru.needles) > 0 && !containsAny(text, ru.needles) {
			continue
		}
		for _, loc := range ru.re.FindAllStringSubmatchIndex(text, -1) {
			spans = ru.appendSpan(spans, loc, 0, i)
		}
	}
	return spans
}

// RedactValue returns a copy of a JSON-like value (map[string]any, []any, map[string]string,
// []string, string) with every string redacted, and the number of replacements. Map keys are
// redacted too: a key holding a secret is renamed to its redacted form, followed by "#2",
// "#3"... when that name is taken, so no value is lost. An integral number is read as its
// digits, and becomes its redacted string when a rule matches them (an account number a
// pattern masks, sent as a JSON number). Other values (other numbers, booleans, nil) are
// returned unchanged. The consecutive strings of an array are also read side by side, as
// the model reads a list of lines, and a secret cut across them (a private key sent as its
// lines) is masked in every element it runs over, its placeholder in the first
// (mask.Elements). v itself is never modified: containers are always copied.
func (r *Redactor) RedactValue(v any) (any, int) {
	return mask.Value(v, r.Redact, r.items)
}

func (ru *rule) appendSpan(spans []span, loc []int, offset, i int) []span {
	s, e := loc[2*ru.secret], loc[2*ru.secret+1]
	if s < 0 || s == e {
		return spans
	}
	return append(spans, span{start: offset + s, end: offset + e, match: offset + loc[0], matchE: offset + loc[1], rule: i})
}

// keyWindow bounds the text an anchored rule is first tried on; a match that reaches the end
// of the window is retried on the rest of the text, so the bound never truncates a secret.
const keyWindow = 1024

// matchAt runs the anchored rule at offset p.
func (ru *rule) matchAt(text string, p int) []int {
	window := text[p:min(len(text), p+keyWindow)]
	loc := ru.anchored.FindStringSubmatchIndex(window)
	if loc != nil && loc[1] == len(window) && len(window) < len(text)-p {
		loc = ru.anchored.FindStringSubmatchIndex(text[p:])
	}
	return loc
}

// keyedSpans walks the word starts of text once and tries, at each word that begins with a
// key (case-insensitively), the rules of that key anchored there. A word of a snake_case name
// starts one too (DB_PASSWORD=..., SLACK_TOKEN: ..., {"db_password": ...}, as environment
// variables and configuration keys are written): the rule, anchored, still needs its "=" or
// ":" right after the key word, so "password_hint=" and "max_tokens=" are none.
func (r *Redactor) keyedSpans(text string, spans []span) []span {
	lower := asciiLower(text)
	var skipUntil []int // per rule: offsets before this are inside its previous match
	for p := 0; p < len(lower); p++ {
		c := lower[p]
		if c < 'a' || c > 'z' || (p > 0 && isWordByte(lower[p-1]) && lower[p-1] != '_') {
			continue
		}
		keys := r.keysByFirst[c-'a']
		if len(keys) > 0 && p > 0 && lower[p-1] == ':' && inARN(lower, p) {
			continue
		}
		for _, ref := range keys {
			if !strings.HasPrefix(lower[p:], ref.key) {
				continue
			}
			if skipUntil == nil {
				skipUntil = make([]int, len(r.rules))
			}
			if p < skipUntil[ref.rule] {
				continue
			}
			ru := &r.rules[ref.rule]
			if loc := ru.matchAt(text, p); loc != nil {
				spans = ru.appendSpan(spans, loc, p, ref.rule)
				skipUntil[ref.rule] = p + loc[1]
			}
		}
	}
	return spans
}

// inARN reports whether the word at p of lower, right after a colon, is the resource of an
// Amazon Resource Name (arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE, the account twelve
// digits or empty): "secret:" there is the resource type of a Secrets Manager ARN
// (arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf), whose name is no
// secret, not a key word with its value. The ARN is read back at most maxARNPrefix bytes, to
// the start of its token.
func inARN(lower string, p int) bool {
	start := p - 1
	for start > 0 && p-start < maxARNPrefix {
		c := lower[start-1]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '`' ||
			c == '(' || c == '[' || c == '{' || c == '<' || c == ',' || c == '=' {
			break
		}
		start--
	}
	fields := strings.SplitN(lower[start:p-1], ":", 6)
	if len(fields) < 5 || fields[0] != "arn" || fields[1] == "" || fields[2] == "" {
		return false
	}
	account := fields[4]
	if account == "" {
		return true
	}
	if len(account) != 12 {
		return false
	}
	for i := 0; i < len(account); i++ {
		if account[i] < '0' || account[i] > '9' {
			return false
		}
	}
	return true
}

// maxARNPrefix bounds how far back inARN reads: the partition, service, region and account of
// an ARN take under 100 bytes (arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:).
const maxARNPrefix = 128

// anchorSpans tries the rule at each occurrence of its anchor text.
func (ru *rule) anchorSpans(text string, i int, spans []span) []span {
	for from := 0; ; {
		k := strings.Index(text[from:], ru.anchor)
		if k < 0 {
			return spans
		}
		p := from + k
		from = p + 1
		if loc := ru.matchAt(text, p); loc != nil {
			spans = ru.appendSpan(spans, loc, p, i)
			from = max(from, p+loc[1])
		}
	}
}

func isWordByte(b byte) bool {
	return b == '_' || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9')
}

// asciiLower lower-cases ASCII letters only, so that byte offsets stay those of text.
// A text without an upper-case letter is returned as it is, without a copy.
func asciiLower(text string) string {
	i := strings.IndexFunc(text, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	if i < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	b.WriteString(text[:i])
	for k := i; k < len(text); k++ {
		c := text[k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

func containsAny(s string, needles []string) bool {
	for _, n := range needles {
		if strings.Contains(s, n) {
			return true
		}
	}
	return false
}
