package policytest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	return dir
}

func TestDiscover(t *testing.T) {
	dir := write(t, map[string]string{
		"policy.cue":      "package p\n",
		"a_test.cue":      "package p\ntests: b: {scenario: steps: [], want: steps: []}\ntests: a: want_vet: [\"cel/type\"]\n",
		"tests/more.json": `{"tests": {"c": {"scenario": {"steps": []}, "want": {"steps": []}}}}`,
	})
	cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	require.Len(t, cases, 3)
	assert.Equal(t, "a", cases[0].Name)
	assert.Equal(t, []string{"cel/type"}, cases[0].WantVet)
	assert.Nil(t, cases[0].Scenario)
	assert.Equal(t, "b", cases[1].Name)
	assert.NotNil(t, cases[1].Scenario)
	assert.Equal(t, "c", cases[2].Name)
}

func TestDiscoverErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"no tests", "package p\ntests: {}\n", "no tests"},
		{"misspelt tests", "package p\ntest: a: want_vet: []\n", `unknown field "test"; did you mean "tests"?`},
		{"a visible helper", "package p\nbase: steps: []\ntests: a: want_vet: []\n", `unknown field "base"`},
		{"misspelt want", "package p\ntests: a: {want_vet: [], scenario: steps: [], wnat: steps: []}\n", `test "a": unknown field "wnat"; did you mean "want"?`},
		{"misspelt scenario", "package p\ntests: a: {want_vet: [], scenarios: steps: []}\n", `test "a": unknown field "scenarios"; did you mean "scenario"?`},
		{"another case", "package p\ntests: a: {want_vet: [], Want_Prove: []}\n", `test "a": unknown field "Want_Prove"; did you mean "want_prove"?`},
		{"want_vet not a list", "package p\ntests: a: want_vet: \"cel/type\"\n", `test "a": want_vet: a string, where a list of rule ids is expected`},
		{"prove_k not an integer", "package p\ntests: a: {want_prove: [], prove_k: 1.5}\n", `test "a": prove_k: a number, where an integer is expected`},
		{"a case not a struct", "package p\ntests: a: 5\n", `test "a": a number, where a struct of scenario, want, want_vet, want_prove, prove_k is expected`},
		{"tests not a struct", "package p\ntests: [1]\n", `tests: a list, where a struct of named cases is expected`},
		// A field of want matches the result's field exactly: Audit: []
		// would assert nothing about the result's audit.
		{"a want field in another case", "package p\ntests: a: {scenario: steps: [], want: {Audit: []}}\n", `test "a": want: unknown field "Audit"; did you mean "audit"?`},
		{"a nested want field in another case", "package p\ntests: a: {scenario: steps: [], want: steps: [{Outcome: \"ok\"}]}\n", `test "a": want: steps[0]: unknown field "Outcome"; did you mean "outcome"?`},
		{"want not an object", "package p\ntests: a: {scenario: steps: [], want: [{outcome: \"ok\"}]}\n", `test "a": want: a list, where an object is expected`},
		{"nothing to check", "package p\ntests: a: {}\n", "neither scenario and want nor want_vet"},
		{"scenario without want", "package p\ntests: a: scenario: steps: []\n", "scenario and want go together"},
		{"empty want", "package p\ntests: a: {scenario: steps: [], want: {}}\n", "want is empty"},
		// A want of empty objects: the one step of the scenario is always
		// reported, executions and meter are always there.
		{"hollow want", "package p\ntests: a: {scenario: steps: [{tool: name: \"x\"}], want: {steps: [{}], executions: tools: {}, meter: {}}}\n",
			`test "a": want holds no value to compare (only empty objects), so it would match any run`},
		{"misspelt want field", "package p\ntests: a: {scenario: steps: [], want: steps: [{outcome: \"ok\", requets: []}]}\n",
			`test "a": want: steps[0]: unknown field "requets"; did you mean "requests"?`},
		{"null executions", "package p\ntests: a: {scenario: steps: [], want: executions: tools: refnd: null}\n",
			`want: executions.tools.refnd: null asserts nothing (every declared name is listed with its count); write 0`},
		{"null calls", "package p\ntests: a: {scenario: steps: [], want: calls: models: primry: null}\n",
			`want: calls.models.primry: null asserts nothing (every declared name is listed with its count); write 0`},
		// A value the result never has: the case could never pass.
		{"misspelt outcome", "package p\ntests: a: {scenario: steps: [], want: steps: [{outcome: \"okay\"}]}\n",
			`test "a": want: steps[0].outcome: "okay" is not an outcome (ok, blocked, budget, in_doubt, error, crash); did you mean "ok"?`},
		{"misspelt stage", "package p\ntests: a: {scenario: steps: [], want: steps: [{}, {stage: \"tools\"}]}\n",
			`test "a": want: steps[1].stage: "tools" is not a stage (chat, tool, admit, turn, agent, parallel, state, checkpoint, crash, resume); did you mean "tool"?`},
		{"misspelt nested kind", "package p\ntests: a: {scenario: steps: [], want: steps: [{steps: [{error: kind: \"block\"}]}]}\n",
			`test "a": want: steps[0].steps[0].error.kind: "block" is not an error kind; did you mean "blocked"?`},
		{"misspelt absence", "package p\ntests: a: {scenario: steps: [], want: {eror: null}}\n", `want: unknown field "eror"`},
		{"not CUE", "package p\ntests: {\n", "a_test.cue"},
		{"prove_k alone", "package p\ntests: a: {want_vet: [], prove_k: 2}\n", "prove_k goes with want_prove"},
		{"prove_k too deep", "package p\ntests: a: {want_prove: [], prove_k: 7}\n", "prove_k 7: the depth must be between 1 and 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := write(t, map[string]string{"a_test.cue": tt.src})
			_, err := Discover(context.Background(), dir, dsl.DataOptions{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// Every faulty case is reported, in the order of their names, at every
// run: a file is fixed in one round.
func TestDiscoverErrorsInOrder(t *testing.T) {
	src := "package p\n"
	for _, n := range []string{"e", "b", "d", "a", "c"} {
		src += "tests: " + n + ": {want_vet: [], prove_k: 2}\n"
	}
	dir := write(t, map[string]string{"a_test.cue": src, "b_test.cue": "package p\ntests: z: {}\n"})
	for range 10 {
		_, err := Discover(context.Background(), dir, dsl.DataOptions{})
		require.Error(t, err)
		var got []string
		for _, line := range strings.Split(err.Error(), "\n") {
			_, msg, _ := strings.Cut(line, ": ")
			got = append(got, msg)
		}
		assert.Equal(t, []string{`test "a": prove_k goes with want_prove`, `test "b": prove_k goes with want_prove`,
			`test "c": prove_k goes with want_prove`, `test "d": prove_k goes with want_prove`, `test "e": prove_k goes with want_prove`,
			`test "z" has neither scenario and want nor want_vet nor want_prove`}, got)
	}
}

// A file's problems are all reported in one round: an optional field
// (CUE leaves it out of the data) does not hide the cases' problems, and
// the cases that read are returned beside them, for CheckIDs to find the
// ids they want that can never be.
func TestDiscoverReportsTheWholeFile(t *testing.T) {
	policy := "package p\ntools: transfer: {side_effecting: true, retry_safe: true}\nchains: tool: [{use: \"retry\"}]\n"
	tests := `package p
tests: "w": {
	scenario: {tools: transfer: [{result?: {ok: true}}], steps: [{tool: {name: "transfer", args: {}}}]}
	want: steps: [{outcome: "ok"}]
}
tests: "x": {
	scenario: {tools: transfer: [{result: ok: true}], steps: [{tool: {name: "transfer", args: {}}}]}
	want: steps: [{outcome: "ok", error: {kind: "block"}}]
}
tests: "y": want_prove: ["max_execution"]
tests: "z": want_vet: ["order/retry-side-efect"]
`
	dir := write(t, map[string]string{"p.cue": policy, "a_test.cue": tests})
	at := filepath.Join(dir, "a_test.cue")
	cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.Error(t, err)
	assert.Equal(t, []string{
		at + `:3:32: result?: an optional field is neither checked nor used (it is left out of the data): remove the ?`,
		at + `:8:40: test "x": want: steps[0].error.kind: "block" is not an error kind; did you mean "blocked"?`,
	}, strings.Split(err.Error(), "\n"))
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"w", "y", "z"}, names, "the cases that read")

	c, err := compiler.Compile(context.Background(), []string{filepath.Join(dir, "p.cue")}, compiler.Options{})
	require.NoError(t, err)
	err = CheckIDs(cases, c)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2)
	assert.True(t, strings.HasPrefix(lines[0], at+`:10:13: test "y": want_prove:`), lines[0])
	assert.Contains(t, lines[0], `did you mean "max_executions"?`)
	assert.True(t, strings.HasPrefix(lines[1], at+`:11:13: test "z": want_vet: no rule "order/retry-side-efect"; did you mean "order/retry-side-effect"?`), lines[1])
}

// A want value of the wrong type where the check of a want's values looks
// (a step's outcome, stage, error kind) is reported at its place, and the
// rest of the want is still checked: a misspelt outcome beside it is
// refused too.
func TestWantValueOfTheWrongTypeIsReportedWithTheRest(t *testing.T) {
	dir := write(t, map[string]string{"a_test.cue": "package p\n\ntests: a: {\n\tscenario: steps: []\n\twant: steps: [{outcome: 3}, {outcome: \"okk\", stage: true}, {error: kind: [1]}]\n}\n"})
	_, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.Error(t, err)
	at := filepath.Join(dir, "a_test.cue")
	assert.Equal(t, []string{
		at + `:5:17: test "a": want: steps[0].outcome: a number (3), where a string is expected`,
		at + `:5:31: test "a": want: steps[1].outcome: "okk" is not an outcome (ok, blocked, budget, in_doubt, error, crash); did you mean "ok"?`,
		at + `:5:47: test "a": want: steps[1].stage: true, where a string is expected`,
		at + `:5:69: test "a": want: steps[2].error.kind: a list, where a string is expected`,
	}, strings.Split(err.Error(), "\n"))
}

// A JSON test file that repeats a key is refused: the second want would
// replace the first unseen.
func TestDiscoverRepeatedKey(t *testing.T) {
	dir := write(t, map[string]string{"tests/a.json": `{"tests": {"a": {"scenario": {"steps": [{"tool": {"name": "t"}}]},
		"want": {"steps": [{"outcome": "blocked"}]},
		"want": {"steps": [{}]}}}}`})
	_, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `a.json:3:3: key "want" repeats a key of the same object`)
}

func TestCheckVet(t *testing.T) {
	c := &Case{WantVet: []string{"cel/type", "order/duplicate"}}
	assert.Equal(t, "", c.CheckVet([]string{"order/duplicate", "cel/type", "cel/type"}))
	assert.Equal(t, "vet did not report order/duplicate", c.CheckVet([]string{"cel/type"}))
	assert.Equal(t, "vet also reported schema/stage", c.CheckVet([]string{"cel/type", "order/duplicate", "schema/stage"}))
	clean := &Case{WantVet: []string{}}
	assert.Equal(t, "", clean.CheckVet(nil))
}

func TestWantProve(t *testing.T) {
	dir := write(t, map[string]string{
		"a_test.cue": "package p\ntests: a: want_prove: [\"max_executions\", \"audit_complete\"]\ntests: b: {want_prove: [], prove_k: 2}\n",
	})
	cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	require.Len(t, cases, 2)
	assert.Equal(t, []string{"audit_complete", "max_executions"}, cases[0].WantProve)
	assert.Equal(t, DefaultProveK, cases[0].ProveK)
	assert.Equal(t, []string{}, cases[1].WantProve)
	assert.Equal(t, 2, cases[1].ProveK)
	assert.Equal(t, "", cases[0].CheckProve([]string{"max_executions", "audit_complete"}))
	assert.Equal(t, "prove did not find audit_complete", cases[0].CheckProve([]string{"max_executions"}))
	assert.Equal(t, "prove also found no_phantom_effect", cases[1].CheckProve([]string{"no_phantom_effect"}))
}

// TestWantAbsence checks that a want can assert what did not happen (a
// model or tool not called, no request, no error, no audit record) and
// that the same want fails when it did happen.
func TestWantAbsence(t *testing.T) {
	policy := `package p
models: primary: {provider: "openai", model: "m", api_key_env: "K"}
tools: refund: {side_effecting: true, args: type: "object"}
tools: lookup: {args: type: "object"}
chains: tool: [{use: "tool_policy", deny: [DENY]}, {use: "audit"}]
`
	tests := `package p
tests: a: {
	scenario: steps: [{tool: {name: "refund", args: {}}}]
	want: {
		steps: [{outcome: "blocked", requests: [], tool_calls: null, result: null}]
		executions: {models: primary: 0, tools: {refund: 0, lookup: 0}}
		audit: []
	}
}
`
	run := func(t *testing.T, deny string) string {
		return runOnlyCase(t, strings.ReplaceAll(policy, "DENY", deny), tests)
	}
	// refund is denied: it never runs, and nothing else happens.
	assert.Equal(t, "", run(t, `"refund"`))
	// lookup is denied instead: refund is called, unscripted, and fails,
	// and the audit layer records it.
	assert.Contains(t, run(t, `"lookup"`), "$.audit: want 0 elements, got 1")
}

// A want that lists trace spans records them: `trace: []` fails when the
// policy traces, and listed spans are compared.
func TestWantTrace(t *testing.T) {
	policy := `package p
tools: lookup: {args: type: "object"}
chains: tool: [{use: "tracing"}]
`
	run := func(t *testing.T, want string) string {
		return runOnlyCase(t, policy, "package p\ntests: a: {\n\tscenario: {tools: lookup: [{result: 1}], steps: [{tool: {name: \"lookup\", args: {}}}]}\n\twant: "+want+"\n}\n")
	}
	assert.Contains(t, run(t, "trace: []"), "$.trace: want 0 elements, got 1")
	assert.Equal(t, "", run(t, `trace: [{name: "agentc.tool", attributes: "agentc.tool": "lookup"}]`))
	// Without trace in want, the result has none.
	assert.Equal(t, "", run(t, `steps: [{outcome: "ok"}]`))
}

// A want's number is compared with the result's exactly: an id above 2^53
// that the run keeps exact was compared as a float64, so a want of its
// neighbour passed.
func TestWantNumbersAreExact(t *testing.T) {
	policy := `package p
tools: lookup: {args: type: "object"}
`
	run := func(t *testing.T, want string) string {
		return runOnlyCase(t, policy, "package p\ntests: a: {\n\tscenario: {tools: lookup: [{result: id: 9007199254740993}], steps: [{tool: {name: \"lookup\", args: {}}}]}\n\twant: "+want+"\n}\n")
	}
	assert.Equal(t, "", run(t, `steps: [{result: id: 9007199254740993}]`))
	assert.Equal(t, "$.steps[0].result.id: want 9007199254740992, got 9007199254740993", run(t, `steps: [{result: id: 9007199254740992}]`))
	assert.Equal(t, "", run(t, `steps: [{result: id: 9007199254740993.0}]`), "numbers compare as numbers")
}

// runOnlyCase runs the one case of the test file tests against the policy
// p.cue and returns its differences, one a line.
func runOnlyCase(t *testing.T, policy, tests string) string {
	t.Helper()
	dir := write(t, map[string]string{"p.cue": policy, "a_test.cue": tests})
	cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	require.Len(t, cases, 1)
	c, err := compiler.Compile(context.Background(), []string{filepath.Join(dir, "p.cue")}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan, "%v", c.Diagnostics)
	diff, _, err := cases[0].Run(context.Background(), c.Plan, dir)
	require.NoError(t, err)
	return diff
}

// A want of false holds of a flag the result leaves out because it is
// false, and still fails where the flag is true.
func TestWantFalseFlags(t *testing.T) {
	policy := `package p
models: primary: {provider: "openai", model: "m", api_key_env: "K"}
tools: lookup: {args: type: "object"}
`
	run := func(t *testing.T, item, want string) string {
		return runOnlyCase(t, policy, "package p\ntests: a: {\n\tscenario: {models: primary: [{text: \"hi\"}], tools: lookup: ["+item+"], steps: [{chat: {model: \"primary\", messages: [{role: \"user\", content: \"hi\"}]}}, {tool: {name: \"lookup\", args: {}}}]}\n\twant: "+want+"\n}\n")
	}
	assert.Equal(t, "", run(t, "{result: 1}", "crashed: false"))
	assert.Equal(t, "", run(t, "{result: 1}", "steps: [{refusal: false}, {deduped: false}]"))
	assert.Equal(t, "$.crashed: want true, got false", run(t, "{result: 1}", "crashed: true"))
	assert.Equal(t, "$.crashed: want false, got true", run(t, "{crash: true}", "crashed: false"))
	assert.Equal(t, "$.steps[0].refusal: want true, got false", run(t, "{result: 1}", "steps: [{refusal: true}, {}]"))
}

// A want_vet rule or a want_prove invariant that cannot be reported is an
// error naming the file, the case and the id, with a did-you-mean.
func TestCheckIDs(t *testing.T) {
	policy := `package p
tools: refund: {side_effecting: true, args: type: "object"}
constraints: [{id: "pii-first", outer: "pii", inner: "audit", why: "w"}]
invariants: {off: ["budget_overshoot"], custom: one_refund: "executions.tools.refund <= 1"}
`
	check := func(t *testing.T, tests string) error {
		t.Helper()
		dir := write(t, map[string]string{"p.cue": policy, "a_test.cue": "package p\n" + tests})
		cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
		require.NoError(t, err)
		c, err := compiler.Compile(context.Background(), []string{filepath.Join(dir, "p.cue")}, compiler.Options{})
		require.NoError(t, err)
		return CheckIDs(cases, c)
	}
	require.NoError(t, check(t, `tests: a: want_vet: ["cel/unknown-value", "order/pii-first", "order/duplicate"]
tests: b: want_prove: ["max_executions", "one_refund"]`))
	err := check(t, `tests: ok: want_vet: []
tests: typo: want_vet: ["cel/unkown-value"]`)
	require.Error(t, err)
	assert.Regexp(t, `a_test.cue:3:14: test "typo": want_vet: no rule "cel/unkown-value"; did you mean "cel/unknown-value"\?`, err.Error())
	err = check(t, `tests: c: want_vet: ["order/pii-frst"]`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no rule "order/pii-frst"; did you mean "order/pii-first"?`)
	err = check(t, `tests: d: want_prove: ["one_refnd"]`)
	require.Error(t, err)
	assert.Regexp(t, `a_test.cue:2:11: test "d": want_prove: the policy checks no invariant "one_refnd", so prove can never find it violated \(it checks [^)]*\); did you mean "one_refund"\?$`, err.Error())
	err = check(t, `tests: e: want_prove: ["budget_overshoot"]`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `test "e": want_prove: invariant "budget_overshoot" is turned off (invariants.off)`)
}

// runCase runs the case of a_test.cue, the scenario given, against a
// policy declaring the model primary, and returns its error.
func runCase(t *testing.T, scenario, want string) error {
	t.Helper()
	dir := write(t, map[string]string{
		"p.cue":      "package p\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"K\"}\n",
		"a_test.cue": "package p\ntests: a: {scenario: {" + scenario + "}, want: " + want + "}\n",
	})
	cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	c, err := compiler.Compile(context.Background(), []string{filepath.Join(dir, "p.cue")}, compiler.Options{})
	require.NoError(t, err)
	_, _, err = cases[0].Run(context.Background(), c.Plan, dir)
	return err
}

// A case whose scenario is refused reports every problem on its line, at
// its path in the scenario.
func TestRunRefusedScenario(t *testing.T) {
	err := runCase(t, `tools: refnd: [{result: 1}], steps: [{chat: {model: "primry", messages: []}}]`, `steps: [{outcome: "ok"}]`)
	require.Error(t, err)
	assert.Equal(t, `scenario: steps[0].chat.model: the policy declares no model "primry" and the scenario scripts none, so the call can only fail; did you mean "primary"? (it declares primary); `+
		`tools.refnd: the policy declares no tool "refnd" and no step calls it, so the script is never used (the policy declares no tools)`, err.Error())
}

// A case whose scenario stands for what the policy never reads (a dns stub
// under a policy whose layers look no host name up) or names what it lacks
// (a checkpoint store, a tool choice that is no mode nor tool) fails with
// each problem at its path, rather than passing as if it tested them.
func TestRunScenarioOfWhatThePolicyLacks(t *testing.T) {
	const dns = `dns: "api.example.com": ["93.184.216.34"], models: primary: [{text: "hi"}], `
	err := runCase(t, dns+`steps: [{chat: {model: "primary", messages: [], tool_choice: "any"}}, {resume: {store: "defualt"}}]`, `steps: [{}, {}]`)
	require.Error(t, err)
	assert.Equal(t, `scenario: steps[0].chat.tool_choice: "any" is neither auto, none nor required, nor a tool the policy declares; did you mean "required"? (the policy declares no tools); `+
		`steps[1].resume.store: the policy declares no store "defualt", so the step can only fail; did you mean "default"? (the stores are default)`, err.Error())
	// The names are right: the stub is left, which nothing reads.
	err = runCase(t, dns+`steps: [{chat: {model: "primary", messages: [], tool_choice: "required"}}, {resume: {store: "default"}}]`, `steps: [{}, {}]`)
	require.Error(t, err)
	assert.Equal(t, `scenario: dns: no layer of the policy looks host names up (egress does), so the stub is never consulted`, err.Error())
}

// A want expecting an error from a layer the policy does not have fails
// the case with the layers and a did-you-mean, before the scenario runs.
func TestRunWantOfAnUnknownLayer(t *testing.T) {
	err := runCase(t, `models: primary: [{text: "hi"}], steps: [{chat: {model: "primary", messages: []}}]`, `steps: [{error: layer: "retyr"}]`)
	require.Error(t, err)
	assert.Equal(t, `want: steps[0].error.layer: the policy has no layer "retyr", so no error comes from it (its chains have no layers)`, err.Error())
}

// A problem of a case is placed where the test file writes it: a want's
// field, an unknown field of the case, a scenario's step; in a JSON test
// file as in a CUE one.
func TestProblemsArePlaced(t *testing.T) {
	dir := write(t, map[string]string{"a_test.cue": "package p\n\ntests: a: {\n\tscenario: steps: []\n\twant: steps: [{outcome: \"okay\"}]\n}\n"})
	_, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.Error(t, err)
	assert.Equal(t, filepath.Join(dir, "a_test.cue")+`:5:17: test "a": want: steps[0].outcome: "okay" is not an outcome (ok, blocked, budget, in_doubt, error, crash); did you mean "ok"?`, err.Error())

	dir = write(t, map[string]string{"a_test.cue": "package p\n\ntests: a: {\n\twant_vet: []\n\twnat: steps: []\n}\n"})
	_, err = Discover(context.Background(), dir, dsl.DataOptions{})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), filepath.Join(dir, "a_test.cue")+`:5:2: test "a": unknown field "wnat"`), err.Error())

	dir = write(t, map[string]string{"tests/c.json": "{\"tests\": {\"b\": {\n  \"scenario\": {\"steps\": [\n    {\"chat\": {\"model\": \"primry\"}}]},\n  \"want\": {\"steps\": [{\"outcome\": \"ok\"}]}}}}"})
	cases, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	file := filepath.Join(dir, "tests", "c.json")
	assert.Equal(t, file+":3:15", cases[0].Where(`scenario: steps[0].chat.model: the policy declares no model "primry"`))
	assert.Equal(t, file+":4:23", cases[0].Where(`$.steps[0].outcome: want "ok", got "error"`))
	assert.Equal(t, file+":1:12", cases[0].Where(`the policy does not vet`))

	// A case named with a dot is placed in itself, not at the first case.
	dir = write(t, map[string]string{"a_test.cue": "package p\n\ntests: first: {\n\tscenario: steps: []\n\twant: steps: []\n}\ntests: \"v1.2 ok\": {\n\tscenario: steps: []\n\twant: steps: [{outcome: \"ok\"}]\n}\n"})
	cases, err = Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	require.Len(t, cases, 2)
	file = filepath.Join(dir, "a_test.cue")
	assert.Equal(t, "v1.2 ok", cases[1].Name)
	assert.Equal(t, file+":9:17", cases[1].Where(`$.steps[0].outcome: want "ok", got "error"`))
	assert.Equal(t, file+":7:8", cases[1].Where(`the policy does not vet`))

	// A problem under a model named with a dot is placed at its field.
	dir = write(t, map[string]string{"a_test.cue": "package p\n\ntests: a: {\n\tscenario: {\n\t\tmodels: \"gpt-4.1\": [\n\t\t\t{txt: \"hi\"}]\n\t\tsteps: []\n\t}\n\twant: executions: models: \"gpt-4.1\": 1\n}\n"})
	cases, err = Discover(context.Background(), dir, dsl.DataOptions{})
	require.NoError(t, err)
	file = filepath.Join(dir, "a_test.cue")
	assert.Equal(t, file+":6:5", cases[0].Where(`scenario: models."gpt-4.1"[0]: unknown field "txt"; did you mean "text"?`))
	assert.Equal(t, file+":6:4", cases[0].Where(`scenario: models."gpt-4.1"[0]: a problem`))
	assert.Equal(t, file+":9:28", cases[0].Where(`$.executions.models."gpt-4.1": want 1, got 0`))
}

// A want of what a run under the policy can never have (no span without
// a tracing layer, no checkpoints without a checkpoint layer or step, no
// state without a state section) holds for any run: refused, as an empty
// audit under a policy that writes none is.
func TestRunVacuousWant(t *testing.T) {
	const chat = `models: primary: [{text: "hi"}], steps: [{chat: {model: "primary", messages: [{role: "user", content: "hi"}]}}]`
	for _, tc := range []struct{ want, err string }{
		{`trace: []`, `want: trace: the policy has no tracing layer, so a run records no span and an empty trace holds for any run`},
		{`trace: null`, `want: trace: the policy has no tracing layer, so a run records no span and an empty trace holds for any run`},
		{`checkpoints: null`, `want: checkpoints: the policy has no checkpoint layer and no step saves or resumes one, so a run reports no checkpoints and null holds for any run`},
		{`state: null`, `want: state: the policy declares no state, so a run reports none and null holds for any run`},
	} {
		err := runCase(t, chat, tc.want)
		require.Error(t, err, tc.want)
		assert.Equal(t, tc.err, err.Error())
	}
	// Where the policy has them, the same wants are compared.
	policy := `package p
models: primary: {provider: "openai", model: "m", api_key_env: "K"}
chains: chat: [{use: "tracing"}]
chains: turn: [{use: "checkpoint"}]
state: fields: count: schema: type: "integer"
`
	run := func(want string) string {
		return runOnlyCase(t, policy, "package p\ntests: a: {\n\tscenario: {"+chat+"}\n\twant: "+want+"\n}\n")
	}
	assert.Contains(t, run("trace: []"), "$.trace: want 0 elements")
	assert.Contains(t, run("state: null"), "$.state")
	assert.Contains(t, run("checkpoints: null"), "$.checkpoints")
	// A step that saves one is reported without a checkpoint layer.
	err := runCase(t, strings.TrimSuffix(chat, "]")+`, {checkpoint: {}}]`, `checkpoints: null`)
	assert.NoError(t, err)
}

// Every field of a case that does not read is reported at once, each at its
// place: a case with several mistakes is fixed in one round.
func TestEveryFieldProblemOfACase(t *testing.T) {
	dir := write(t, map[string]string{"a_test.cue": "package p\n\ntests: a: {\n\twnat: steps: []\n\twant_vet: 1\n\tprove_kk: 2\n\twant_prove: \"x\"\n}\n"})
	_, err := Discover(context.Background(), dir, dsl.DataOptions{})
	require.Error(t, err)
	file := filepath.Join(dir, "a_test.cue")
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 4, err.Error())
	assert.True(t, strings.HasPrefix(lines[0], file+`:6:2: test "a": unknown field "prove_kk"; did you mean "prove_k"?`), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], file+`:7:2: test "a": want_prove: `), lines[1])
	assert.True(t, strings.HasPrefix(lines[2], file+`:5:2: test "a": want_vet: `), lines[2])
	assert.True(t, strings.HasPrefix(lines[3], file+`:4:2: test "a": unknown field "wnat"; did you mean "want"?`), lines[3])
}
