package dsl

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/schemas"
)

// cuePos converts a CUE position, or returns def when it is invalid.
func cuePos(p token.Pos, def Pos) Pos {
	if !p.IsValid() || p.Filename() == "" {
		return def
	}
	return Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
}

// posOf returns the position of a value: where its syntax starts when it has
// one of its own, else where CUE places it.
func posOf(v cue.Value) Pos {
	if n := v.Source(); n != nil {
		if f, ok := n.(*ast.Field); ok && f.Value != nil {
			n = f.Value
		}
		if p := cuePos(n.Pos(), Pos{}); p.IsValid() {
			return p
		}
	}
	return cuePos(v.Pos(), Pos{})
}

// valuePos returns the position of a value in the user's files.
func valuePos(v cue.Value) Pos { return posOf(v) }

// errMsg renders a CUE error's message without its path prefix.
func errMsg(e cueerrors.Error) string {
	format, args := e.Msg()
	return fmt.Sprintf(format, args...)
}

// isUserFile reports whether name is one of the policy files.
func (l *loader) isUserFile(name string) bool {
	for _, f := range l.files {
		if f == name {
			return true
		}
	}
	return false
}

type rawErr struct {
	path []string
	pos  Pos
	rule string
	msg  string
	// conflict holds the rejected value and the allowed one of a
	// "conflicting values" error, to merge enum alternatives.
	conflict [2]string
	// others are the other places of a conflict between the user's own
	// values (two files, or two fields, setting one field differently).
	others []Pos
	// joined is set when the error comes of a list declared in more than
	// one place, which CUE joins element by element: that list's path,
	// and the places other than pos it is written.
	joined  string
	related []Related
}

var (
	conflictRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^conflicting values (.+?) and (.+?)( \(mismatched types .*\))?$`)
	})
	boundRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^invalid value (.+) \(out of bound (.+)\)$`) })
	matchRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^invalid value (.+) \(does not match (.+)\)$`) })
	identRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_#][A-Za-z0-9_]*$`) })
	listLenRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^incompatible list lengths \((\d+) and (\d+)\)$`) })
)

// addCUEErrors turns CUE errors into diagnostics placed in the user's files:
// it classifies each error by rule, merges the failed alternatives of an
// enum into one "is not one of" message, drops the spurious conflicts that
// defaults add when a better error exists for the same path, and places
// errors that carry only schema positions by walking their path in the
// user's value. Errors below a path in skip are dropped.
func (l *loader) addCUEErrors(err error, user cue.Value, skip ...string) {
	var raws []*rawErr
	for _, e := range cueerrors.Errors(err) {
		path := e.Path()
		if len(path) > 0 && path[0] == "#Policy" {
			path = path[1:]
		}
		joined := strings.Join(path, ".")
		skipped := false
		for _, s := range skip {
			if joined == s || strings.HasPrefix(joined, s+".") {
				skipped = true
			}
		}
		if skipped {
			continue
		}
		msg := errMsg(e)
		if strings.Contains(msg, "errors in empty disjunction") {
			continue
		}
		if len(path) == 1 && strings.Contains(msg, "field not allowed") {
			continue // checkTopLevel reports these, with a did-you-mean
		}
		r := &rawErr{path: path, msg: msg}
		r.pos = l.placeError(e, path, user)
		if strings.HasPrefix(msg, "conflicting values ") {
			r.others = l.ownConflict(e, r.pos)
		}
		r.rule, r.msg = classify(msg, path)
		if r.rule == "schema/missing-field" && strings.Contains(msg, "field is required but not present") && len(path) > 0 {
			r.msg += l.requiredNote(path[:len(path)-1], path[len(path)-1])
		}
		if r.rule == "schema/missing-field" && l.pos != nil && len(path) > 0 {
			// Point at the struct that lacks the field: the error's path
			// is the field's ("field is required but not present") or
			// the struct's ("required field missing: use"), which for a
			// list element is the element, not its list.
			owner := path[:len(path)-1]
			if strings.HasPrefix(msg, "required field missing: ") {
				owner = path
			}
			if p, ok := l.pos.lookup(owner, false); ok {
				r.pos = p
			}
		}
		if listLenRE().MatchString(msg) && l.pos != nil && !(len(path) == 2 && path[0] == "chains") {
			// A list shorter than its minimum: CUE places the error at
			// an enclosing list (a chain, for an entry's field), not at
			// the list the user wrote.
			if p, ok := l.pos.value[strings.Join(path, ".")]; ok && p.IsValid() {
				r.pos = p
			}
		}
		if listLenRE().MatchString(msg) {
			l.joinedLists(r)
		}
		if r.rule == "schema/unknown-field" && len(path) > 0 && nameMaps[strings.Join(path[:len(path)-1], ".")] {
			// A map of names refuses a label that is not a name: say
			// so, rather than call it an unknown field whose closest
			// allowed name is itself unquoted.
			name := path[len(path)-1]
			if u, err := strconv.Unquote(name); err == nil {
				name = u
			}
			r.msg = fmt.Sprintf("%s: %q %s%s", fieldName(path[:len(path)-1]), name, notAName, nonASCIINote(name))
			if p, ok := l.pos.lookup(append(slices.Clone(path[:len(path)-1]), name), true); ok {
				r.pos = p
			}
		} else if r.rule == "schema/unknown-field" && len(path) > 0 {
			name := path[len(path)-1]
			var others []string
			for _, f := range l.allowedFields(path[:len(path)-1]) {
				if f != name { // the unified struct holds the unknown field too
					others = append(others, f)
				}
			}
			if c, ok := conditionFor(name, others); ok {
				r.msg += l.conditionNote(path[:len(path)-1], c)
			} else {
				r.msg += suggestField(name, others)
			}
		}
		if m := conflictRE().FindStringSubmatch(msg); m != nil {
			r.conflict = [2]string{m[1], m[2]}
			// The rejected value is the one the user wrote. Two of the
			// user's own keep CUE's order, the first at the error's
			// place.
			got, ok := l.userLiteral(path)
			switch {
			case len(r.others) > 0:
			case ok && got == m[2]:
				r.conflict = [2]string{m[2], m[1]}
			case !ok && !isLiteral(m[1]) && isLiteral(m[2]):
				r.conflict = [2]string{m[2], m[1]}
			case !ok && looksLikeSchema(m[1]) && !looksLikeSchema(m[2]):
				// Neither is a literal: the schema's side names a
				// definition or a type.
				r.conflict = [2]string{m[2], m[1]}
			}
		}
		raws = append(raws, r)
	}
	raws = l.entriesWithoutUse(raws, user)
	raws = oneErrorPerJoinedList(raws)
	// Group by path.
	byPath := map[string][]*rawErr{}
	var order []string
	for _, r := range raws {
		k := strings.Join(r.path, ".")
		if _, ok := byPath[k]; !ok {
			order = append(order, k)
		}
		byPath[k] = append(byPath[k], r)
	}
	for _, k := range order {
		group := byPath[k]
		var conflicts, others []*rawErr
		for _, r := range group {
			if r.conflict[0] != "" {
				conflicts = append(conflicts, r)
			} else {
				others = append(others, r)
			}
		}
		if len(others) > 0 {
			// A default such as *3 | int & <=10 adds "conflicting
			// values 3 and 20" next to the real bound error. A field
			// that takes a duration or words (a meter's window: a
			// duration or "month") names the words beside the duration.
			for _, r := range others {
				if strings.Contains(r.msg, notDuration) {
					r.msg = durationOrWords(r.msg, conflicts)
				}
			}
			conflicts = nil
		}
		for _, r := range others {
			d := Errorf(r.pos, r.rule, "%s", r.msg)
			d.Related = r.related
			l.diags = append(l.diags, d)
		}
		if len(conflicts) == 1 && len(conflicts[0].others) > 0 {
			// Two of the user's own values disagree: name both places.
			r := conflicts[0]
			msg := fmt.Sprintf("%s: conflicting values %s and %s: the field is set differently in two places", fieldName(r.path), r.conflict[0], r.conflict[1])
			if list, places := l.declaredTwice(r.path); list != nil {
				// Two lists (two of a chain) unify entry by entry.
				msg += "; " + declaredTwiceNote(list, len(places), nil)
			}
			d := Errorf(r.pos, r.rule, "%s", msg)
			for _, o := range r.others {
				d.Related = append(d.Related, Related{Pos: o, Message: "the other value is here"})
			}
			l.diags = append(l.diags, d)
		} else if len(conflicts) == 1 {
			r := conflicts[0]
			l.diags = append(l.diags, Errorf(r.pos, r.rule, "%s", conflictMessage(r)))
		} else if len(conflicts) > 1 {
			got := conflicts[0].conflict[0]
			var allowed []string
			seen := map[string]bool{}
			pos := conflicts[0].pos
			for _, r := range conflicts {
				if r.conflict[0] != got {
					// Not an enum: report each conflict.
					allowed = nil
					break
				}
				if !seen[r.conflict[1]] {
					seen[r.conflict[1]] = true
					allowed = append(allowed, r.conflict[1])
				}
			}
			if allowed == nil {
				for _, r := range conflicts {
					l.diags = append(l.diags, Errorf(r.pos, r.rule, "%s", conflictMessage(r)))
				}
				continue
			}
			if t := firstType(allowed); t != "" {
				r := *conflicts[0]
				r.conflict[1] = t
				l.diags = append(l.diags, Errorf(r.pos, r.rule, "%s", conflictMessage(&r)))
				continue
			}
			sort.Strings(allowed)
			l.diags = append(l.diags, Errorf(pos, "schema/invalid-value", "%s: %s is not one of %s%s", fieldName(conflicts[0].path), got, strings.Join(allowed, ", "), bytesNote(got)))
		}
	}
}

// joinedLists explains r, an error of lists of different lengths, when
// the user's files write the list at r.path in more than one place with
// different lengths: CUE joins lists element by element, rather than
// append them. The error is then placed at the outermost list declared in
// more than one place (r.path, or a chain whose entries hold it), at its
// last place, with the others as related positions.
func (l *loader) joinedLists(r *rawErr) {
	if l.pos == nil {
		return
	}
	lists := l.pos.listsOf(r.path)
	differ := false
	for _, s := range lists {
		differ = differ || s.elems != lists[0].elems
	}
	list, places := l.declaredTwice(r.path)
	if !differ || list == nil {
		return // a list shorter than its minimum
	}
	if len(list) == len(r.path) {
		lengths := make([]int, len(places))
		for i, s := range places {
			lengths[i] = s.elems
		}
		r.msg = declaredTwiceNote(list, len(places), lengths)
	} else {
		r.msg = fmt.Sprintf("%s: lists of %d and %d elements do not join: %s", fieldName(r.path), lists[0].elems, lists[len(lists)-1].elems, declaredTwiceNote(list, len(places), nil))
	}
	r.joined = strings.Join(list, ".")
	r.pos = places[len(places)-1].value
	r.related = nil
	for _, s := range places[:len(places)-1] {
		r.related = append(r.related, Related{Pos: s.value, Message: "the other list is here"})
	}
}

// declaredTwice returns the outermost list on path (path itself, or a list
// path is below an element of) that the user's files write in more than
// one place, and those places.
func (l *loader) declaredTwice(path []string) ([]string, []span) {
	if l.pos == nil {
		return nil, nil
	}
	for n := 1; n <= len(path); n++ {
		if n < len(path) && !isIndex(path[n]) {
			continue
		}
		if places := l.pos.listsOf(path[:n]); len(places) > 1 {
			return path[:n], places
		}
	}
	return nil, nil
}

// declaredTwiceNote says that list is written in n places, as lists of
// lengths when they are given, which CUE joins element by element.
func declaredTwiceNote(list []string, n int, lengths []int) string {
	what, by, fix := "elements", "element by element", "declare it as one list in one place"
	if len(list) == 2 && list[0] == "chains" {
		what, by, fix = "entries", "entry by entry", "declare each chain as one list in one place"
	}
	times := "twice"
	if n > 2 {
		times = fmt.Sprintf("%d times", n)
	}
	as := ""
	for i, k := range lengths {
		switch {
		case i == 0:
			as = ", as lists of "
		case i == len(lengths)-1:
			as += " and "
		default:
			as += ", "
		}
		as += strconv.Itoa(k)
		if i == len(lengths)-1 {
			as += " " + what
		}
	}
	return fmt.Sprintf("%s is declared %s%s, and CUE joins two lists %s: %s", fieldName(list), times, as, by, fix)
}

// oneErrorPerJoinedList keeps one error for each list declared in more
// than one place whose lists do not join (the one of the list itself
// when there is one), and drops the conflicts between the user's own
// values below it, which come of joining them.
func oneErrorPerJoinedList(raws []*rawErr) []*rawErr {
	best := map[string]*rawErr{}
	for _, r := range raws {
		if r.joined == "" {
			continue
		}
		if b, ok := best[r.joined]; !ok || (strings.Join(r.path, ".") == r.joined && strings.Join(b.path, ".") != r.joined) {
			best[r.joined] = r
		}
	}
	if len(best) == 0 {
		return raws
	}
	var out []*rawErr
	for _, r := range raws {
		if r.joined != "" {
			if best[r.joined] == r {
				out = append(out, r)
			}
			continue
		}
		below := false
		for list := range best {
			below = below || (len(r.others) > 0 && strings.HasPrefix(strings.Join(r.path, ".")+".", list+"."))
		}
		if !below {
			out = append(out, r)
		}
	}
	return out
}

func conflictMessage(r *rawErr) string {
	got, want := r.conflict[0], r.conflict[1]
	if strings.Contains(want, durationUnits) {
		if _, err := strconv.ParseFloat(got, 64); err == nil {
			return fmt.Sprintf("%s: %s is a bare number, not a duration: write it as a string with its unit, such as \"%ss\" or \"%sms\"", fieldName(r.path), got, got, got)
		}
		if isZeroDuration(got) {
			return fmt.Sprintf(zeroDuration, fieldName(r.path), got)
		}
		return fmt.Sprintf("%s: %s"+notDuration+"%s", fieldName(r.path), got, bytesNote(got))
	}
	return fmt.Sprintf("%s: %s is not allowed here: want %s%s", fieldName(r.path), got, describeType(want), bytesNote(got))
}

// notDuration is how a value that is not a duration is described.
const notDuration = ` is not a duration such as "250ms", "30s" or "1h30m"`

// durationOrWords completes msg, which says got is not a duration, for a
// field that also takes words (a meter's window: a duration or "month"):
// it names them, and the one got is close to.
// The words are the values of the conflicts beside it that are not
// durations (a default duration is one).
func durationOrWords(msg string, conflicts []*rawErr) string {
	var words, names []string
	got := ""
	for _, r := range conflicts {
		w, err := strconv.Unquote(r.conflict[1])
		if err != nil || !strings.HasPrefix(r.conflict[1], `"`) || slices.Contains(words, r.conflict[1]) {
			continue
		}
		if _, err := time.ParseDuration(w); err == nil {
			continue
		}
		words, names, got = append(words, r.conflict[1]), append(names, w), r.conflict[0]
	}
	if len(words) == 0 {
		return msg
	}
	at := strings.Index(msg, notDuration) + len(notDuration)
	msg = msg[:at] + ", nor " + strings.Join(words, " nor ") + msg[at:]
	if w, err := strconv.Unquote(got); err == nil {
		if best := textdist.Closest(w, names); best != "" {
			msg += fmt.Sprintf("; did you mean %q?", best)
		}
	}
	return msg
}

// bytesNote explains a value written in single quotes, which CUE reads as
// bytes, not as a string: "" for any other value.
func bytesNote(lit string) string {
	if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
		return ""
	}
	text := strings.ReplaceAll(lit[1:len(lit)-1], `\'`, "'")
	const note = ": single quotes make bytes in CUE, not a string; write "
	switch {
	case !strings.Contains(text, `"`):
		return note + `"` + text + `"`
	case !strings.Contains(text, "'"):
		// A predicate quoting a string: CEL reads single quotes too.
		return note + `"` + strings.ReplaceAll(text, `"`, "'") + `" (CEL reads single-quoted strings too) or ` + rawString(text)
	}
	return note + rawString(text)
}

// rawString writes text, as a CUE double-quoted string would read it, as
// a CUE string in which a double quote needs no escape: #"..."#, with as
// many # as it takes for text not to end it, and each escape marked with
// them (\#n).
func rawString(text string) string {
	hashes := "#"
	for strings.Contains(text, `"`+hashes) {
		hashes += "#"
	}
	return hashes + `"` + strings.ReplaceAll(text, `\`, `\`+hashes) + `"` + hashes
}

// describeType renders a CUE type or value for a message.
func describeType(s string) string {
	switch s {
	case "int":
		return "an integer"
	case "number", "float":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "list", "[...string]":
		return "a list"
	case "[...#Entry]":
		return "a list of chain entries"
	case "struct", "{}":
		return "a struct"
	}
	return s
}

// looksLikeSchema reports whether a value printed by CUE comes from the
// schema: a definition, a list of definitions, or a bare type.
func looksLikeSchema(s string) bool {
	return strings.Contains(s, "#") || s == "int" || s == "number" || s == "string" || s == "bool" || s == "float"
}

// firstType returns the first alternative that is a type, not a value.
func firstType(alts []string) string {
	for _, a := range alts {
		if !isLiteral(a) {
			return a
		}
	}
	return ""
}

func isLiteral(s string) bool {
	if s == "true" || s == "false" || s == "null" {
		return true
	}
	if strings.HasPrefix(s, `"`) {
		return true
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return true
	}
	return false
}

// userLiteral returns the literal the user wrote at path, as CUE prints it.
func (l *loader) userLiteral(path []string) (string, bool) {
	if l.pos == nil {
		return "", false
	}
	lit, ok := l.pos.node[strings.Join(path, ".")].(*ast.BasicLit)
	if !ok {
		return "", false
	}
	return lit.Value, true
}

// fieldName renders a path for a message: chains.chat[2].max_attempts, a
// label that is not an identifier quoted (models."gpt-4.1".provider).
func fieldName(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			fmt.Fprintf(&b, "[%s]", p)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(fieldpath.Label(p))
	}
	if b.Len() == 0 {
		return "policy"
	}
	return b.String()
}

// fieldAliases are the names other gateways give a field of agentc's,
// which no spelling mistake explains ("rps" for rate), with what to know
// when writing agentc's field instead.
var fieldAliases = map[string]struct{ field, note string }{
	"rps":                 {"rate", `rate is the calls let through each per, "1s" by default`},
	"requests_per_second": {"rate", `rate is the calls let through each per, "1s" by default`},
	"rpm":                 {"rate", `rate is the calls let through each per: write per: "1m" with it`},
	"requests_per_minute": {"rate", `rate is the calls let through each per: write per: "1m" with it`},
	"window":              {"per", "per is the period over which rate calls are let through"},
	"period":              {"per", "per is the period over which rate calls are let through"},
	"interval":            {"per", "per is the period over which rate calls are let through"},
	"burst_size":          {"burst", ""},
	"capacity":            {"burst", "burst is the bucket size"},
	"retries":             {"max_attempts", "max_attempts counts the first attempt too: 2 retries are max_attempts: 3"},
	"max_retries":         {"max_attempts", "max_attempts counts the first attempt too: 2 retries are max_attempts: 3"},
	"num_retries":         {"max_attempts", "max_attempts counts the first attempt too: 2 retries are max_attempts: 3"},
	"per_try_timeout":     {"attempt_timeout", ""},
	"backoff":             {"initial_delay", "the backoff starts at initial_delay and grows by multiplier up to max_delay"},
	"initial_backoff":     {"initial_delay", ""},
	"max_backoff":         {"max_delay", ""},
}

// suggestField returns "; did you mean X?" for an unknown field name: the
// field of fields that other gateways call name (fieldAliases), else the
// closest in spelling.
func suggestField(name string, fields []string) string {
	if a, ok := fieldAliases[name]; ok && slices.Contains(fields, a.field) {
		if a.note == "" {
			return fmt.Sprintf("; did you mean %q?", a.field)
		}
		return fmt.Sprintf("; did you mean %q? (%s)", a.field, a.note)
	}
	return suggestName(name, fields)
}

// classify maps a CUE message to a rule id and a user-facing message.
func classify(msg string, path []string) (rule, out string) {
	name := fieldName(path)
	last := ""
	if len(path) > 0 {
		last = path[len(path)-1]
	}
	switch {
	case strings.Contains(msg, "field not allowed"):
		return "schema/unknown-field", fmt.Sprintf("unknown field %q%s", last, nonASCIINote(last))
	case strings.Contains(msg, "field is required but not present"):
		return "schema/missing-field", fmt.Sprintf("missing required field %q", last)
	case strings.HasPrefix(msg, "required field missing: "):
		return "schema/missing-field", fmt.Sprintf("%s: missing required field %q", name, strings.TrimPrefix(msg, "required field missing: "))
	case strings.Contains(msg, "imported but not defined") || (strings.HasPrefix(msg, "import ") && strings.HasSuffix(msg, "not found")):
		return "schema/bad-reference", fmt.Sprintf("%s; a policy can import only CUE standard-library packages", strings.TrimSpace(strings.TrimSuffix(msg, " in ")))
	case strings.HasPrefix(msg, "incomplete value"):
		return "schema/missing-field", fmt.Sprintf("%s: %s: give a concrete value", name, msg)
	}
	if m := listLenRE().FindStringSubmatch(msg); m != nil {
		if len(path) == 2 && path[0] == "chains" {
			// A chain has no minimum length: two lists were given for it.
			return "schema/invalid-value", declaredTwiceNote(path, 2, []int{atoi(m[1]), atoi(m[2])})
		}
		elements := "elements"
		if m[1] == "1" {
			elements = "element"
		}
		return "schema/invalid-value", fmt.Sprintf("%s: has %s %s, needs at least %s", name, m[1], elements, m[2])
	}
	if m := boundRE().FindStringSubmatch(msg); m != nil && strings.Contains(m[2], durationUnits) {
		if v, err := strconv.Unquote(m[1]); err == nil {
			if w := unitWordRE().FindStringSubmatch(v); w != nil {
				return "schema/invalid-value", fmt.Sprintf("%s: %s: a duration's units are ns, us, ms, s, m and h; write \"%s%s\"", name, m[1], w[1], unitWords[strings.ToLower(w[2])])
			}
			if packed := strings.ReplaceAll(v, " ", ""); packed != v {
				if _, err := time.ParseDuration(packed); err == nil && !strings.HasPrefix(packed, "-") {
					return "schema/invalid-value", fmt.Sprintf("%s: %s: a duration has no spaces; write %q", name, m[1], packed)
				}
			}
			if d := dayWordRE().FindStringSubmatch(v); d != nil && isCount(d[1]) {
				return "schema/invalid-value", fmt.Sprintf("%s: %s: a duration has no day unit; write hours, as in \"%dh\"", name, m[1], atoi(d[1])*24)
			}
			if w := weekWordRE().FindStringSubmatch(v); w != nil && isCount(w[1]) {
				msg := fmt.Sprintf("%s: %s: a duration has no week unit; write hours, as in \"%dh\"", name, m[1], atoi(w[1])*24*7)
				if len(path) > 0 && path[len(path)-1] == "window" && atoi(w[1]) == 1 {
					// A meter's window counts its spans from the Unix epoch.
					msg += ", whose windows start on Thursdays at 00:00 UTC (the Unix epoch was a Thursday)"
				}
				return "schema/invalid-value", msg
			}
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				return "schema/invalid-value", fmt.Sprintf("%s: %s has no unit: write it with one, such as \"%sms\" or \"%ss\"", name, m[1], v, v)
			}
		}
		if isZeroDuration(m[1]) {
			return "schema/invalid-value", fmt.Sprintf(zeroDuration, name, m[1])
		}
		return "schema/invalid-value", fmt.Sprintf("%s: %s"+notDuration, name, m[1])
	}
	if m := boundRE().FindStringSubmatch(msg); m != nil && (strings.HasPrefix(m[2], "=~") || strings.HasPrefix(m[2], "!~")) {
		if hint := patternHint(m[1], strings.TrimLeft(m[2], "=!~")); hint != "" {
			return "schema/invalid-value", fmt.Sprintf("%s: %s %s", name, m[1], hint)
		}
		return "schema/invalid-value", fmt.Sprintf("%s: %s does not match the pattern %s%s", name, m[1], strings.TrimLeft(m[2], "=!~"), nonASCIINote(m[1]))
	}
	if m := boundRE().FindStringSubmatch(msg); m != nil {
		if m[1] == `""` && m[2] == `!=""` {
			return "schema/invalid-value", fmt.Sprintf("%s: is empty: give a value, or leave the field out", name)
		}
		return "schema/invalid-value", fmt.Sprintf("%s: %s is out of range: want %s", name, m[1], m[2])
	}
	if m := matchRE().FindStringSubmatch(msg); m != nil {
		return "schema/invalid-value", fmt.Sprintf("%s: %s does not match %s", name, m[1], m[2])
	}
	if strings.HasPrefix(msg, "expected ") || strings.Contains(msg, "syntax") {
		return "cue/syntax", msg
	}
	if strings.Contains(msg, "reference") && strings.Contains(msg, "not found") {
		return "schema/bad-reference", msg
	}
	return "schema/invalid-value", fmt.Sprintf("%s: %s", name, msg)
}

// placeError picks the error's position in the user's files; failing that it
// walks the error's path in the user's value.
func (l *loader) placeError(e cueerrors.Error, path []string, user cue.Value) Pos {
	positions := append([]token.Pos{e.Position()}, e.InputPositions()...)
	var best Pos
	for _, p := range positions {
		if !p.IsValid() || !l.isUserFile(p.Filename()) {
			continue
		}
		q := Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
		// Prefer the latest position: the user's value rather than the
		// enclosing struct.
		if !best.IsValid() || best.Before(q) {
			best = q
		}
	}
	if best.IsValid() {
		return best
	}
	if user.Exists() {
		for n := len(path); n >= 0; n-- {
			v := user.LookupPath(cue.ParsePath(cuePath(path[:n])))
			if v.Exists() {
				if p := posOf(v); p.IsValid() && l.isUserFile(p.File) {
					return p
				}
			}
		}
	}
	return Pos{File: l.files[0], Line: 1, Col: 1}
}

// ownConflict returns the places of a conflict other than at, when every
// value in conflict is the user's own: no schema position takes part.
func (l *loader) ownConflict(e cueerrors.Error, at Pos) []Pos {
	var others []Pos
	seen := map[Pos]bool{at: true}
	for _, p := range append([]token.Pos{e.Position()}, e.InputPositions()...) {
		if !p.IsValid() {
			continue
		}
		if !l.isUserFile(p.Filename()) {
			return nil
		}
		q := Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
		if !seen[q] {
			seen[q] = true
			others = append(others, q)
		}
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Before(others[j]) })
	return others
}

// cuePath joins selectors into a CUE path expression.
func cuePath(sel []string) string {
	var parts []string
	for _, s := range sel {
		if _, err := strconv.Atoi(s); err == nil {
			parts = append(parts, s)
			continue
		}
		if identRE().MatchString(s) {
			parts = append(parts, s)
		} else {
			parts = append(parts, strconv.Quote(s))
		}
	}
	return strings.Join(parts, ".")
}

// selPath turns an error's path into a cue.Path: a number is a list index,
// anything else a field name.
func selPath(path []string) cue.Path {
	sels := make([]cue.Selector, len(path))
	for i, p := range path {
		if n, err := strconv.Atoi(p); err == nil {
			sels[i] = cue.Index(n)
		} else {
			sels[i] = cue.Str(p)
		}
	}
	return cue.MakePath(sels...)
}

// allowedFields lists the regular fields the schema allows in the struct
// at path (optional ones included), for a did-you-mean.
func (l *loader) allowedFields(path []string) []string {
	if !l.unified.Exists() {
		return nil
	}
	v := l.unified.LookupPath(selPath(path))
	if !v.Exists() {
		return nil
	}
	return fieldNames(v)
}

// fieldNames lists the fields of the struct v, optional ones included.
func fieldNames(v cue.Value) []string {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var names []string
	for it.Next() {
		if sel := it.Selector(); sel.IsString() {
			names = append(names, sel.Unquoted())
		}
	}
	return names
}

// conditionNote explains a field that the struct at path allows only
// under condition c, which its value does not meet: `: model is a field
// only where kind is "chat", and kind here is "text" (its default)`.
func (l *loader) conditionNote(path []string, c condField) string {
	note := fmt.Sprintf(": it is a field only where %s is %q", c.On, c.Value)
	on := append(slices.Clone(path), c.On)
	v := l.unified.LookupPath(selPath(on))
	if got, err := v.String(); err == nil && got != c.Value {
		note += fmt.Sprintf(", and %s here is %q", c.On, got)
		if _, written := l.userLiteral(on); !written {
			note += " (its default)"
		}
		note += fmt.Sprintf(": set %s: %q, or remove the field", c.On, c.Value)
	}
	return note
}

// requiredNote says which setting of the struct at path requires the field
// name, when the schema requires it only under a condition: `: strategy
// "summarize" needs it`.
func (l *loader) requiredNote(path []string, name string) string {
	c, ok := conditionFor(name, l.allowedFields(path))
	if !ok {
		return ""
	}
	v := l.unified.LookupPath(selPath(append(slices.Clone(path), c.On)))
	if got, err := v.String(); err != nil || got != c.Value {
		return ""
	}
	return fmt.Sprintf(": %s %q needs it", c.On, c.Value)
}

// nameMaps are the maps of the policy whose labels are names
// (#Identifier).
var nameMaps = map[string]bool{
	"models": true, "tools": true, "stores": true, "keys": true, "mcp.servers": true,
	"state.fields": true, "invariants.max_executions": true, "invariants.custom": true,
}

// zeroDuration is the message of a field's zero duration (its name, then
// the value as written).
const zeroDuration = "%s: %s is zero: this field takes a duration above zero (leave it out for its default)"

// isZeroDuration reports whether lit, a quoted CUE string, is a duration
// of zero ("0s", "0ms", "0h0m"), which #PositiveDuration refuses.
func isZeroDuration(lit string) bool {
	v, err := strconv.Unquote(lit)
	if err != nil {
		return false
	}
	d, err := time.ParseDuration(v)
	return err == nil && d == 0 && !strings.HasPrefix(v, "-")
}

// durationUnits is the units group of the schema's #Duration pattern.
const durationUnits = "(ns|us|µs|ms|s|m|h)"

// envNamePattern is the pattern of a field naming an environment variable.
const envNamePattern = "^[A-Za-z_][A-Za-z0-9_]*$"

// sha256Pattern is the pattern of a key's sha256.
const sha256Pattern = "^[0-9a-f]{64}$"

// patternHint explains a string that does not match its field's pattern
// where the mistake is a common one: a key written where its hash goes, a
// URL where a host name goes.
func patternHint(lit, pattern string) string {
	val, err := strconv.Unquote(lit)
	if err != nil {
		return ""
	}
	if pattern == sha256Pattern || pattern == strconv.Quote(sha256Pattern) {
		if strings.ToLower(val) != val && len(val) == 64 {
			return "is not lower-case: write the SHA-256 in lower-case hex"
		}
		return "is not a SHA-256 (64 lower-case hex digits): give the hash of the key (printf %s \"$KEY\" | sha256sum), or env with the variable that holds it; never the key itself"
	}
	if pattern == envNamePattern || pattern == strconv.Quote(envNamePattern) {
		if strings.Contains(val, "://") {
			return "is a URL, not the name of an environment variable: this field names the variable that holds it (such as \"REDIS_URL\"), never the value"
		}
		return "is not the name of an environment variable (letters, digits and _, not starting with a digit)"
	}
	// The host pattern of egress's allow ends with an optional port.
	if strings.Contains(pattern, "(:[0-9]{1,5})?") && strings.Contains(val, "://") {
		if u, err := url.Parse(val); err == nil && u.Host != "" {
			return fmt.Sprintf("is a URL, not a host: allow lists host names (with an optional :port); write %q", u.Host)
		}
		return "is a URL, not a host: allow lists host names such as \"api.example.com\""
	}
	re, err := strconv.Unquote(pattern)
	if err != nil {
		return ""
	}
	switch re {
	case identPattern:
		return notAName + nonASCIINote(val)
	case `^https?://[^\s]+$`, `^https?://`:
		return "is not a URL starting with http:// or https://"
	case `^(\*\.)?[A-Za-z0-9.:\[\]-]+(:[0-9]{1,5})?$`:
		return "is not a host: allow lists host names (\"api.example.com\"), a wildcard as the first label only (\"*.example.com\") or \"*\", each with an optional :port, and no path" + nonASCIINote(val)
	case `^\.[A-Za-z0-9]+$`:
		if regexp.MustCompile(re).MatchString("." + val) {
			return fmt.Sprintf("is not an extension: write it with its dot, %q", "."+val)
		}
		return "is not an extension such as \".txt\" (a dot, then letters and digits)"
	case `^[A-Za-z]{2}$`:
		return "is not a two-letter region code such as \"US\" or \"GB\""
	case `^[a-z0-9][a-z0-9-]*$`:
		return "is not a constraint id: lower-case letters, digits and -, such as \"pii-before-log\""
	case `[^\s\v\x{85}\p{Z}]`:
		return "is blank: a keyword holds at least one character that is not white space; remove it"
	}
	return ""
}

// identPattern is the pattern of #Identifier: the names of models, tools,
// stores, entries and tenants; notAName says what it accepts.
const (
	identPattern = schemas.IdentifierPattern
	notAName     = "is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _"
)

// unitWordRE matches a number followed by a unit spelt out ("5min",
// "30 seconds").
var unitWordRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^([0-9]+(?:\.[0-9]+)?) ?(sec|secs|second|seconds|min|mins|minute|minutes|hr|hrs|hour|hours|msec|millis|milliseconds)$`)
})

// dayWordRE and weekWordRE match a count of days or weeks ("2d", "1 day",
// "3 weeks"), units a duration does not have.
var (
	dayWordRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^([0-9]+) ?(d|day|days)$`) })
	weekWordRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^([0-9]+) ?(w|wk|wks|week|weeks)$`) })
)

// unitWords maps the units unitWordRE matches to a duration's.
var unitWords = map[string]string{
	"sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"min": "m", "mins": "m", "minute": "m", "minutes": "m",
	"hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	"msec": "ms", "millis": "ms", "milliseconds": "ms",
}

// isCount reports whether s is a small whole number of days or weeks.
func isCount(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 100000
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func isIndex(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// nonASCIINote points at the first character of s (a name, or its quoted
// literal) outside ASCII, for a name that does not match: a name that reads right but holds a look-alike
// letter (the Cyrillic а for a) matches no declaration. "" when s is ASCII.
func nonASCIINote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		s = u
	}
	for _, r := range s {
		if r >= utf8.RuneSelf {
			return fmt.Sprintf(": it holds %s, and names are ASCII", RuneNote(r))
		}
	}
	return ""
}

// RuneNote describes a character outside ASCII for a message: "'а'
// (U+0430, a Cyrillic letter)".
func RuneNote(r rune) string {
	kind := ""
	for _, sc := range []struct {
		name  string
		table *unicode.RangeTable
	}{{"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek}, {"Armenian", unicode.Armenian}, {"Latin", unicode.Latin}} {
		if unicode.Is(sc.table, r) && unicode.IsLetter(r) {
			kind = ", a " + sc.name + " letter"
			break
		}
	}
	switch {
	case kind != "":
	case unicode.Is(unicode.Cf, r):
		kind = ", an invisible format character"
	case unicode.IsSpace(r):
		kind = ", a space"
	}
	return fmt.Sprintf("%q (U+%04X%s)", r, r, kind)
}

// entriesWithoutUse replaces the errors inside a chain entry that has no
// use with one: the entry misses use. Without use no kind's fields are
// allowed, and CUE reports the missing use, each field as unknown, or
// nothing, depending on the entry's place in its list; the fix is the same.
// When the entry's fields are all those of one kind, the message names it.
// It is called only when CUE found errors.
func (l *loader) entriesWithoutUse(raws []*rawErr, user cue.Value) []*rawErr {
	if !user.Exists() {
		return raws
	}
	missing := map[string]*rawErr{}
	var added []*rawErr
	chains := user.LookupPath(cue.ParsePath("chains"))
	it, err := chains.Fields()
	for err == nil && it.Next() {
		stage := it.Selector().Unquoted()
		list, lerr := it.Value().List()
		for n := 0; lerr == nil && list.Next(); n++ {
			ev := list.Value()
			if ev.IncompleteKind() != cue.StructKind || ev.LookupPath(cue.ParsePath("use")).Exists() {
				continue
			}
			elem := []string{"chains", stage, strconv.Itoa(n)}
			fields := map[string]string{}
			if fit, ferr := ev.Fields(cue.Optional(true)); ferr == nil {
				for fit.Next() {
					if sel := fit.Selector(); sel.IsString() {
						fields[sel.Unquoted()] = valueKind(fit.Value().IncompleteKind())
					}
				}
			}
			msg := fmt.Sprintf("%s: missing required field \"use\"", fieldName(elem))
			// A misspelt use ("us", "uses"): placed at it, with the kind
			// it names.
			typo := ""
			for f := range fields {
				if f != "name" && textdist.Closest(f, []string{"use"}) != "" {
					typo = f
				}
			}
			var typoPos Pos
			switch kinds := kindsOfFields(fields, stage); {
			case typo != "":
				delete(fields, typo)
				msg += fmt.Sprintf(": unknown field %q; did you mean use", typo)
				if id, err := ev.LookupPath(cue.MakePath(cue.Str(typo))).String(); err == nil {
					msg += fmt.Sprintf(": %q", id)
				}
				msg += "?"
				if l.pos != nil {
					typoPos, _ = l.pos.lookup(append(slices.Clone(elem), typo), true)
				}
			case len(kinds) == 0:
			case len(kinds) == 1:
				msg += fmt.Sprintf(": its fields are those of %s; write use: %q", kinds[0], kinds[0])
			default:
				msg += fmt.Sprintf(": its fields are those of %s; write use: with the one meant", orList(kinds))
			}
			r := &rawErr{path: elem, rule: "schema/missing-field", msg: msg}
			if typoPos.IsValid() {
				r.pos = typoPos
			} else if p, ok := l.posOf(elem); ok {
				r.pos = p
			} else if p := ev.Pos(); p.IsValid() {
				r.pos = Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
			}
			missing[strings.Join(elem, ".")] = r
			added = append(added, r)
		}
	}
	if len(missing) == 0 {
		return raws
	}
	out := raws[:0]
	for _, r := range raws {
		if len(r.path) >= 3 && missing[strings.Join(r.path[:3], ".")] != nil {
			continue
		}
		out = append(out, r)
	}
	return append(out, added...)
}

// posOf is the position of path in the user's files, when known.
func (l *loader) posOf(path []string) (Pos, bool) {
	if l.pos == nil {
		return Pos{}, false
	}
	return l.pos.lookup(path, false)
}

// kindsOfFields returns the builtins of the stage whose config has every
// field of fields (the common ones aside) with a value of its type, sorted;
// none when there is no field of a kind's own.
func kindsOfFields(fields map[string]string, stage string) []string {
	common := map[string]bool{"name": true, "tools": true, "when": true, "use": true}
	var found []string
	own := 0
	for f := range fields {
		if !common[f] {
			own++
		}
	}
	if own == 0 {
		return nil
	}
	for id, cfg := range builtinCatalog.Configs {
		if !slices.Contains(builtinCatalog.Builtins[id].Stages, stage) {
			continue
		}
		all := true
		for f, typ := range fields {
			if common[f] {
				continue
			}
			if want, ok := cfg[f]; !ok || !kindTakes(want, typ) {
				all = false
				break
			}
		}
		if all {
			found = append(found, id)
		}
	}
	slices.Sort(found)
	return found
}

// kindTakes reports whether a config field of kind want (valueKind's
// names) takes a value of kind got.
func kindTakes(want, got string) bool {
	switch {
	case want == "any" || got == "any" || want == got:
		return true
	case want == "number":
		return got == "int" || got == "float"
	case want == "float":
		return got == "int"
	}
	return false
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
