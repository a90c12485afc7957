package scenario

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/internal/jsonfields"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// unknownField is where a scenario names a field its format does not have,
// or gives a value of the wrong type.
type unknownField struct {
	// path is the object holding the field ("steps[1].tool"; "" at the top
	// level), off the offset of the field's name in the input.
	path string
	off  int64
	name string
	// known are the fields the object may have.
	known []string
	// For a value of the wrong type, path is its place, got what it is
	// ("a number (5)") and want what the place takes ("a string").
	got, want string
}

// message says what is unknown and, when one is close, which field was
// meant; or what the value is and what is expected instead.
func (u *unknownField) message() string {
	if u.want != "" {
		if u.path == "" {
			return fmt.Sprintf("the scenario is %s, where %s is expected", u.got, u.want)
		}
		return fmt.Sprintf("%s: %s, where %s is expected", u.path, u.got, u.want)
	}
	msg := fmt.Sprintf("unknown field %q", u.name)
	if best := textdist.Closest(u.name, u.known); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	if u.path != "" {
		msg = u.path + ": " + msg
	}
	return msg
}

// findUnknown walks data along the scenario's types and returns every
// field that none of them has, and every value of the wrong type, each with
// its full path (encoding/json reports only the first, by its name or a
// path without list indices and map keys, in terms of Go types), so that
// one round reports them all.
func findUnknown(data []byte) []*unknownField {
	w := walker{dec: json.NewDecoder(bytes.NewReader(data)), data: data, types: true, collect: true}
	w.dec.UseNumber()
	if _, err := w.walk(reflect.TypeFor[Scenario](), ""); err != nil && len(w.found) == 0 {
		return nil
	}
	return w.found
}

// walker reads a JSON document along a Go type (jsonfields.Walk).
type walker struct {
	dec  *json.Decoder
	data []byte
	// exact matches field names exactly; else, as encoding/json decodes,
	// regardless of case.
	exact bool
	// types reports a value of the wrong type.
	types bool
	// collect gathers every problem in found, walking on past each,
	// rather than returning the first.
	collect bool
	found   []*unknownField
}

// Error makes a problem the error that ends a walk.
func (u *unknownField) Error() string { return u.message() }

// report returns u, or with collect gathers it and returns nil.
func (w *walker) report(u *unknownField) *unknownField {
	if !w.collect {
		return u
	}
	w.found = append(w.found, u)
	return nil
}

// walk reads one value of type t: the first problem without collect, or
// the decoder's error.
func (w *walker) walk(t reflect.Type, path string) (*unknownField, error) {
	jw := jsonfields.Walk{Dec: w.dec, Member: w.member, Field: fieldpath.Join, Key: fieldpath.Join,
		Index: func(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }}
	if w.types {
		jw.Value = w.value
	}
	err := jw.Read(t, path)
	var u *unknownField
	if errors.As(err, &u) {
		return u, nil
	}
	return nil, err
}

// member returns the type of the field key of fields, at path, or reports
// it unknown (and nil: its value is skipped).
func (w *walker) member(path, key string, fields map[string]reflect.Type) (reflect.Type, error) {
	if ft, ok := fields[key]; ok {
		return ft, nil
	}
	if !w.exact {
		for name, f := range fields {
			if strings.EqualFold(name, key) {
				return f, nil
			}
		}
	}
	known := make([]string, 0, len(fields))
	for name := range fields {
		known = append(known, name)
	}
	sort.Strings(known)
	off := w.dec.InputOffset() - int64(len(key)) - 2
	if u := w.report(&unknownField{path: path, off: max(off, 0), name: key, known: known}); u != nil {
		return nil, u
	}
	return nil, nil
}

// value reports a value of the wrong type (its first token tok, read at
// the offset before), which is then skipped.
func (w *walker) value(path string, t reflect.Type, tok json.Token, before int64) (bool, error) {
	got, want := mismatch(tok, t)
	if want == "" {
		return false, nil
	}
	if u := w.report(&unknownField{path: path, off: jsonwalk.ValueStart(w.data, before), got: got, want: want}); u != nil {
		return false, u
	}
	return true, nil
}

// mismatch describes a JSON token that a value of type t cannot take (got,
// with the value when it is short) and what t takes (want); want is ""
// when t takes it.
func mismatch(tok json.Token, t reflect.Type) (got, want string) {
	switch t.Kind() {
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Slice, reflect.Array:
		want = "a list"
	default:
		return "", ""
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' && want == "an object" || v == '[' && want == "a list" {
			return "", ""
		}
		if v == '{' {
			return "an object", want
		}
		return "a list", want
	case string:
		if want == "a string" {
			return "", ""
		}
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		return fmt.Sprintf("a string (%q)", v), want
	case bool:
		if want == "true or false" {
			return "", ""
		}
		return fmt.Sprintf("%t", v), want
	case json.Number:
		var ok bool
		switch want {
		case "a number":
			_, err := v.Float64()
			ok = err == nil
		case "an integer":
			_, err := strconv.ParseInt(string(v), 10, t.Bits())
			ok = err == nil
		case "a non-negative integer":
			_, err := strconv.ParseUint(string(v), 10, t.Bits())
			ok = err == nil
		}
		if ok {
			return "", ""
		}
		return fmt.Sprintf("a number (%s)", v), want
	}
	return "", ""
}

// CheckWant reports the first field of want, the expected subset of a
// run's result (a test case's want, a conformance case's want/run.json),
// that the result's format does not have, with a did-you-mean; or every
// step's outcome, stage and error kind the result never has (errors.Join:
// one error a line, each starting with its place). A misspelt
// field would otherwise be compared as missing, or, with null or [],
// pass as an absence that was never checked.
func CheckWant(want []byte) error {
	// A want that is not an object compares with nothing of the result.
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.UseNumber()
	if tok, err := dec.Token(); err == nil && tok != nil {
		if got, _ := mismatch(tok, reflect.TypeFor[Result]()); got != "" {
			return fmt.Errorf("%s, where an object is expected: the fields of the run's result to compare", got)
		}
	}
	// The result's fields are compared as named: Audit would not be
	// the result's audit, and [] or null there would assert nothing.
	wk := walker{dec: json.NewDecoder(bytes.NewReader(want)), data: want, exact: true}
	wk.dec.UseNumber()
	u, err := wk.walk(reflect.TypeFor[Result](), "")
	if err != nil {
		return err
	}
	if u != nil {
		return errors.New(u.message())
	}
	if errs := checkWantValues(want); len(errs) > 0 {
		return errors.Join(errs...)
	}
	// executions and calls list every declared model and tool with its
	// count: null there would match a name that is not listed (a misspelt
	// one) and assert nothing.
	type counts struct {
		Models map[string]json.RawMessage `json:"models"`
		Tools  map[string]json.RawMessage `json:"tools"`
	}
	var w struct {
		Executions counts `json:"executions"`
		Calls      counts `json:"calls"`
	}
	if json.Unmarshal(want, &w) != nil {
		return nil // not an object: the comparison reports it
	}
	for _, m := range []struct {
		what   string
		counts map[string]json.RawMessage
	}{{"executions.models", w.Executions.Models}, {"executions.tools", w.Executions.Tools}, {"calls.models", w.Calls.Models}, {"calls.tools", w.Calls.Tools}} {
		for _, name := range slices.Sorted(maps.Keys(m.counts)) {
			if v := strings.TrimSpace(string(m.counts[name])); v == "null" || strings.ReplaceAll(v, " ", "") == "[]" {
				return fmt.Errorf("%s: %s asserts nothing (every declared name is listed with its count); write 0 for a call that must not happen", fieldpath.Join(m.what, name), v)
			}
		}
	}
	return nil
}

// FillFalse adds to got, a run's result in its JSON form, as false each
// flag that want, the expected subset, gives and that the result leaves
// out: a Go bool the result omits when it is false (crashed, a step's
// refusal) is false when absent, so that a want of false passes where the
// flag is not set, and a want of true fails with "want true, got false"
// rather than "missing". A flag absent for another reason (a *bool left
// unset) is not filled in.
func FillFalse(want, got any) {
	fillFalse(reflect.TypeFor[Result](), want, got)
}

func fillFalse(t reflect.Type, want, got any) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(marshalerType) || t.Implements(marshalerType) {
		return // its JSON form is its own
	}
	switch t.Kind() {
	case reflect.Struct:
		w, _ := want.(map[string]any)
		g, _ := got.(map[string]any)
		if w == nil || g == nil {
			return
		}
		fields := jsonfields.Of(t)
		for k, wv := range w {
			ft, ok := fields[k]
			if !ok {
				continue
			}
			gv, present := g[k]
			if _, isBool := wv.(bool); isBool && ft.Kind() == reflect.Bool && !present {
				g[k] = false
				continue
			}
			if present {
				fillFalse(ft, wv, gv)
			}
		}
	case reflect.Slice, reflect.Array:
		w, _ := want.([]any)
		g, _ := got.([]any)
		for i := range min(len(w), len(g)) {
			fillFalse(t.Elem(), w[i], g[i])
		}
	case reflect.Map:
		w, _ := want.(map[string]any)
		g, _ := got.(map[string]any)
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				fillFalse(t.Elem(), wv, gv)
			}
		}
	}
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// The values a step's result takes: a want naming another could never be
// met.
var (
	outcomes = []string{"ok", "blocked", "budget", "in_doubt", "error", "crash"}
	stages   = []string{"chat", "tool", "admit", "turn", "agent", "parallel", "state", "checkpoint", "crash", "resume"}
	// errorKinds are runtime.KindOf's; a host's error may carry a kind
	// of its own, so only a value close to one of these is refused.
	errorKinds = []string{"blocked", "budget", "in_doubt", "transient", "rate_limited", "timeout", "permanent",
		"breaker_open", "store_unavailable", "canceled", "failure"}
)

// checkWantValues refuses a want whose steps expect an outcome or a stage
// the result never has, or an error kind close to one it has (a misspelt
// "block"): the case could only fail, with a difference that does not say
// the want is wrong. A value there that is not a string is refused too, and
// the rest is still checked: every problem is returned.
func checkWantValues(want []byte) []error {
	var w map[string]any
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.UseNumber()
	if dec.Decode(&w) != nil {
		return nil // the walk above reports what is not the result's
	}
	return checkWantSteps("steps", w["steps"])
}

// checkWantSteps checks the want's steps at path, a list of objects (what
// is not is compared with the result, which reports it).
func checkWantSteps(path string, steps any) []error {
	list, _ := steps.([]any)
	var errs []error
	for i, st := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		step, _ := st.(map[string]any)
		if err := checkWantValue(at+".outcome", step["outcome"], "an outcome", outcomes, true); err != nil {
			errs = append(errs, err)
		}
		if err := checkWantValue(at+".stage", step["stage"], "a stage", stages, true); err != nil {
			errs = append(errs, err)
		}
		if e, ok := step["error"].(map[string]any); ok {
			// A host's error may carry a kind of its own: only one close
			// to a known kind is refused.
			if err := checkWantValue(at+".error.kind", e["kind"], "an error kind", errorKinds, false); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, checkWantSteps(at+".steps", step["steps"])...)
	}
	return errs
}

// checkWantValue refuses v, the want's value at path, when it is not a
// string, or, being one, not one of known: any other (all), or one close to
// one of them (!all). A null or absent value is not checked.
func checkWantValue(path string, v any, what string, known []string, all bool) error {
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		var tok json.Token = v
		switch v.(type) {
		case map[string]any:
			tok = json.Delim('{')
		case []any:
			tok = json.Delim('[')
		}
		got, want := mismatch(tok, reflect.TypeFor[string]())
		return fmt.Errorf("%s: %s, where %s is expected", path, got, want)
	}
	if slices.Contains(known, s) {
		return nil
	}
	if all {
		return fmt.Errorf("%s: %q is not %s (%s)%s", path, s, what, strings.Join(known, ", "), didYouMean(s, known))
	}
	if hint := didYouMean(s, known); hint != "" {
		return fmt.Errorf("%s: %q is not %s%s", path, s, what, hint)
	}
	return nil
}

func didYouMean(v string, known []string) string {
	if best := textdist.Closest(v, known); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// CheckWantNames refuses a want (its JSON form decoded) that names what a
// run of s (nil: a scenario without scripts) under p cannot report: a
// misspelt name would only fail the case with a difference. Its steps'
// errors must come from a layer p has: the chains' entries, the
// declarations' check on entry (runtime.LayerTools), the checkpoints and
// the grounding, and each state field ("state.limit") with its handlers
// ("state.limit.on_set[0]"). Its executions must count models and tools
// the result lists: those p declares and those s scripts. An empty audit
// (audit: [] or null, "no record was written") under a policy nothing of
// which writes a record would hold for any run, and is refused too, as is
// a meter under a policy whose chat chain has no meter (all zeros), an
// empty trace with no tracing layer, checkpoints: null with no checkpoint
// layer nor step, and state: null with no state section.
func CheckWantNames(want any, p *plan.Plan, s *Scenario) error {
	if err := checkExecutionNames(want, p, s); err != nil {
		return err
	}
	if w, ok := want.(map[string]any); ok {
		if a, present := w["audit"]; present && !writesAudit(p) {
			if list, _ := a.([]any); len(list) == 0 {
				return errors.New(`audit: nothing in the policy writes an audit record (no audit layer, grounding record_grounding nor state sink "audit"), so an empty audit holds for any run`)
			}
		}
		if _, present := w["meter"]; present && !slices.ContainsFunc(p.Chains.Chat, func(l plan.Layer) bool { return l.Use == "meter" }) {
			return errors.New(`meter: the policy's chat chain has no meter, so the result's meter is all zeros in every run`)
		}
		// An empty trace under a policy with no tracing layer (nor a
		// layer of a module not registered here, which may record spans),
		// checkpoints: null under one with no checkpoint layer whose
		// scenario saves and resumes none, state: null under one with no
		// state section: each holds for any run.
		if t, present := w["trace"]; present {
			if list, _ := t.([]any); len(list) == 0 && !mayTrace(p) {
				return errors.New("trace: the policy has no tracing layer, so a run records no span and an empty trace holds for any run")
			}
		}
		if cp, present := w["checkpoints"]; present && cp == nil {
			var steps []Step
			if s != nil {
				steps = s.Steps
			}
			if _, ok := checkpointStore(p, steps); !ok {
				return errors.New("checkpoints: the policy has no checkpoint layer and no step saves or resumes one, so a run reports no checkpoints and null holds for any run")
			}
		}
		if st, present := w["state"]; present && st == nil && p.State == nil {
			return errors.New("state: the policy declares no state, so a run reports none and null holds for any run")
		}
	}
	var names []string
	for _, chain := range [][]plan.Layer{p.Chains.Chat, p.Chains.Tool, p.Chains.Turn} {
		for _, l := range chain {
			name := cmp.Or(l.Name, l.Use)
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	known := func(layer string) bool {
		switch layer {
		case "", runtime.LayerTools, runtime.LayerCheckpoint, runtime.LayerGrounding:
			return true
		}
		if rest, ok := strings.CutPrefix(layer, "state."); ok && p.State != nil {
			field, _, _ := strings.Cut(rest, ".")
			_, declared := p.State.Fields[field]
			return declared
		}
		return slices.Contains(names, layer)
	}
	w, _ := want.(map[string]any)
	steps, _ := w["steps"].([]any)
	return checkLayersIn("steps", steps, known, names)
}

func checkLayersIn(path string, steps []any, known func(string) bool, names []string) error {
	for i, s := range steps {
		st, _ := s.(map[string]any)
		at := fmt.Sprintf("%s[%d]", path, i)
		if e, ok := st["error"].(map[string]any); ok {
			if layer, ok := e["layer"].(string); ok && !known(layer) {
				list := "its chains have no layers"
				if len(names) > 0 {
					list = "its layers: " + strings.Join(names, ", ")
				}
				return fmt.Errorf("%s.error.layer: the policy has no layer %q, so no error comes from it%s (%s)",
					at, layer, didYouMean(layer, names), list)
			}
		}
		nested, _ := st["steps"].([]any)
		if err := checkLayersIn(at+".steps", nested, known, names); err != nil {
			return err
		}
	}
	return nil
}

// writesAudit reports whether a run under p may write an audit record: p
// has a layer whose module records (an audit layer, a host's middleware
// declaring the trait) or that is not registered here, the grounding
// records, or a state field has a sink of kind audit.
func writesAudit(p *plan.Plan) bool {
	for _, chain := range [][]plan.Layer{p.Chains.Chat, p.Chains.Tool, p.Chains.Turn} {
		for _, l := range chain {
			m, ok := runtime.LookupModule(l.Use)
			if !ok || l.Use != "meter" && m.HasTrait(runtime.TraitRecords) {
				return true
			}
		}
	}
	if p.Grounding != nil && p.Grounding.Record {
		return true
	}
	if p.State != nil {
		for _, f := range p.State.Fields {
			for _, sink := range f.Background {
				if sink.Sink == "audit" {
					return true
				}
			}
		}
	}
	return false
}

// checkExecutionNames refuses a count under the want's executions or calls
// of a model or tool the result does not list.
func checkExecutionNames(want any, p *plan.Plan, s *Scenario) error {
	w, _ := want.(map[string]any)
	for _, of := range []string{"executions", "calls"} {
		ex, _ := w[of].(map[string]any)
		for _, k := range []struct {
			field, kind string
			declared    []string
			scripted    []string
		}{
			{"models", "model", slices.Collect(maps.Keys(p.Models)), scriptNames(s, true)},
			{"tools", "tool", slices.Collect(maps.Keys(p.Tools)), scriptNames(s, false)},
		} {
			counts, _ := ex[k.field].(map[string]any)
			listed := append(k.declared, k.scripted...)
			slices.Sort(listed)
			listed = slices.Compact(listed)
			for _, name := range slices.Sorted(maps.Keys(counts)) {
				if !slices.Contains(listed, name) {
					return fmt.Errorf("%s.%s: the result counts no %s %q (it counts the %s the policy declares and those the scenario scripts: %s)%s",
						of, fieldpath.Join(k.field, name), k.kind, name, k.field, strings.Join(listed, ", "), didYouMean(name, listed))
				}
			}
		}
	}
	return nil
}

// scriptNames lists the models (or tools) s scripts.
func scriptNames(s *Scenario, models bool) []string {
	if s == nil {
		return nil
	}
	if models {
		return slices.Collect(maps.Keys(s.Models))
	}
	return slices.Collect(maps.Keys(s.Tools))
}

// mayTrace reports whether a run under p may record a span: p has a
// tracing layer, or a layer of a host's module (registered or not), which
// may record spans through BuildContext.TracerProvider.
func mayTrace(p *plan.Plan) bool {
	for _, chain := range [][]plan.Layer{p.Chains.Chat, p.Chains.Tool, p.Chains.Turn} {
		for _, l := range chain {
			if m, ok := runtime.LookupModule(l.Use); !ok || !m.Builtin || l.Use == "tracing" {
				return true
			}
		}
	}
	return false
}
