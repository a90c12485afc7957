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
	"time"

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
// of the bounds of their config fields, by builtin id and dotted field
// path ("breaker.failures"): the numeric fields' ranges and the duration
// fields (true for those that must be above zero).
type configBounds struct {
	Bounds    map[string]map[string]Bound `json:"bounds"`
	Durations map[string]map[string]bool  `json:"durations"`
}

var builtinBounds = sync.OnceValue(func() configBounds {
	var b configBounds
	if err := json.Unmarshal(schemas.CatalogJSON, &b); err != nil {
		panic("schemas/catalog.json: " + err.Error()) // a test decodes it
	}
	return b
})

// configProblems lists the fields of builtin layers' configs, nested ones
// included, whose value lies outside the bounds their schema gives: vet
// refuses them, and a plan edited by hand to hold one would run a layer
// no policy can ask for (a breaker that never opens, a budget of a
// billion billion tokens).
func configProblems(p *Plan) []string {
	cat := builtinBounds()
	var out []string
	for _, stage := range Stages {
		for i, l := range p.Chains.Of(stage) {
			bounds, durations := cat.Bounds[l.Use], cat.Durations[l.Use]
			if len(l.Config) == 0 || len(bounds)+len(durations) == 0 {
				continue
			}
			var config map[string]any
			dec := json.NewDecoder(bytes.NewReader(l.Config))
			dec.UseNumber()
			if dec.Decode(&config) != nil {
				continue // the schema made it an object
			}
			loc := fmt.Sprintf("/chains/%s/%d/config", stage, i)
			for _, path := range slices.Sorted(maps.Keys(bounds)) {
				n, ok := ConfigValue(config, path).(json.Number)
				if !ok {
					continue // absent, or another kind: the layer's decoder refuses it
				}
				f, err := n.Float64()
				if b := bounds[path]; err == nil && !b.Holds(f) {
					out = append(out, fmt.Sprintf("%s%s: %s is out of range: %s's %s is %s", loc, pointer(path), n, l.Use, path, b.Words()))
				}
			}
			for _, path := range slices.Sorted(maps.Keys(durations)) {
				s, ok := ConfigValue(config, path).(string)
				if !ok {
					continue
				}
				if msg := DurationProblem(s, durations[path]); msg != "" {
					out = append(out, fmt.Sprintf("%s%s: %s's %s %s", loc, pointer(path), l.Use, path, msg))
				}
			}
		}
	}
	return out
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

// pointer turns a dotted field path into the JSON pointer suffix of its
// value: "breaker.failures" -> "/breaker/failures".
func pointer(path string) string {
	var b strings.Builder
	for _, key := range strings.Split(path, ".") {
		b.WriteString("/" + jsonpointer.Escape(key))
	}
	return b.String()
}
