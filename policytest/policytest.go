// Package policytest runs a policy's own test cases (`agentc test`): each
// case is a scenario and the subset of its run output that must match
// (docs/scenarios.md).
//
// Cases live beside the policy, in `*_test.cue` files or in files under a
// `tests/` directory (`.cue` or `.json`). Each file holds a `tests` struct
// mapping a case name to {scenario, want}:
//
//	tests: "refund over 100 is blocked": {
//		scenario: {
//			tools: refund: [{result: ok: true}]
//			steps: [{tool: {name: "refund", args: {order_id: "A1", amount: 500}}}]
//		}
//		want: steps: [{outcome: "blocked"}]
//	}
//
// A case may instead (or also) pin the policy's vet result: `want_vet` lists
// the rule ids that vetting the policy must report, as a set (an empty list:
// the policy vets clean, warnings included).
//
// A case may also pin what `agentc prove` finds: `want_prove` lists the
// invariants a bounded exploration of the policy must find violated, as a
// set (an empty list: the policy proves clean), at depth `prove_k`
// (default 3). The policy is explored even when vet refuses it, so that a
// case can pin what its faults do.
//
// Test files are evaluated on their own: they are not part of the policy
// package. A file holds nothing but `tests`, and a case nothing but the
// fields above: an unknown field (a misspelt want) is an error with a
// did-you-mean, not an expectation silently left unchecked, as is an
// optional field of a CUE file (result?: 2), which CUE leaves out of the
// data (dsl.LoadData).
package policytest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/conformance"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// Case is one test case of a policy.
type Case struct {
	// Name is the case's key in its file's tests struct.
	Name string
	// File is the file that declares it.
	File string
	// Scenario is the scenario, as JSON.
	Scenario json.RawMessage
	// Want is the expected subset of the run output.
	Want any
	// WantVet, when not nil, is the set of rule ids vetting the policy must
	// report.
	WantVet []string
	// WantProve, when not nil, is the set of invariants exploring the policy
	// at depth ProveK must find violated.
	WantProve []string
	// ProveK is the depth of the exploration (DefaultProveK when unset).
	ProveK int

	// idx places the paths of File.
	idx *dsl.SourceIndex
}

// At returns where the case's file writes path, a path in the case such
// as "want.steps[0].outcome" ("" for the case itself), as file:line:col;
// the file alone when it cannot be placed.
func (c *Case) At(path string) string {
	return placeIn(c.idx, c.File, c.Name, path)
}

// Where places a problem of the case, as reported by Run, CheckVet or
// CheckIDs: at the path it starts with in the scenario ("scenario:
// steps[0].chat.model: ...") or in the want ("want: steps[0]...",
// "$.steps[0].outcome: want ..."), else at the case.
func (c *Case) Where(problem string) string {
	switch {
	case strings.HasPrefix(problem, "$."):
		path, _, _ := strings.Cut(problem[2:], ": ")
		return c.At("want." + path)
	case strings.HasPrefix(problem, "scenario: "), strings.HasPrefix(problem, "want: "):
		return c.At(scenario.MessagePath(problem))
	}
	return c.At("")
}

// placeIn returns where idx places path in case name of file, as
// file:line:col (file when it cannot).
func placeIn(idx *dsl.SourceIndex, file, name, path string) string {
	if pos, ok := idx.At([]string{"tests", name}, path); ok {
		return fmt.Sprintf("%s:%d:%d", file, pos.Line, pos.Col)
	}
	return file
}

// DefaultProveK is the depth of a want_prove case without prove_k.
const DefaultProveK = 3

// Discover returns the cases of the policy in dir, sorted by file and
// name. Files are read under opts' bounds (see dsl.LoadData). A file that
// does not parse, or a case without scenario or want, is an error naming
// the file. Every problem of every file is in the error, each its own
// (errors.Join), and the cases that read are returned with it, so that the
// caller can check them too (CheckIDs) and a file is fixed in one round.
func Discover(ctx context.Context, dir string, opts dsl.DataOptions) ([]*Case, error) {
	var files []string
	tf, _ := filepath.Glob(filepath.Join(dir, "*_test.cue"))
	files = append(files, tf...)
	for _, ext := range []string{"*.cue", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(dir, "tests", ext))
		files = append(files, m...)
	}
	sort.Strings(files)
	var cases []*Case
	var errs []error
	for _, f := range files {
		cs, err := readFile(ctx, f, opts)
		if err != nil {
			errs = append(errs, err)
		}
		cases = append(cases, cs...)
	}
	return cases, errors.Join(errs...)
}

// readFile returns the cases of the test file path that read, and the
// problems of the file and its other cases.
func readFile(ctx context.Context, path string, opts dsl.DataOptions) ([]*Case, error) {
	data, loadErr := dsl.LoadData(ctx, path, opts)
	if data == nil {
		return nil, loadErr
	}
	// The file's optional fields (loadErr, the data read without them) are
	// reported with its cases' problems.
	errs := []error{loadErr}
	// The file read again, for the places of its cases' problems (within
	// the bounds LoadData checked).
	var idx *dsl.SourceIndex
	if src, err := dsl.ReadFile(path, cmp.Or(opts.MaxSize, dsl.MaxFileSize)); err == nil {
		idx = dsl.IndexSource(path, src)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("%s: %v", path, err))...)
	}
	for _, k := range sortedKeys(doc) {
		if k != "tests" {
			errs = append(errs, fmt.Errorf("%s: unknown field %q%s: a test file holds a `tests` struct of named cases (a helper value must be hidden: _%s or #%s)",
				path, k, dsl.SuggestName(k, []string{"tests"}), k, k))
		}
	}
	var tests map[string]json.RawMessage
	if raw, ok := doc["tests"]; ok {
		if err := json.Unmarshal(raw, &tests); err != nil {
			return nil, errors.Join(append(errs, fmt.Errorf("%s: tests: %s", path, typeProblem(err, "a struct of named cases")))...)
		}
	}
	if len(tests) == 0 {
		return nil, errors.Join(append(errs, fmt.Errorf("%s: no tests: the file must hold a `tests` struct of named cases", path))...)
	}
	// Every faulty case is reported, in the order of their names, so that
	// a file is fixed in one round and the report is the same every time;
	// the cases that read are returned beside them.
	var out []*Case
	for _, name := range sortedKeys(tests) {
		c, err := readCase(path, idx, name, tests[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// readCase reads the case name of the test file path.
func readCase(path string, idx *dsl.SourceIndex, name string, raw json.RawMessage) (*Case, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("%s: test %q: %s", placeIn(idx, path, name, ""), name, typeProblem(err, "a struct of "+strings.Join(caseFields, ", ")))
	}
	t, errs := decodeCase(fields)
	if len(errs) > 0 {
		for i, err := range errs {
			errs[i] = fmt.Errorf("%s: test %q: %v", placeIn(idx, path, name, scenario.MessagePath(err.Error())), name, err)
		}
		return nil, errors.Join(errs...)
	}
	hasScenario := len(t.Scenario) > 0 && string(t.Scenario) != "null"
	c := &Case{Name: name, File: path, idx: idx}
	if t.WantVet != nil {
		c.WantVet = append([]string{}, *t.WantVet...)
		sort.Strings(c.WantVet)
	}
	if t.WantProve != nil {
		c.WantProve = append([]string{}, *t.WantProve...)
		sort.Strings(c.WantProve)
		c.ProveK = DefaultProveK
	}
	if t.ProveK != nil {
		if t.WantProve == nil {
			return nil, fmt.Errorf("%s: test %q: prove_k goes with want_prove", c.At("prove_k"), name)
		}
		if *t.ProveK < 1 || *t.ProveK > MaxProveK {
			return nil, fmt.Errorf("%s: test %q: prove_k %d: the depth must be between 1 and %d", c.At("prove_k"), name, *t.ProveK, MaxProveK)
		}
		c.ProveK = *t.ProveK
	}
	switch {
	case !hasScenario && t.Want == nil && c.WantVet == nil && c.WantProve == nil:
		return nil, fmt.Errorf("%s: test %q has neither scenario and want nor want_vet nor want_prove", c.At(""), name)
	case hasScenario != (t.Want != nil):
		return nil, fmt.Errorf("%s: test %q: scenario and want go together", c.At(""), name)
	}
	if m, ok := t.Want.(map[string]any); ok && len(m) == 0 {
		return nil, fmt.Errorf("%s: test %q: want is empty, so it would match any run", c.At("want"), name)
	} else if ok && hasScenario && checksNothing(m, t.Scenario) {
		return nil, fmt.Errorf("%s: test %q: want holds no value to compare (only empty objects), so it would match any run", c.At("want"), name)
	}
	if hasScenario {
		c.Scenario, c.Want = t.Scenario, t.Want
	}
	return c, nil
}

// checksNothing reports whether want, a case's want, holds no expectation
// a run of the scenario can fail: nothing but objects that hold only
// objects (executions: tools: {}, meter: {}), and, for a scenario of one
// step, which the run always reports, steps: [{}].
func checksNothing(want map[string]any, scenario json.RawMessage) bool {
	var hollow func(v any) bool
	hollow = func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, x := range m {
			if !hollow(x) {
				return false
			}
		}
		return true
	}
	var s struct{ Steps []json.RawMessage }
	_ = json.Unmarshal(scenario, &s)
	for k, v := range want {
		if steps, ok := v.([]any); k == "steps" && ok && len(steps) == 1 && len(s.Steps) == 1 && hollow(steps[0]) {
			continue
		}
		if !hollow(v) {
			return false
		}
	}
	return true
}

// testCase is a case as its file writes it.
type testCase struct {
	Scenario  json.RawMessage
	Want      any
	WantVet   *[]string
	WantProve *[]string
	ProveK    *int
}

// caseFields are the fields a case may have.
var caseFields = []string{"scenario", "want", "want_vet", "want_prove", "prove_k"}

// decodeCase decodes a case's fields and returns the problem of each that
// does not read, in the order of their names; a field it does not know (a
// misspelt want would leave the case checking nothing) is an error with a
// did-you-mean.
func decodeCase(fields map[string]json.RawMessage) (testCase, []error) {
	var t testCase
	var errs []error
	for _, k := range sortedKeys(fields) {
		raw := fields[k]
		var err error
		switch k {
		case "scenario":
			t.Scenario = raw
		case "want":
			if err = scenario.CheckWant(raw); err == nil {
				// Its numbers exact, as the run's: an id above 2^53 is
				// not its float64 neighbour.
				err = jsonnum.Decode(raw, &t.Want)
			}
		case "want_vet":
			if err = json.Unmarshal(raw, &t.WantVet); err != nil {
				err = errors.New(typeProblem(err, "a list of rule ids"))
			}
		case "want_prove":
			if err = json.Unmarshal(raw, &t.WantProve); err != nil {
				err = errors.New(typeProblem(err, "a list of invariants"))
			}
		case "prove_k":
			if err = json.Unmarshal(raw, &t.ProveK); err != nil {
				err = errors.New(typeProblem(err, "an integer"))
			}
		default:
			errs = append(errs, fmt.Errorf("unknown field %q%s (a case has %s)", k, dsl.SuggestName(k, caseFields), strings.Join(caseFields, ", ")))
			continue
		}
		// A want's problems are each placed on their own.
		list := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			list = j.Unwrap()
		}
		for _, err := range list {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", k, strings.TrimPrefix(err.Error(), "json: ")))
			}
		}
	}
	return t, errs
}

// typeProblem says what a value that did not decode is, and that want is
// expected instead, rather than naming Go types.
func typeProblem(err error, want string) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	got := te.Value
	switch {
	case got == "array":
		got = "a list"
	case got == "object":
		got = "an object"
	case got == "string" || got == "bool":
		got = "a " + got
	case strings.HasPrefix(got, "number"):
		got = "a number"
	}
	if te.Field != "" {
		return fmt.Sprintf("%s: %s, where %s is expected", te.Field, got, want)
	}
	return fmt.Sprintf("%s, where %s is expected", got, want)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// NothingExplored is the problem of a want_prove case whose policy gives
// prove nothing to call.
const NothingExplored = "prove explored nothing: the policy declares no model or tool to call (the turn chain is not explored)"

// MaxProveK is the deepest exploration a case may ask for.
const MaxProveK = 6

// CheckProve compares the invariants an exploration found violated with
// the case's WantProve set. It returns "" when they match, else what
// differs.
func (c *Case) CheckProve(violated []string) string {
	return setDiff(c.WantProve, violated, "prove did not find ", "prove also found ")
}

// CheckVet compares the rule ids of a policy's diagnostics with the case's
// WantVet set. It returns "" when they match, else what differs.
func (c *Case) CheckVet(rules []string) string {
	return setDiff(c.WantVet, rules, "vet did not report ", "vet also reported ")
}

// CheckIDs refuses a case that wants what can never be: a want_vet rule
// id that no rule reports (a misspelt cel/unkown-value would only ever read
// "vet did not report"), or a want_prove invariant the policy c compiled
// from does not check (not a built-in, turned off, or not among its
// custom invariants). The error names the file, the case and the id, with
// a did-you-mean.
func CheckIDs(cases []*Case, c *compiler.Compilation) error {
	rules := map[string]bool{}
	for _, r := range compiler.Rules() {
		if !strings.Contains(r.ID, "<") { // order/<id> stands for the constraints below
			rules[r.ID] = true
		}
	}
	for _, d := range c.Diagnostics {
		rules[d.Rule] = true // a registered middleware's constraint included
	}
	var invariants, off []string
	if c.Policy != nil {
		for _, k := range c.Policy.Constraints {
			rules["order/"+k.ID] = true
		}
		invariants = slices.Clone(prove.Builtins)
		if in := c.Policy.Invariants; in != nil {
			off = in.Off
			invariants = slices.DeleteFunc(invariants, func(id string) bool { return slices.Contains(off, id) })
			invariants = append(invariants, sortedKeys(in.Custom)...)
		}
	}
	known := sortedKeys(rules)
	var errs []error
	for _, tc := range cases {
		for _, id := range tc.WantVet {
			// Without the policy its own constraints are not known.
			if rules[id] || c.Policy == nil && strings.HasPrefix(id, "order/") {
				continue
			}
			errs = append(errs, fmt.Errorf("%s: test %q: want_vet: no rule %q%s: vet can never report it (agentc vet -rules lists them)", tc.At("want_vet"), tc.Name, id, dsl.SuggestName(id, known)))
		}
		if c.Policy == nil {
			continue
		}
		for _, id := range tc.WantProve {
			switch {
			case slices.Contains(invariants, id), id == NotExplored:
			case slices.Contains(off, id):
				errs = append(errs, fmt.Errorf("%s: test %q: want_prove: invariant %q is turned off (invariants.off): prove can never find it violated", tc.At("want_prove"), tc.Name, id))
			default:
				errs = append(errs, fmt.Errorf("%s: test %q: want_prove: the policy checks no invariant %q, so prove can never find it violated (it checks %s)%s", tc.At("want_prove"), tc.Name, id, strings.Join(invariants, ", "), dsl.SuggestName(id, invariants)))
			}
		}
	}
	return errors.Join(errs...)
}

// setDiff describes how the set got differs from the set want.
func setDiff(wantList, gotList []string, missingText, extraText string) string {
	got := map[string]bool{}
	for _, r := range gotList {
		got[r] = true
	}
	want := map[string]bool{}
	for _, r := range wantList {
		want[r] = true
	}
	var missing, extra []string
	for r := range want {
		if !got[r] {
			missing = append(missing, r)
		}
	}
	for r := range got {
		if !want[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, missingText+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		parts = append(parts, extraText+strings.Join(extra, ", "))
	}
	return strings.Join(parts, "; ")
}

// Run runs the case against p, resolving the plan's relative paths (file
// roots, store files) against dir. It returns "" when the output contains
// the expected subset, else a description of each difference, one a line
// (conformance.Differences); err is set when the scenario is invalid or
// the pipeline cannot be built.
func (c *Case) Run(ctx context.Context, p *plan.Plan, dir string) (diff string, output []byte, err error) {
	return c.RunExported(ctx, p, dir, nil)
}

// RunExported is Run with the tracing layers' spans going to tp (an
// exporter's provider; nil for none), as `agentc run` sends them. A case
// whose want lists the spans (trace) records every one with a provider of
// its own instead, whatever tp's sampler would keep, so that its outcome
// does not depend on the environment: its spans are not sent to tp.
func (c *Case) RunExported(ctx context.Context, p *plan.Plan, dir string, tp *sdktrace.TracerProvider) (diff string, output []byte, err error) {
	// The scenario was cut out of its file (and evaluated, from CUE): its
	// errors name their place by path.
	sc, err := scenario.ParseEvaluated(c.Scenario)
	if err != nil {
		return "", nil, caseProblems(err)
	}
	// A want that lists the spans records them, as `agentc run -trace`
	// does: without them `trace: []` would pass unchecked.
	if err := scenario.CheckWantNames(c.Want, p, sc); err != nil {
		return "", nil, fmt.Errorf("want: %w", err)
	}
	w, _ := c.Want.(map[string]any)
	_, trace := w["trace"]
	opts := scenario.Options{Dir: dir, Trace: trace}
	if !trace {
		opts.TracerProvider = tp
	}
	res, err := scenario.Run(ctx, p, sc, opts)
	if err != nil {
		return "", nil, caseProblems(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return "", nil, err
	}
	var got any
	if err := jsonnum.Decode(out, &got); err != nil {
		return "", nil, err
	}
	// A flag the result leaves out when false is false: `crashed: false`
	// holds of a run that did not crash.
	scenario.FillFalse(c.Want, got)
	return strings.Join(conformance.Differences(c.Want, got, ""), "\n"), out, nil
}

// caseProblems puts the problems of a case's scenario on one line, each
// at its path in the scenario (a case's report is a line).
func caseProblems(err error) error {
	var se *scenario.Error
	if errors.As(err, &se) {
		return errors.New("scenario: " + strings.Join(se.Messages(), "; "))
	}
	return err
}

// NotExplored is the id want_prove gives to expect a model or tool that no
// explored call reaches (prove.NotExplored).
const NotExplored = prove.NotExplored

// Prove explores p at depth k (resolving its relative paths against dir)
// and returns the invariants violated, sorted, each once, with the
// counterexamples, and NotExplored among them when a model or tool was
// not reached (listed in unexplored). A policy that gives prove nothing to
// call is an error (NothingExplored), not a clean proof.
func Prove(ctx context.Context, p *plan.Plan, dir string, k int) (ids []string, violations []*prove.Counterexample, unexplored []prove.Unexplored, err error) {
	r, err := prove.Explore(ctx, p, prove.Options{Depth: k, Dir: dir})
	if err != nil {
		return nil, nil, nil, err
	}
	if r.Targets == 0 {
		// Nothing ran: a clean result would claim a proof of nothing.
		return nil, nil, nil, errors.New(NothingExplored)
	}
	for _, v := range r.Violations {
		if !slices.Contains(ids, v.Invariant) {
			ids = append(ids, v.Invariant)
		}
	}
	if len(r.Unexplored) > 0 {
		ids = append(ids, NotExplored)
	}
	sort.Strings(ids)
	return ids, r.Violations, r.Unexplored, nil
}
