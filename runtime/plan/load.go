package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/schemas"
)

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

func planSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		const url = "plan.schema.json"
		if err := c.AddResource(url, bytes.NewReader(schemas.PlanJSONSchema)); err != nil {
			schemaErr = err
			return
		}
		schema, schemaErr = c.Compile(url)
	})
	return schema, schemaErr
}

// Error is a plan that failed validation. Problems lists each violation as
// "<json pointer> (line L, col C): <message>" (a fault of the JSON
// syntax as "line L, col C: not JSON: <message>").
type Error struct {
	// Source names the plan: Load's path, Decode's source.
	Source   string
	Problems []string
}

// Error names the plan, then each problem on a line of its own.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid plan %s:\n\t%s", e.Source, strings.Join(e.Problems, "\n\t"))
}

// byteOrderMark is the UTF-8 encoding of U+FEFF.
const byteOrderMark = "\uFEFF"

// Decode validates data against the plan schema and decodes it. A leading
// UTF-8 byte order mark is skipped. source names
// the data in errors. A plan that is not JSON, repeats a key in an object,
// holds a number that no float64 holds (or of more than MaxNumberLength
// characters), does not match the schema, has another version, repeats a layer name
// within a chain (a layer's name defaults to its use), fails references or
// holds a builtin's config that its schema refuses, nested fields included
// (a key it lacks or spells in another case, a value of another kind, a
// fraction for an integer, a number out of range, a duration that does
// not parse, is negative or longer than a time.Duration holds) returns
// *Error.
func Decode(source string, data []byte) (*Plan, error) {
	s, err := planSchema()
	if err != nil {
		return nil, fmt.Errorf("plan schema: %w", err)
	}
	// A byte order mark (as Windows editors save UTF-8) is no part of
	// the JSON: RFC 8259 lets a reader ignore it.
	data = bytes.TrimPrefix(data, []byte(byteOrderMark))
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, &Error{Source: source, Problems: []string{syntaxProblem(data, err)}}
	}
	if dec.More() {
		off := jsonwalk.ValueStart(data, dec.InputOffset())
		return nil, &Error{Source: source, Problems: []string{at(data, off) + ": trailing data after the plan object"}}
	}
	if obj, ok := doc.(map[string]any); ok {
		if v, ok := obj["version"].(json.Number); ok && !sameNumber(v, Version) {
			// The schema would say only that the value must be 1.
			return nil, &Error{Source: source, Problems: locate([]string{fmt.Sprintf(
				"/version: plan format %s; this agentc reads format %d (build the plan again with the agentc that loads it)", v, Version)}, data)}
		}
	}
	dups, nums := scan(data)
	if len(dups) > 0 {
		return nil, &Error{Source: source, Problems: dups}
	}
	if len(nums) > 0 {
		// Before the schema: its validator's arithmetic crashes on an
		// exponent beyond a million and slows down with the digits.
		return nil, &Error{Source: source, Problems: nums}
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !asValidationError(err, &ve) {
			return nil, &Error{Source: source, Problems: []string{err.Error()}}
		}
		return nil, &Error{Source: source, Problems: locate(flatten(ve, doc), data)}
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, &Error{Source: source, Problems: []string{typeProblem(data, err)}}
	}
	problems := duplicateNames(&p)
	problems = append(problems, references(&p)...)
	problems = append(problems, configProblems(&p)...)
	problems = append(problems, durationProblems(&p)...)
	if len(problems) > 0 {
		return nil, &Error{Source: source, Problems: locate(problems, data)}
	}
	return &p, nil
}

// duplicateNames lists the layers whose name (Use when unnamed) an earlier
// layer of the same chain already has, by JSON pointer.
func duplicateNames(p *Plan) []string {
	var out []string
	for _, stage := range Stages {
		chain := p.Chains.Of(stage)
		for _, d := range Duplicates(chain) {
			loc := fmt.Sprintf("/chains/%s/%d/name", stage, d.Index)
			if chain[d.Index].Name == "" {
				loc = fmt.Sprintf("/chains/%s/%d", stage, d.Index)
			}
			out = append(out, fmt.Sprintf("%s: duplicate layer name %q in the %s chain (also /chains/%s/%d)", loc, d.Name, stage, stage, d.First))
		}
	}
	return out
}

// Duplicate is a layer whose name an earlier layer of its chain has.
type Duplicate struct {
	// Name is the name the two layers share (a layer's Use when it is
	// unnamed).
	Name string
	// Index is the layer's index in the chain; First is the earlier one's.
	Index, First int
}

// Duplicates returns the layers of a chain whose name (Use when unnamed) an
// earlier layer already has, in chain order. It is the one rule for layer
// names: Decode refuses a plan that breaks it and agentc vet reports a
// policy that would.
func Duplicates(chain []Layer) []Duplicate {
	var out []Duplicate
	first := map[string]int{}
	for i, l := range chain {
		name := l.Name
		if name == "" {
			name = l.Use
		}
		if j, ok := first[name]; ok {
			out = append(out, Duplicate{Name: name, Index: i, First: j})
			continue
		}
		first[name] = i
	}
	return out
}

// MaxFileSize bounds the size of a plan file that Load reads.
const MaxFileSize = 64 << 20

// Load reads a plan file and decodes it with Decode. A file that is not a
// regular file (a FIFO would block the load) or holds more than MaxFileSize
// bytes is an error.
func Load(path string) (*Plan, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, &Error{Source: path, Problems: []string{"a directory, not a plan file (a policy directory? build its plan with `agentc build -o plan.json DIR` and load that)"}}
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{Source: path, Problems: []string{"not a regular file"}}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{Source: path, Problems: []string{fmt.Sprintf("larger than %d MiB", MaxFileSize>>20)}}
	}
	p, err := Decode(path, data)
	var perr *Error
	if strings.HasSuffix(path, ".cue") && errors.As(err, &perr) && len(perr.Problems) == 1 && strings.Contains(perr.Problems[0], "not JSON") {
		perr.Problems[0] += " (a CUE policy, not its plan? build the plan with `agentc build -o plan.json POLICY` and load that)"
	}
	return p, err
}

// Encode writes p as indented JSON with a trailing newline.
func Encode(p *Plan) ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// reserved says, for a value the plan schema reserves, which field holds
// it and what reserves it: the schema writes a reserved value as an "if"
// that matches it and a "then" whose "const" says why, which the
// validator reports as a bare "value must be" that constant.
func reserved(e *jsonschema.ValidationError, doc any) (string, bool) {
	if !strings.HasSuffix(e.KeywordLocation, "/then/const") {
		return "", false
	}
	why, err := strconv.Unquote(strings.TrimPrefix(e.Message, "value must be "))
	if err != nil {
		return "", false
	}
	v, field := doc, "value"
	for _, tok := range jsonpointer.Tokens(e.InstanceLocation) {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", false // only object members are reserved
		}
		v, field = obj[tok], tok
	}
	return fmt.Sprintf("%s %s is reserved: %s", field, valueText(v), why), true
}

// valueText writes a decoded JSON value as JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func asValidationError(err error, target **jsonschema.ValidationError) bool {
	ve, ok := err.(*jsonschema.ValidationError)
	if ok {
		*target = ve
	}
	return ok
}

// flatten lists the leaf causes of a validation error, sorted, because the
// library's order is not stable. doc is the validated document.
func flatten(ve *jsonschema.ValidationError, doc any) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			msg := e.Message
			if strings.HasPrefix(msg, "additionalProperties ") {
				msg += ": this agentc knows no such field (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)"
			}
			if r, ok := reserved(e, doc); ok {
				msg = r
			}
			out = append(out, fmt.Sprintf("%s: %s", loc, msg))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(out)
	return out
}

// references checks what the schema cannot: that every tool a layer, a
// predicate or invariants.max_executions names is declared (as agentc vet requires, allowed undeclared
// tools or not: a misspelt name would leave the real tool unguarded), that
// only tool-chain layers are scoped to tools, and that each of a layer's
// compiled predicates is the one its config holds, compiled for the
// layer's stage and its config's phase ("before" when either leaves it
// out). The runtime uses the
// compiled predicate and the config's other fields; a predicate that says
// something else than the config (a tampered plan) would run a rule that a
// reader of the config does not see.
func references(p *Plan) []string {
	var out []string
	tool := func(loc, name string) {
		if _, ok := p.Tools[name]; !ok {
			out = append(out, fmt.Sprintf("%s: tool %q is not declared in tools%s", loc, name, suggest(name, p.Tools)))
		}
	}
	model := func(loc, name string) {
		if _, ok := p.Models[name]; !ok {
			out = append(out, fmt.Sprintf("%s: model %q is not declared in models%s", loc, name, suggest(name, p.Models)))
		}
	}
	if p.Invariants != nil {
		for _, name := range slices.Sorted(maps.Keys(p.Invariants.MaxExecutions)) {
			tool("/invariants/max_executions/"+jsonpointer.Escape(name), name)
		}
	}
	for _, stage := range Stages {
		for i, l := range p.Chains.Of(stage) {
			loc := fmt.Sprintf("/chains/%s/%d", stage, i)
			if len(l.Tools) > 0 && stage != StageTool {
				out = append(out, fmt.Sprintf("%s/tools: only layers of the tool chain are scoped to tools", loc))
			}
			for j, t := range l.Tools {
				tool(fmt.Sprintf("%s/tools/%d", loc, j), t)
			}
			if l.When != nil {
				for j, t := range l.When.Tools {
					tool(fmt.Sprintf("%s/when/tools/%d", loc, j), t)
				}
			}
			var config map[string]json.RawMessage
			if len(l.Config) > 0 {
				// The schema made it an object.
				_ = json.Unmarshal(l.Config, &config)
			}
			for _, ref := range modelRefs(config) {
				model(loc+"/config/"+ref.at, ref.name)
			}
			for _, key := range slices.Sorted(maps.Keys(l.Predicates)) {
				pr := l.Predicates[key]
				ploc := fmt.Sprintf("%s/predicates/%s", loc, jsonpointer.Escape(key))
				var src string
				if raw, ok := config[key]; !ok || json.Unmarshal(raw, &src) != nil {
					out = append(out, fmt.Sprintf("%s: the config holds no string %s for this predicate", ploc, key))
				} else if src != pr.Source {
					out = append(out, fmt.Sprintf("%s/source: %q is not the config's %s %q", ploc, pr.Source, key, src))
				}
				if pr.Stage != stage {
					out = append(out, fmt.Sprintf("%s/stage: %q is not the layer's stage %q", ploc, pr.Stage, stage))
				}
				// A layer's phase, and a predicate's, is "before" unless
				// given (as the compiler lowers a layer without one).
				phase, defaulted := "before", " (the default: the config gives none)"
				if raw, ok := config["phase"]; ok {
					if json.Unmarshal(raw, &phase) != nil {
						phase = "" // not a string: the layer's own config check says so
					}
					defaulted = ""
				}
				switch {
				case phase == "":
				case pr.Phase == "" && phase != "before":
					out = append(out, fmt.Sprintf("%s: the predicate's phase \"before\" (none given) is not the config's phase %q", ploc, phase))
				case pr.Phase != "" && pr.Phase != phase:
					out = append(out, fmt.Sprintf("%s/phase: %q is not the config's phase %q%s", ploc, pr.Phase, phase, defaulted))
				}
				if !slices.Equal(pr.Tools, l.Tools) {
					out = append(out, fmt.Sprintf("%s/tools: %q are not the layer's tools %q", ploc, pr.Tools, l.Tools))
				}
			}
		}
	}
	return out
}

// modelRef is a model a layer's config names, at the JSON pointer at
// below the config.
type modelRef struct{ at, name string }

// modelRefs lists the models a layer's config names where agentc vet
// reads model names in any layer's config: its model, each of its models
// (fallback, hedge) and its classifier's model (security), when a string
// or a list of strings. A value of another kind is not a reference (a
// builtin's config check says what is wrong with it).
func modelRefs(config map[string]json.RawMessage) []modelRef {
	var out []modelRef
	add := func(at string, raw json.RawMessage) {
		if name, ok := jsonString(raw); ok {
			out = append(out, modelRef{at, name})
		}
	}
	add("model", config["model"])
	var names []json.RawMessage
	if json.Unmarshal(config["models"], &names) == nil {
		for i, raw := range names {
			add("models/"+strconv.Itoa(i), raw)
		}
	}
	var classifier map[string]json.RawMessage
	if json.Unmarshal(config["classifier"], &classifier) == nil {
		add("classifier/model", classifier["model"])
	}
	return out
}

// jsonString returns the string raw holds, if it holds one (not null).
func jsonString(raw json.RawMessage) (string, bool) {
	var s *string
	if json.Unmarshal(raw, &s) != nil || s == nil {
		return "", false
	}
	return *s, true
}

// suggest returns "; did you mean X?" naming the declared name closest
// to name, as vet words it, or "" when none is close.
func suggest[V any](name string, declared map[string]V) string {
	if best := textdist.Closest(name, slices.Sorted(maps.Keys(declared))); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// durationProblems lists the durations of the plan's own fields that the
// schema's pattern lets through and the policy schema refuses: a
// settings.run_idle longer than a time.Duration holds, a store's timeout
// that is not above zero or is too long (Build would fail on them late,
// a store's timeout only when the store is opened).
func durationProblems(p *Plan) []string {
	var out []string
	if msg := DurationProblem(p.Settings.RunIdle, false); msg != "" {
		out = append(out, "/settings/run_idle: "+msg)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Stores)) {
		if msg := DurationProblem(p.Stores[name].Timeout, true); msg != "" {
			out = append(out, fmt.Sprintf("/stores/%s/timeout: %s", jsonpointer.Escape(name), msg))
		}
	}
	return out
}

// sameNumber reports whether n is the number v (1.0 is 1).
func sameNumber(n json.Number, v int) bool {
	f, err := n.Float64()
	return err == nil && f == float64(v)
}
