package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/internal/jsonkind"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/schemas"
)

// Bound is the range of a numeric config field: from Min (when HasMin;
// excluded when MinOpen) to Max (when HasMax; excluded when MaxOpen).
type Bound struct {
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	HasMin  bool    `json:"has_min"`
	HasMax  bool    `json:"has_max"`
	MinOpen bool    `json:"min_open,omitempty"`
	MaxOpen bool    `json:"max_open,omitempty"`
}

// Holds reports whether x lies within b.
func (b Bound) Holds(x float64) bool {
	if b.HasMin && (x < b.Min || x == b.Min && b.MinOpen) {
		return false
	}
	return !b.HasMax || x < b.Max || x == b.Max && !b.MaxOpen
}

// Widen widens out to hold b's numbers too.
func (out *Bound) Widen(b Bound) {
	if !b.HasMin || !out.HasMin {
		out.HasMin, out.Min, out.MinOpen = false, 0, false
	} else if b.Min < out.Min || b.Min == out.Min && !b.MinOpen {
		out.Min, out.MinOpen = b.Min, b.MinOpen
	}
	if !b.HasMax || !out.HasMax {
		out.HasMax, out.Max, out.MaxOpen = false, 0, false
	} else if b.Max > out.Max || b.Max == out.Max && !b.MaxOpen {
		out.Max, out.MaxOpen = b.Max, b.MaxOpen
	}
}

// Words says b: "from 1 to 10", "above 0".
func (b Bound) Words() string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	lo, hi := "from "+num(b.Min), "to "+num(b.Max)
	if b.MinOpen {
		lo = "above " + num(b.Min)
	}
	if b.MaxOpen {
		hi = "below " + num(b.Max)
	}
	switch {
	case b.HasMin && b.HasMax:
		return lo + " " + hi
	case b.HasMin:
		return lo
	}
	return hi
}

// durationSyntax is a duration as the schemas write it (#Duration), with
// a sign: a string of this form that time.ParseDuration refuses is longer
// than any time.Duration.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// DurationProblem says what is wrong with s as the value of a duration
// field (positive: one that must be above zero), or "" when nothing is:
// a duration below zero, or longer than a time.Duration holds (about 292
// years), is out of range. A string of another form is not a duration's
// bound to judge (a meter's window "month").
func DurationProblem(s string, positive bool) string {
	if !durationSyntax.MatchString(s) {
		return ""
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is out of range: longer than the longest duration, %s (about 292 years)", s, time.Duration(1<<63-1))
	case d < 0:
		return fmt.Sprintf("%q is out of range: a duration is never below zero", s)
	case d == 0 && positive:
		return fmt.Sprintf("%q is out of range: must be above zero", s)
	}
	return ""
}

// configBounds is what the builtins' catalog (schemas/catalog.json) says
// of their config fields, by builtin id and dotted field path
// ("breaker.failures"): every field with the kind of value it holds
// (a struct that takes any key is "map"), the numeric fields' ranges, the
// duration fields (true for those that must be above zero) and the words
// a duration field takes besides durations (a meter's window: "month").
type configBounds struct {
	Fields        map[string]map[string]string   `json:"fields"`
	Bounds        map[string]map[string]Bound    `json:"bounds"`
	Durations     map[string]map[string]bool     `json:"durations"`
	DurationWords map[string]map[string][]string `json:"duration_words"`
}

var builtinBounds = sync.OnceValue(func() configBounds {
	var b configBounds
	if err := json.Unmarshal(schemas.CatalogJSON, &b); err != nil {
		panic("schemas/catalog.json: " + err.Error()) // a test decodes it
	}
	return b
})

// configProblems lists what is wrong, as its schema says, with the
// configs of builtin layers: a key the schema lacks, or spells in another
// case (the layer's decoder matches keys regardless of case, so
// "Failures" would escape the bound of "failures"), a key holding a dot
// ("breaker.failures", which the layer's decoder does not read as a path
// and refuses at Build), a value of another
// kind or null, a number with a fraction or an exponent where an integer
// goes (the decoder refuses 3.0 as it refuses 3.5), a number outside its
// bounds, a duration that does not parse or is out of range. vet refuses
// them all, and a plan edited by hand to hold one would fail at Build or
// run a layer no policy can ask for (a breaker that never opens, a budget
// of a billion billion tokens). The elements of lists (tool_policy's
// arg_patterns) and the values of maps keyed by names (tracing's
// attributes) are held to the same: their kind, and an object's keys; a
// map's keys are names of the host's, matched exactly. A module that is
// not a builtin has no schema here: its decoder judges its config, here
// when the runtime set CheckModuleConfig.
func configProblems(p *Plan) []string {
	cat := builtinBounds()
	var out []string
	for _, stage := range Stages {
		for i, l := range p.Chains.Of(stage) {
			fields := cat.Fields[l.Use]
			if len(l.Config) == 0 {
				continue
			}
			if fields == nil {
				if check := moduleCheck.Load(); check != nil {
					if ptr, msg, bad := (*check)(l.Use, l.Config); bad {
						out = append(out, fmt.Sprintf("/chains/%s/%d/config%s: %s", stage, i, ptr, msg))
					}
				}
				continue
			}
			var config map[string]any
			dec := json.NewDecoder(bytes.NewReader(l.Config))
			dec.UseNumber()
			if dec.Decode(&config) != nil {
				continue // the schema made it an object
			}
			c := configCheck{use: l.Use, fields: fields, bounds: cat.Bounds[l.Use],
				durations: cat.Durations[l.Use], words: cat.DurationWords[l.Use]}
			c.object(fmt.Sprintf("/chains/%s/%d/config", stage, i), "", config, false)
			out = append(out, c.out...)
		}
	}
	return out
}

// ModuleConfigCheck decodes the config of a layer whose module is not a
// builtin, as Build would, and says what is wrong with it: the JSON
// pointer below the config of the value (or the unknown key) at fault and
// the problem; bad is false when it decodes or the module is unknown.
type ModuleConfigCheck func(use string, config json.RawMessage) (ptr, msg string, bad bool)

var moduleCheck atomic.Pointer[ModuleConfigCheck]

// CheckModuleConfig has Decode check, with check, the config of each
// layer that is not a builtin's (whose schema Decode holds it to), so that
// a custom module's config that does not fit it is refused at its place
// in the plan file, as a builtin's is. The runtime sets it; a program that
// does not link the runtime leaves those configs to it.
func CheckModuleConfig(check ModuleConfigCheck) { moduleCheck.Store(&check) }

// The catalog's path segments below a list and a map keyed by names: a
// list's elements are at its path and ElementSegment
// ("arg_patterns.[].arg"), a map's values at its path and ValueSegment
// ("attributes.*"). Neither is a key a config writes: a key holding a dot
// is refused, and a map's keys are not looked up.
const (
	ElementSegment = "[]"
	ValueSegment   = "*"
)

// fieldWords writes a catalog path as messages do: "arg_patterns[].arg",
// "attributes.<name>".
func fieldWords(path string) string {
	path = strings.ReplaceAll(path, "."+ElementSegment, "[]")
	return strings.ReplaceAll(path, "."+ValueSegment, ".<name>")
}

// configCheck checks one builtin layer's config against the catalog.
type configCheck struct {
	use       string
	fields    map[string]string
	bounds    map[string]Bound
	durations map[string]bool
	words     map[string][]string
	out       []string
}

// object checks the members of the config's object at the JSON pointer
// loc and dotted path prefix ("" for the config, "breaker." below);
// open is true for a struct that takes any key.
func (c *configCheck) object(loc, prefix string, obj map[string]any, open bool) {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		path, kloc := prefix+key, loc+"/"+jsonpointer.Escape(key)
		if open {
			// A map's keys are names; its values are of one kind.
			if kind, ok := c.fields[prefix+ValueSegment]; ok {
				c.value(kloc, prefix+ValueSegment, kind, obj[key])
			}
			continue
		}
		if strings.Contains(key, ".") {
			// The catalog's paths join names with dots; no name holds one.
			c.out = append(c.out, fmt.Sprintf("%s: unknown field %q: %s", kloc, key, nested(prefix, key, c.fields)))
			continue
		}
		kind, ok := c.fields[path]
		if !ok {
			c.out = append(c.out, fmt.Sprintf("%s: unknown field %q: %s", kloc, key, c.spelling(prefix, key)))
			continue
		}
		c.value(kloc, path, kind, obj[key])
	}
}

// nested says why a key holding a dot is refused: a key names one field,
// and a path of fields is written nested, as the field it names shows.
func nested(prefix, key string, fields map[string]string) string {
	msg := "a key names one field, not a path"
	if _, ok := fields[prefix+key]; !ok || fieldWords(prefix+key) != prefix+key {
		return msg
	}
	parts := strings.Split(key, ".")
	obj := "..."
	for i := len(parts) - 1; i >= 0; i-- {
		obj = fmt.Sprintf("{%q:%s}", parts[i], obj)
	}
	return msg + ": nest it as " + obj
}

// spelling says why key, unknown at prefix, is refused: the field it
// names in another case, or none.
func (c *configCheck) spelling(prefix, key string) string {
	for _, path := range slices.Sorted(maps.Keys(c.fields)) {
		name, ok := strings.CutPrefix(path, prefix)
		if ok && !strings.Contains(name, ".") && strings.EqualFold(name, key) {
			return fmt.Sprintf("%s's config spells it %q (keys match the fields exactly)", c.use, name)
		}
	}
	return fmt.Sprintf("%s's config has no such field (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)", c.use)
}

// value checks the value v of the field at path, of the catalog's kind,
// at loc.
func (c *configCheck) value(loc, path, kind string, v any) {
	if kind == "any" {
		return
	}
	want, known := jsonkind.Named(kind)
	if got := jsonkind.Of(v); known && got != want && !(want == "an integer" && got == "a number") {
		c.out = append(c.out, fmt.Sprintf("%s: %s: %s's %s is %s", loc, got, c.use, fieldWords(path), want))
		return
	}
	switch v := v.(type) {
	case map[string]any:
		c.object(loc, path+".", v, kind == "map")
	case []any:
		if elem, ok := c.fields[path+"."+ElementSegment]; ok {
			for i, e := range v {
				c.value(fmt.Sprintf("%s/%d", loc, i), path+"."+ElementSegment, elem, e)
			}
		}
	case json.Number:
		if kind == "int" && strings.ContainsAny(string(v), ".eE") {
			c.out = append(c.out, fmt.Sprintf("%s: %s is not an integer as the layer's decoder reads one (digits only, no fraction or exponent): %s's %s is an integer", loc, v, c.use, fieldWords(path)))
			return
		}
		f, err := v.Float64()
		if b, ok := c.bounds[path]; ok && err == nil && !b.Holds(f) {
			c.out = append(c.out, fmt.Sprintf("%s: %s is out of range: %s's %s is %s", loc, v, c.use, fieldWords(path), b.Words()))
		}
	case string:
		positive, ok := c.durations[path]
		if !ok || slices.Contains(c.words[path], v) {
			return
		}
		if !durationSyntax.MatchString(v) {
			also := ""
			for _, w := range c.words[path] {
				also += fmt.Sprintf(", or %q", w)
			}
			c.out = append(c.out, fmt.Sprintf("%s: %s's %s %q is not a duration: a Go duration such as \"250ms\", \"30s\" or \"1h30m\"%s", loc, c.use, fieldWords(path), v, also))
		} else if msg := DurationProblem(v, positive); msg != "" {
			c.out = append(c.out, fmt.Sprintf("%s: %s's %s %s", loc, c.use, fieldWords(path), msg))
		}
	}
}

// ConfigValue returns the value at the dotted path of a decoded config
// ("breaker.cooldown"), nil when it is absent.
func ConfigValue(config map[string]any, path string) any {
	var v any = config
	for _, key := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[key]
	}
	return v
}
