package pii

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
)

// Kind names a category of personal data.
type Kind string

// The kinds a Scanner detects.
const (
	KindEmail Kind = "email"
	KindPhone Kind = "phone"
	KindSSN   Kind = "ssn"
	KindCard  Kind = "card"
	KindIPv4  Kind = "ipv4"
	KindIPv6  Kind = "ipv6"
	KindIBAN  Kind = "iban"
)

// kindOrder is also the tie-break priority when two detectors claim the same span.
var kindOrder = []Kind{KindCard, KindIBAN, KindSSN, KindEmail, KindIPv6, KindIPv4, KindPhone}

// AllKinds returns every kind, in a stable order.
func AllKinds() []Kind { return slices.Clone(kindOrder) }

// Config selects what a Scanner detects.
type Config struct {
	// Kinds lists the kinds to detect; empty means all of them.
	Kinds []Kind
	// Regions lists the ISO 3166-1 alpha-2 regions whose national phone formats are
	// recognised (numbers in international format are recognised whatever their country);
	// empty means DefaultRegions.
	Regions []string
}

// Match is one detected item.
type Match struct {
	Kind Kind
	// Start and End are byte offsets of the item in the scanned string (End exclusive).
	Start, End int
	// Path is the JSON Pointer (RFC 6901) of the string inside a value passed to ScanValue;
	// it is empty for Find.
	Path string
}

// Scanner finds personal data. The zero value detects nothing; use New.
type Scanner struct {
	enabled map[Kind]bool
	phones  *phoneFinder
}

// New returns a Scanner for the configured kinds. An unknown kind is an error.
func New(cfg Config) (*Scanner, error) {
	s := &Scanner{enabled: map[Kind]bool{}}
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = kindOrder
	}
	for _, k := range kinds {
		if !slices.Contains(kindOrder, k) {
			return nil, fmt.Errorf("pii: unknown kind %q", k)
		}
		s.enabled[k] = true
	}
	if s.enabled[KindPhone] {
		f, err := newPhoneFinder(cfg.Regions)
		if err != nil {
			return nil, err
		}
		s.phones = f
	}
	return s, nil
}

type detector func(text string, add func(Kind, int, int))

var detectors = map[Kind]detector{
	KindEmail: findEmails,
	KindSSN:   findSSNs,
	KindCard:  findCards,
	KindIBAN:  findIBANs,
	KindIPv4:  findIPv4s,
	KindIPv6:  findIPv6s,
}

// Find returns the personal data in text, sorted by position and never overlapping: when two
// detections overlap, the one that starts first wins, then the longer, then the more specific
// kind (card, iban, ssn, email, ipv6, ipv4, phone), and one that runs past its end extends it.
//
// The detectors read the text folded (textnorm.FoldSeparators, and foldText: a combining
// mark on a digit and the replacement character U+FFFD are skipped too), so that a number or
// an address cannot be hidden by invisible characters or written in look-alikes: full-width
// digits and signs ("４１１１", "＠", "＋") and the digits of other scripts read as ASCII,
// no-break and other space separators as spaces, dashes as hyphens, an underscore between
// digits as a hyphen, tag characters as the ASCII they stand for (a model reads them so), and
// zero-width and other invisible characters are skipped (the text is
// also read with the format characters kept, so that one never glues an item to the word
// before it). A text holding escapes is also read decoded (textnorm.Unescape). Offsets are those
// of the text as given; a span covers the characters skipped inside it, and the whole escape
// a decoded character came from. A run of base64 (standard or URL-safe), base32 or hex (also
// with its bytes separated) whose decoding is text (textnorm.Encodings) is read as that text too: when it holds an item, the match is
// the whole run, of the most specific kind found in it; a run wrapped over lines whose short
// last line reads as a word of the text after it ends before that line when the run without
// it holds an item (textnorm.Encoded.Readings).
func (s *Scanner) Find(text string) []Match { return s.find(text, 0, phoneMemo{}) }

// maxEncodedDepth bounds the encodings read inside one another: base64 of base64 is read, a
// third layer is not.
const maxEncodedDepth = 2

// find reads text with memo, the verdicts on the phone candidates read so far (the same
// candidate recurs in a table or a dump, and in every pass of Redact).
func (s *Scanner) find(text string, depth int, memo phoneMemo) []Match {
	var found []Match
	for _, f := range forms(blankPlaceholders(text)) {
		s.detect(f.text, memo, func(k Kind, start, end int) {
			start, end = f.span(start, end)
			found = append(found, Match{Kind: k, Start: start, End: end})
		})
		if !f.encoded || depth >= maxEncodedDepth {
			continue
		}
		for _, e := range textnorm.Encodings(f.text) {
			for _, r := range e.Readings() {
				if inner := s.find(r.Text, depth+1, memo); len(inner) > 0 {
					start, end := f.span(r.Start, r.End)
					found = append(found, Match{Kind: firstKind(inner), Start: start, End: end})
					break
				}
			}
		}
	}
	return resolve(found)
}

// resolve sorts found by position and resolves overlaps: the match that starts first wins,
// then the longer, then the more specific kind; one that starts inside it and runs past its end
// extends it, as what runs past is part of an item that must not survive.
func resolve(found []Match) []Match {
	if len(found) < 2 {
		return found
	}
	slices.SortFunc(found, func(a, b Match) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		if a.End != b.End {
			return b.End - a.End
		}
		return slices.Index(kindOrder, a.Kind) - slices.Index(kindOrder, b.Kind)
	})
	out := found[:1]
	for _, m := range found[1:] {
		switch prev := &out[len(out)-1]; {
		case m.Start >= prev.End:
			out = append(out, m)
		case m.End > prev.End:
			prev.End = m.End
		}
	}
	return out
}

// detect runs the enabled detectors on text.
func (s *Scanner) detect(text string, memo phoneMemo, add func(Kind, int, int)) {
	for _, k := range kindOrder {
		switch {
		case !s.enabled[k]:
		case k == KindPhone:
			s.phones.find(text, memo, add)
		default:
			detectors[k](text, add)
		}
	}
}

// firstKind returns the most specific kind of ms, in kindOrder.
func firstKind(ms []Match) Kind {
	best := ms[0].Kind
	for _, m := range ms[1:] {
		if slices.Index(kindOrder, m.Kind) < slices.Index(kindOrder, best) {
			best = m.Kind
		}
	}
	return best
}

// maxKindLen is the length of the longest kind's name.
var maxKindLen = func() int {
	n := 0
	for _, k := range kindOrder {
		n = max(n, len(k))
	}
	return n
}()

// Placeholder returns the text that replaces an item of kind k: "[REDACTED:<kind>]".
func Placeholder(k Kind) string { return placeholderPrefix + string(k) + "]" }

const placeholderPrefix = "[REDACTED:"

// blankPlaceholders returns text with the kind of each Placeholder in it written as as many
// letters "z": a placeholder names nothing to the detectors, neither a phone word nor an
// SSN's label or a card's ("[REDACTED:phone] 94727916"), nor is the "4" of "[REDACTED:ipv4]"
// a digit. Redact reads the placeholders it wrote so in its later passes, and a text whose
// lines are read each after the lines before as the model wrote them (the streamed output)
// is masked as the whole text is. Offsets are unchanged.
func blankPlaceholders(text string) string {
	i := strings.Index(text, placeholderPrefix)
	if i < 0 {
		return text
	}
	b := []byte(text)
	for i >= 0 {
		k := i + len(placeholderPrefix)
		// a kind's "]" is looked for as far as the longest kind goes, not to the next "]"
		end := strings.IndexByte(text[k:min(len(text), k+maxKindLen+1)], ']')
		if end >= 0 && slices.Contains(kindOrder, Kind(text[k:k+end])) {
			for j := k; j < k+end; j++ {
				b[j] = 'z'
			}
			k += end + 1
		}
		next := strings.Index(text[k:], placeholderPrefix)
		if next < 0 {
			break
		}
		i = k + next
	}
	return string(b)
}

// Redact returns text with every item Find reports replaced by its Placeholder, and the
// number of replacements. Removing an item can leave a neighbour that no longer runs into it
// and now reads as an item of its own ("+44 20 7946 5631-+44 20 7946 7431", where the second
// number was glued to the first); the result is scanned again until nothing is found, so no
// detectable item survives. A placeholder names nothing in those scans (blankPlaceholders).
func (s *Scanner) Redact(text string) (string, int) { return s.redact(text, phoneMemo{}) }

// redact is Redact with memo, the verdicts on the phone candidates read before.
func (s *Scanner) redact(text string, memo phoneMemo) (string, int) {
	total := 0
	for pass := 0; pass < maxRedactPasses; pass++ {
		out, n := s.redactOnce(text, memo)
		if n == 0 {
			break
		}
		text, total = out, total+n
	}
	return text, total
}

// redactedSpans returns the items Redact masks in text, in all its passes, at their offsets
// in text: an item found once its neighbour is masked ("+44 20 7946 5631-+44 20 7946 7431")
// covers the text its placeholders stand for. memo holds the verdicts on phone candidates
// read before (they do not depend on the text around them).
func (s *Scanner) redactedSpans(text string, memo phoneMemo) []Match {
	ms := s.find(text, 0, memo)
	if len(ms) == 0 {
		return nil
	}
	out := slices.Clone(ms)
	// from[i] and to[i] are the span of text that byte i of cur stands for
	cur, from, to := text, make([]int, len(text)), make([]int, len(text))
	for i := range from {
		from[i], to[i] = i, i+1
	}
	for pass := 1; pass < maxRedactPasses; pass++ {
		var b strings.Builder
		var nf, nt []int
		last := 0
		for _, m := range ms {
			b.WriteString(cur[last:m.Start])
			nf, nt = append(nf, from[last:m.Start]...), append(nt, to[last:m.Start]...)
			p := Placeholder(m.Kind)
			b.WriteString(p)
			for range len(p) {
				nf, nt = append(nf, from[m.Start]), append(nt, to[m.End-1])
			}
			last = m.End
		}
		b.WriteString(cur[last:])
		cur, from, to = b.String(), append(nf, from[last:]...), append(nt, to[last:]...)
		if ms = s.find(cur, 0, memo); len(ms) == 0 {
			break
		}
		for _, m := range ms {
			out = append(out, Match{Kind: m.Kind, Start: from[m.Start], End: to[m.End-1]})
		}
	}
	return resolve(out)
}

// maxRedactPasses bounds the rescans of Redact; each pass removes digits or an "@", so a
// text needs few.
const maxRedactPasses = 8

func (s *Scanner) redactOnce(text string, memo phoneMemo) (string, int) {
	ms := s.find(text, 0, memo)
	if len(ms) == 0 {
		return text, 0
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, m := range ms {
		b.WriteString(text[last:m.Start])
		b.WriteString(Placeholder(m.Kind))
		last = m.End
	}
	b.WriteString(text[last:])
	return b.String(), len(ms)
}

// ScanValue walks a JSON-like value (map[string]any, []any, map[string]string, []string,
// string, json.Number and integral numbers, which are scanned as their decimal digits) and
// returns the matches in its strings, each with the JSON Pointer of its string. Map keys are
// scanned too (an object keyed by email address carries the addresses): a match in a key
// has the pointer of the object that holds it, so that the pointer never quotes the data. A
// jsonvalue.Object (jsonvalue.DecodeOrdered) is walked in the order written, a key written twice
// read with each of its values. Maps are walked in key order so the result is
// deterministic. The consecutive strings of an array, and the consecutive string values of an
// object in the order of its keys, are read side by side (as RedactValue reads them,
// mask.ReadElements): an item in one of them has the pointer of that element, and one cut
// across them the pointer of the array or object and offsets in its strings joined. A string
// that is itself a JSON object or array is read as one (mask.SplitInJSON): an item cut across
// its strings has the string's pointer.
// Other types are ignored.
func (s *Scanner) ScanValue(v any) []Match {
	var out []Match
	s.walk(v, "", func(path, text string) {
		ms := s.Find(text)
		for _, m := range ms {
			m.Path = path
			out = append(out, m)
		}
		if len(ms) == 0 {
			// a string that is JSON text, read as the model reads it (mask.SplitInJSON)
			if it, ok := mask.SplitInJSON(text, s.items); ok {
				out = append(out, Match{Kind: Kind(it.Label), Start: it.From, End: it.To, Path: path})
			}
		}
	}, func(path string, run, names, keys []string) {
		var found []mask.ElementItem
		if keys != nil {
			_, found = mask.ReadFields(run, keys, s.items)
		} else {
			_, found = mask.ReadElements(run, s.items)
		}
		for _, it := range found {
			m := Match{Kind: Kind(it.Label), Start: it.From, End: it.To, Path: path}
			if it.Elem >= 0 {
				m.Path += "/" + names[it.Elem]
			}
			out = append(out, m)
		}
		for k, text := range run {
			// a string of the run that is JSON text, read as one as a string alone is
			if it, ok := mask.SplitInJSON(text, s.items); ok {
				out = append(out, Match{Kind: Kind(it.Label), Start: it.From, End: it.To, Path: path + "/" + names[k]})
			}
		}
	})
	return out
}

// walk calls visit with each string of v and its pointer, and across with each run of two
// or more consecutive strings of an array, or of the values of an object in the order of its
// keys (jsonvalue.StringRuns), the pointer of the array or object, the pointer segment of
// each string and, for an object's, their keys (nil for an array's); the strings of a run are
// not visited.
func (s *Scanner) walk(v any, path string, visit func(path, text string), across func(path string, run, names, keys []string)) {
	switch x := v.(type) {
	case string:
		visit(path, x)
	case map[string]any:
		keys := jsonvalue.SortedKeys(x)
		vals := make([]any, len(keys))
		names := make([]string, len(keys))
		for i, k := range keys {
			visit(path, k)
			vals[i], names[i] = x[k], jsonpointer.Escape(k)
		}
		s.walkRuns(vals, names, keys, path, visit, across)
	case jsonvalue.Object:
		names := make([]string, len(x.Keys))
		for i, k := range x.Keys {
			visit(path, k)
			names[i] = jsonpointer.Escape(k)
		}
		s.walkRuns(x.Values, names, x.Keys, path, visit, across)
	case map[string]string:
		keys := jsonvalue.SortedKeys(x)
		vals := make([]any, len(keys))
		names := make([]string, len(keys))
		for i, k := range keys {
			visit(path, k)
			vals[i], names[i] = x[k], jsonpointer.Escape(k)
		}
		s.walkRuns(vals, names, keys, path, visit, across)
	case []any:
		names := make([]string, len(x))
		for i := range x {
			names[i] = strconv.Itoa(i)
		}
		s.walkRuns(x, names, nil, path, visit, across)
	case []string:
		if len(x) > 1 {
			names := make([]string, len(x))
			for i := range x {
				names[i] = strconv.Itoa(i)
			}
			across(path, x, names, nil)
			return
		}
		for i, e := range x {
			visit(path+"/"+strconv.Itoa(i), e)
		}
	default:
		if text, ok := jsonvalue.NumberText(v); ok {
			visit(path, text)
		}
	}
}

// walkRuns walks the elements of an array, or the values of an object under keys, named by
// names: each run of two or more consecutive strings goes to across (with its keys), every
// other element to walk.
func (s *Scanner) walkRuns(x []any, names, keys []string, path string, visit func(path, text string), across func(path string, run, names, keys []string)) {
	jsonvalue.EachRun(x, keys, func(r [2]int, run, runKeys []string) {
		across(path, run, names[r[0]:r[1]], runKeys)
	}, func(i int) {
		s.walk(x[i], path+"/"+names[i], visit, across)
	})
}

// RedactValue returns a copy of v with every item in its strings replaced by its Placeholder,
// and the number of replacements. A number that holds personal data (a card number sent as a
// JSON number) becomes its redacted string. An object key holding personal data is renamed
// to its redacted form, followed by "#2", "#3"... when that name is taken, so no value is
// lost. The consecutive strings of an array, and the consecutive string values of an object
// in the order of its keys, are also read side by side, and an item cut across them ("4111
// 1111" and "1111 1111") is masked in every string it runs over, its placeholder in the first
// (mask.Elements). v itself is never modified; parts without
// personal data may be shared with the result.
func (s *Scanner) RedactValue(v any) (any, int) {
	return mask.Value(v, s.Redact, s.items)
}
