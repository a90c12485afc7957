package prove

import (
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// publicAddr is the address the scenario's DNS stub gives the hosts of the
// URLs prove writes: a public one, which egress's address checks admit.
const publicAddr = "93.184.216.34"

// argGen writes the arguments of one tool's calls: values its JSON Schema
// accepts and the layers that check arguments (egress, file_check) admit
// where it can.
type argGen struct {
	// host is the host (with a port an allow entry requires) of the URLs
	// written into the tool's url_arg properties; root, ext and file the
	// file_check root the paths written into its path_arg properties are
	// relative to, their extension and the existing file (when the layer
	// wants one).
	host            string
	root, ext, file string
	urls, paths     []string
}

// newArgGen reads what the layers of p's tool chain that apply to the tool
// name admit; dir resolves file_check's relative roots.
func newArgGen(p *plan.Plan, name, dir string) *argGen {
	tool := p.Tools[name]
	g := &argGen{host: "example.com", urls: topLevel(tool.URLArg, tool.URLArgs), paths: topLevel(tool.PathArg, tool.PathArgs)}
	var allows [][]string
	for _, l := range p.Chains.Tool {
		if len(l.Tools) > 0 && !slices.Contains(l.Tools, name) {
			continue
		}
		switch l.Use {
		case "egress":
			var cfg struct {
				Allow []string `json:"allow"`
			}
			_ = json.Unmarshal(l.Config, &cfg)
			allows = append(allows, cfg.Allow)
		case "file_check":
			var cfg struct {
				Roots      []string `json:"roots"`
				Extensions []string `json:"extensions"`
				MustExist  bool     `json:"must_exist"`
				MaxBytes   int64    `json:"max_bytes"`
			}
			if json.Unmarshal(l.Config, &cfg) != nil || len(cfg.Roots) == 0 || g.root != "" {
				continue
			}
			g.root = cfg.Roots[0]
			if !filepath.IsAbs(g.root) {
				g.root = filepath.Join(dir, g.root)
			}
			if abs, err := filepath.Abs(g.root); err == nil {
				g.root = abs
			}
			if len(cfg.Extensions) > 0 {
				g.ext = "." + strings.TrimPrefix(strings.ToLower(strings.TrimSpace(cfg.Extensions[0])), ".")
			}
			if cfg.MustExist {
				g.file = existingFile(g.root, cfg.Extensions, cfg.MaxBytes)
			}
		}
	}
	if len(allows) > 0 {
		g.host = admittedHost(allows)
	}
	return g
}

// topLevel returns the references that name an argument of the top level
// ("url", "/url"); deeper ones are left as the schema writes them.
func topLevel(first string, all []string) []string {
	var out []string
	for _, r := range append([]string{first}, all...) {
		r = strings.TrimPrefix(r, "/")
		if r != "" && !strings.ContainsAny(r, "/[*.") && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// existingFile returns a regular file directly under root that the
// extensions and size admit, "" when there is none.
func existingFile(root string, exts []string, maxBytes int64) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	for _, en := range entries {
		if !en.Type().IsRegular() {
			continue
		}
		ext := strings.ToLower(filepath.Ext(en.Name()))
		if len(exts) > 0 && !slices.ContainsFunc(exts, func(e string) bool {
			return "."+strings.TrimPrefix(strings.ToLower(strings.TrimSpace(e)), ".") == ext
		}) {
			continue
		}
		if info, err := en.Info(); err != nil || maxBytes > 0 && info.Size() > maxBytes {
			continue
		}
		return filepath.Join(root, en.Name())
	}
	return ""
}

// admittedHost returns a host every allow list admits (with the port an
// entry requires), or the first list's first entry made a host when none
// does.
func admittedHost(allows [][]string) string {
	var first string
	for _, entry := range allows[0] {
		h := hostOf(entry)
		if first == "" {
			first = h
		}
		if !slices.ContainsFunc(allows[1:], func(list []string) bool { return !admits(list, h) }) {
			return h
		}
	}
	if first == "" {
		return "example.com"
	}
	return first
}

// hostOf makes an allow entry a host a URL may name: "*" any public name,
// "*.example.com" a name below it.
func hostOf(entry string) string {
	entry = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(entry)), ".")
	switch {
	case entry == "*":
		return "example.com"
	case strings.HasPrefix(entry, "*."):
		return "a" + entry[1:]
	}
	return entry
}

func admits(list []string, host string) bool {
	for _, e := range list {
		e = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		if e == "*" || e == host || strings.HasPrefix(e, "*.") && strings.HasSuffix(host, e[1:]) {
			return true
		}
	}
	return false
}

// dns returns the scenario's DNS stub for the host of the URLs, nil when
// it is an address (or no egress layer looks names up).
func (g *argGen) dns(p *plan.Plan) map[string][]string {
	if len(g.urls) == 0 || !slices.ContainsFunc(p.Chains.Tool, func(l plan.Layer) bool { return l.Use == "egress" }) {
		return nil
	}
	h := g.host
	if ap, err := netip.ParseAddrPort(h); err == nil {
		h = ap.Addr().String()
	} else if i := strings.LastIndex(h, ":"); i > 0 && !strings.Contains(h[:i], ":") {
		h = h[:i]
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return nil
	}
	return map[string][]string{h: {publicAddr}}
}

// schema is the part of a JSON Schema the arguments are written from.
type schema struct {
	Type             any                        `json:"type"`
	Enum             []any                      `json:"enum"`
	Const            *any                       `json:"const"`
	Minimum          *float64                   `json:"minimum"`
	Maximum          *float64                   `json:"maximum"`
	ExclusiveMinimum any                        `json:"exclusiveMinimum"`
	ExclusiveMaximum any                        `json:"exclusiveMaximum"`
	MultipleOf       *float64                   `json:"multipleOf"`
	MinLength        *int                       `json:"minLength"`
	MaxLength        *int                       `json:"maxLength"`
	Pattern          string                     `json:"pattern"`
	Format           string                     `json:"format"`
	Required         []string                   `json:"required"`
	Properties       map[string]json.RawMessage `json:"properties"`
	Items            json.RawMessage            `json:"items"`
	MinItems         *int                       `json:"minItems"`
}

func (s *schema) typ() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok && x != "null" {
				return x
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return ""
}

// args returns the required arguments of an object schema, each at a value
// its schema accepts: the smallest, or with large the largest numbers (which
// trip limits such as "amount > 100"). numeric reports a number among them.
func (g *argGen) args(raw json.RawMessage, large bool) (args map[string]any, numeric bool) {
	var s schema
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return map[string]any{}, false
	}
	args = map[string]any{}
	for _, name := range s.Required {
		var ps schema
		_ = json.Unmarshal(s.Properties[name], &ps)
		switch {
		case slices.Contains(g.urls, name) && ps.typ() != "object" && ps.typ() != "array":
			args[name] = "https://" + g.host + "/a"
			continue
		case slices.Contains(g.paths, name) && g.root != "" && ps.typ() != "object" && ps.typ() != "array":
			// Relative: file_check reads it against its first root, and
			// the counterexample replays wherever the policy is.
			args[name] = "a" + g.ext
			if g.file != "" {
				args[name] = filepath.Base(g.file)
			}
			continue
		}
		v, num := g.value(&ps, large, 0)
		args[name], numeric = v, numeric || num
	}
	return args, numeric
}

// value returns a value s accepts.
func (g *argGen) value(s *schema, large bool, depth int) (any, bool) {
	if s.Const != nil {
		return *s.Const, false
	}
	if len(s.Enum) > 0 {
		if large {
			return s.Enum[len(s.Enum)-1], false
		}
		return s.Enum[0], false
	}
	switch s.typ() {
	case "number", "integer":
		return number(s, large), true
	case "boolean":
		return true, false
	case "array":
		out := []any{}
		if s.MinItems != nil && *s.MinItems > 0 && depth < 4 {
			var is schema
			_ = json.Unmarshal(s.Items, &is)
			for range min(*s.MinItems, 16) {
				v, _ := g.value(&is, large, depth+1)
				out = append(out, v)
			}
		}
		return out, false
	case "object":
		out := map[string]any{}
		if depth < 4 {
			for _, name := range s.Required {
				var ps schema
				_ = json.Unmarshal(s.Properties[name], &ps)
				out[name], _ = g.value(&ps, large, depth+1)
			}
		}
		return out, false
	}
	return str(s), false
}

// number returns the smallest (from 1) or the largest (up to 10^6) number s
// accepts.
func number(s *schema, large bool) float64 {
	lo, hi := 1.0, 1e6
	if s.Minimum != nil {
		lo = max(*s.Minimum, 1)
	}
	if s.Maximum != nil {
		hi = *s.Maximum
	}
	integer := s.typ() == "integer"
	step := 1.0
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		step = *s.MultipleOf
	}
	if m, ok := s.ExclusiveMinimum.(float64); ok && lo <= m {
		lo = m + step
	}
	if m, ok := s.ExclusiveMaximum.(float64); ok && hi >= m {
		hi = m - step
		if hi < lo {
			hi = (lo + m) / 2
		}
	}
	lo = min(lo, hi)
	if integer {
		lo, hi = math.Ceil(lo), math.Floor(hi)
	}
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		lo, hi = math.Ceil(lo/step)*step, math.Floor(hi/step)*step
	}
	if large {
		return hi
	}
	return lo
}

// formats holds a value of each string format a schema may name.
var formats = map[string]string{
	"uri": "https://example.com/a", "uri-reference": "https://example.com/a", "iri": "https://example.com/a",
	"iri-reference": "https://example.com/a", "url": "https://example.com/a", "uri-template": "https://example.com/a",
	"email": "a@example.com", "idn-email": "a@example.com",
	"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "time": "00:00:00Z", "duration": "P1D",
	"hostname": "example.com", "idn-hostname": "example.com", "ipv4": publicAddr, "ipv6": "2001:db8::1",
	"uuid": "00000000-0000-4000-8000-000000000000", "json-pointer": "/a", "relative-json-pointer": "0",
	"regex": "a",
}

// str returns a string s accepts: of its format, matching its pattern, of
// a length within its bounds; "a" when nothing constrains it, or when no
// string that satisfies every constraint was found.
func str(s *schema) string {
	minLen, maxLen := 0, math.MaxInt
	if s.MinLength != nil {
		minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		maxLen = *s.MaxLength
	}
	// A pattern Go's regexp does not read is one the schema check does
	// not apply either.
	re, _ := regexp.Compile(s.Pattern)
	ok := func(v string) bool {
		n := utf8.RuneCountInString(v)
		return n >= minLen && n <= maxLen && (re == nil || re.MatchString(v))
	}
	var cands []string
	if f, known := formats[s.Format]; known {
		cands = append(cands, f)
	}
	if re != nil && s.Pattern != "" {
		for reps := range 8 {
			if v, good := matching(s.Pattern, reps, minLen); good {
				cands = append(cands, v)
			}
		}
	}
	cands = append(cands, strings.Repeat("a", max(minLen, 1)), strings.Repeat("a", min(max(minLen, 1), maxLen)))
	for _, v := range cands {
		if ok(v) {
			return v
		}
	}
	return "a"
}

// matching writes a string the pattern matches: each repetition taken
// reps times more than its least (or enough to reach minLen), each
// alternation's first branch, each class's first printable character.
func matching(pattern string, reps, minLen int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	var b strings.Builder
	var walk func(r *syntax.Regexp, depth int) bool
	walk = func(r *syntax.Regexp, depth int) bool {
		if depth > 100 || b.Len() > 4096 {
			return false
		}
		switch r.Op {
		case syntax.OpLiteral:
			b.WriteString(string(r.Rune))
		case syntax.OpCharClass:
			c, ok := classRune(r.Rune)
			if !ok {
				return false
			}
			b.WriteRune(c)
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('a')
		case syntax.OpCapture:
			return walk(r.Sub[0], depth+1)
		case syntax.OpConcat:
			for _, sub := range r.Sub {
				if !walk(sub, depth+1) {
					return false
				}
			}
		case syntax.OpAlternate:
			return walk(r.Sub[0], depth+1)
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
			lo, hi := 0, -1
			switch r.Op {
			case syntax.OpPlus:
				lo = 1
			case syntax.OpQuest:
				hi = 1
			case syntax.OpRepeat:
				lo, hi = r.Min, r.Max
			}
			n := lo + reps
			if hi >= 0 {
				n = min(n, hi)
			}
			for i := 0; i < n || hi < 0 && utf8.RuneCountInString(b.String()) < minLen && i < 64; i++ {
				if !walk(r.Sub[0], depth+1) {
					return false
				}
			}
		case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
			syntax.OpWordBoundary, syntax.OpNoWordBoundary: // checked on the whole below
		default: // no match: not written
			return false
		}
		return true
	}
	if !walk(re, 0) {
		return "", false
	}
	// An anchor or a word boundary the walk passed may not hold where it
	// stands in the string written.
	if m, err := regexp.Compile(pattern); err != nil || !m.MatchString(b.String()) {
		return "", false
	}
	return b.String(), true
}

// classRune returns the first character of a class that reads well: a
// letter or a digit, else any printable one.
func classRune(ranges []rune) (rune, bool) {
	var printable rune = -1
	for i := 0; i+1 < len(ranges); i += 2 {
		for c := ranges[i]; c <= ranges[i+1] && c-ranges[i] < 256; c++ {
			if unicode.IsLetter(c) || unicode.IsDigit(c) {
				return c, true
			}
			if printable < 0 && unicode.IsPrint(c) {
				printable = c
			}
		}
	}
	return printable, printable >= 0
}
