package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeRoundTrip(t *testing.T) {
	p := &Plan{
		Version: Version,
		Policy:  "support",
		Models:  map[string]Model{"primary": {USDPerMTokIn: 3, USDPerMTokOut: 15}},
		Tools:   map[string]Tool{"refund": {SideEffecting: true, Args: json.RawMessage(`{"type":"object"}`)}},
		Chains: Chains{Tool: []Layer{{
			Use: "guard", Name: "limit", Tools: []string{"refund"}, Config: json.RawMessage(`{"phase":"before","deny":"args.amount > 1.0"}`),
			Predicates: map[string]*Predicate{"deny": {Stage: StageTool, Phase: "before", Source: "args.amount > 1.0", Tools: []string{"refund"}}},
		}}},
	}
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode("mem", b)
	require.NoError(t, err)
	again, err := Encode(got)
	require.NoError(t, err)
	assert.JSONEq(t, string(b), string(again))
	assert.Equal(t, "args.amount > 1.0", got.Chains.Tool[0].Predicates["deny"].Source)
	assert.True(t, got.Tools["refund"].SideEffecting)
}

// TestUnnamedLayerRoundTrips: a layer's name is optional (it defaults to
// its use), so a plan with an unnamed layer encodes and decodes, and the same
// name may appear in different chains.
func TestUnnamedLayerRoundTrips(t *testing.T) {
	p := &Plan{Version: Version, Policy: "p", Chains: Chains{
		Chat: []Layer{{Use: "retry"}, {Use: "retry", Name: "second"}},
		Tool: []Layer{{Use: "retry"}},
	}}
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode("enc", b)
	require.NoError(t, err)
	assert.Equal(t, p.Chains, got.Chains)
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"not json", `{"version":`, []string{"not JSON"}},
		{"trailing", `{"version":1,"policy":"p","chains":{}} {}`, []string{"trailing data"}},
		{"wrong version", `{"version":2,"policy":"p","chains":{}}`, []string{"/version (line 1, col 12): plan format 2; this agentc reads format 1 (build the plan again"}},
		{"missing chains", `{"version":1,"policy":"p"}`, []string{"missing properties: 'chains'"}},
		// A field of a newer agentc's plan of the same format version, or
		// a misspelt one.
		{"unknown field", `{"version":1,"policy":"p","chains":{},"extra":1}`,
			[]string{"/ (line 1, col 1): additionalProperties 'extra' not allowed: this agentc knows no such field (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)"}},
		{"layer without use", `{"version":1,"policy":"p","chains":{"tool":[{"name":"x"}]}}`, []string{"/chains/tool/0"}},
		{"bad stage", `{"version":1,"policy":"p","chains":{},"admit":{"stage":"nope","source":"true"}}`, []string{"/admit/stage"}},
		{"duplicate name", `{"version":1,"policy":"p","chains":{"chat":[{"use":"retry","name":"r"},{"use":"log","name":"r"}]}}`,
			[]string{`/chains/chat/1/name (line 1, col 92): duplicate layer name "r" in the chat chain (also /chains/chat/0)`}},
		{"duplicate defaulted name", `{"version":1,"policy":"p","chains":{"tool":[{"use":"log"},{"use":"retry"},{"use":"log"}]}}`,
			[]string{`/chains/tool/2 (line 1, col 75): duplicate layer name "log" in the tool chain (also /chains/tool/0)`}},
		{"truncated", "{\n \"version\": 1,\n \"policy\"", []string{"line 3, col 10: not JSON: the data ends before the plan object does"}},
		{"syntax error position", "{\n \"version\": 1,\n \"policy\": 'p'}", []string{"line 3, col 12: not JSON: invalid character"}},
		{"schema error position", "{\n \"version\": 1,\n \"policy\": \"p\",\n \"chains\": {\"tool\": [{\"use\": \"log\", \"extra\": 1}]}}",
			[]string{"/chains/tool/0 (line 4, col 22): additionalProperties 'extra' not allowed"}},
		{"version not an integer", `{"version":1.0,"policy":"p","chains":{}}`, []string{"/version (line 1, col 12): number 1.0 does not fit a Go int"}},
		{"number out of range", `{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":1e400,"usd_per_mtok_out":1}}}`,
			[]string{"/models/m/usd_per_mtok_in (line 1, col 72): number 1e400 does not fit a Go float64"}},
		// encoding/json keeps the last of repeated keys; a reader may see
		// the first, so an empty chain could hide behind a reviewed one.
		{"duplicate key", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"true"},"predicates":{"deny":{"stage":"tool","source":"true"}}}],"tool":[]}}`,
			[]string{`/chains/tool (line 1, col 142): duplicate key "tool" (also at line 1, col 37)`}},
		{"duplicate top-level key", `{"version":1,"policy":"p","policy":"q","chains":{}}`, []string{`/policy (line 1, col 27): duplicate key "policy"`}},
		// The runtime decodes a config into a struct whose fields match
		// keys regardless of case: "Phase" would override "phase".
		{"config key repeated in another case", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"true","phase":"before","Phase":"after"}}]}}`,
			[]string{`/chains/tool/0/config/Phase (line 1, col 101): duplicate key "Phase"`}},
		{"config map keys differing in case are not repeats", `{"version":1,"policy":"p","chains":{"chat":[{"use":"tracing","config":{"attributes":{"env":"a","Env":"b"}}}],"tool":[{"use":"log"},{"use":"log"}]}}`,
			[]string{`/chains/tool/1 (line 1, col 132): duplicate layer name "log"`}},
		{"predicate not the config's", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"args.amount > 100.0"},"predicates":{"deny":{"stage":"tool","source":"false"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny/source (line 1, col 146): "false" is not the config's deny "args.amount > 100.0"`}},
		{"predicate the config lacks", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"require":"true"},"predicates":{"deny":{"stage":"tool","source":"false"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny (line 1, col 109): the config holds no string deny for this predicate`}},
		// The guard runs at its config's phase and stage; a predicate
		// compiled for another would read what is not there yet (result
		// before the call) or type args by another stage.
		{"predicate of another phase", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"true","phase":"before"},"predicates":{"deny":{"stage":"tool","phase":"after","source":"true"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny/phase (line 1, col 147): "after" is not the config's phase "before"`}},
		// A config without phase runs the guard before the call, as a
		// predicate without phase is compiled for.
		{"predicate of phase after under the default phase", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"result == 'ok'","on_error":"open"},"predicates":{"deny":{"stage":"tool","phase":"after","source":"result == 'ok'"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny/phase (line 1, col 158): "after" is not the config's phase "before" (the default: the config gives none)`}},
		{"predicate without phase under phase after", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"true","phase":"after"},"predicates":{"deny":{"stage":"tool","source":"true"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny (line 1, col 122): the predicate's phase "before" (none given) is not the config's phase "after"`}},
		{"predicate of another stage", `{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"true","phase":"before"},"predicates":{"deny":{"stage":"chat","phase":"before","source":"true"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny/stage (line 1, col 132): "chat" is not the layer's stage "tool"`}},
		{"predicate typed by other tools", `{"version":1,"policy":"p","tools":{"a":{"side_effecting":true,"retry_safe":false}},"chains":{"tool":[{"use":"guard","tools":["a"],"config":{"deny":"true"},"predicates":{"deny":{"stage":"tool","source":"true"}}}]}}`,
			[]string{`/chains/tool/0/predicates/deny/tools`, `are not the layer's tools ["a"]`}},
		{"layer scoped to an undeclared tool", `{"version":1,"policy":"p","tools":{"refund":{"side_effecting":true,"retry_safe":false}},"chains":{"tool":[{"use":"log","tools":["refnud"]}]}}`,
			[]string{`/chains/tool/0/tools/0 (line 1, col 129): tool "refnud" is not declared in tools`}},
		{"scoped to an undeclared tool that settings allow", `{"version":1,"policy":"p","settings":{"allow_undeclared_tools":true},"chains":{"tool":[{"use":"log","tools":["refnud"]}]}}`,
			[]string{`/chains/tool/0/tools/0 (line 1, col 110): tool "refnud" is not declared in tools`}},
		// prove would check a bound on a tool that never runs, and none on
		// the real one.
		{"execution bound of an undeclared tool", `{"version":1,"policy":"p","tools":{"refund":{"side_effecting":true,"retry_safe":false}},"chains":{},"invariants":{"max_executions":{"refnud":1}}}`,
			[]string{`/invariants/max_executions/refnud (line 1, col 142): tool "refnud" is not declared in tools`}},
		// A layer naming a model the plan does not declare, as vet refuses
		// one: a hedge would race a model without a client, or one the
		// meter has no price for.
		{"hedge racing an undeclared model", `{"version":1,"policy":"p","models":{"primary":{"usd_per_mtok_in":1,"usd_per_mtok_out":1},"mirror":{"usd_per_mtok_in":1,"usd_per_mtok_out":1}},"chains":{"chat":[{"use":"hedge","config":{"models":["primary","mirorr"]}}]}}`,
			[]string{`/chains/chat/0/config/models/1 (line 1, col 206): model "mirorr" is not declared in models; did you mean "mirror"?`}},
		{"fallback to an undeclared model", `{"version":1,"policy":"p","models":{"primary":{"usd_per_mtok_in":1,"usd_per_mtok_out":1}},"chains":{"chat":[{"use":"fallback","config":{"models":["ghost","primary"]}}]}}`,
			[]string{`/chains/chat/0/config/models/0 (line 1, col 147): model "ghost" is not declared in models`}},
		{"judge asking an undeclared model", `{"version":1,"policy":"p","chains":{"chat":[{"use":"judge","config":{"model":"ghost","prompt":"p"}}]}}`,
			[]string{`/chains/chat/0/config/model (line 1, col 78): model "ghost" is not declared in models`}},
		{"classifier asking an undeclared model", `{"version":1,"policy":"p","models":{"m":{"usd_per_mtok_in":1,"usd_per_mtok_out":1}},"chains":{"chat":[{"use":"security","config":{"classifier":{"kind":"chat","model":"ghost"}}}]}}`,
			[]string{`/chains/chat/0/config/classifier/model (line 1, col 167): model "ghost" is not declared in models`}},
		{"layer of a custom module naming an undeclared model", `{"version":1,"policy":"p","models":{"m":{"usd_per_mtok_in":1,"usd_per_mtok_out":1}},"chains":{"turn":[{"use":"mine","config":{"model":"ghost"}}]}}`,
			[]string{`/chains/turn/0/config/model (line 1, col 135): model "ghost" is not declared in models`}},
		{"chat layer scoped to tools", `{"version":1,"policy":"p","tools":{"a":{"side_effecting":true,"retry_safe":false}},"chains":{"chat":[{"use":"log","tools":["a"]}]}}`,
			[]string{`/chains/chat/0/tools (line 1, col 123): only layers of the tool chain are scoped to tools`}},
		// settings.cel_cost_limit is at most a billion: a plan that raises
		// a predicate's limit beyond lets it cost what vet refuses.
		{"cost limit above the policy's bound", `{"version":1,"policy":"p","chains":{},"admit":{"stage":"admit","source":"true","cost_limit":1000000001}}`,
			[]string{"/admit/cost_limit (line 1, col 93): must be <= 1e+09 but found 1000000001"}},
		{"empty name", `{"version":1,"policy":"p","chains":{"tool":[{"use":"log","name":""}]}}`, []string{"/chains/tool/0/name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("bad.json", []byte(tt.in))
			require.Error(t, err)
			var pe *Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "bad.json", pe.Source)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestLoadRefusesWhatItCannotRead: a FIFO would block the load until a
// writer came, and a file over the bound is refused as such, not as a
// truncated plan.
func TestLoadRefusesWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plan.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() { _, err := Load(fifo); done <- err }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "not a regular file")
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}

	big := filepath.Join(dir, "big.json")
	b := append([]byte(`{"version":1,"policy":"`), bytes.Repeat([]byte("x"), MaxFileSize)...)
	require.NoError(t, os.WriteFile(big, append(b, `","chains":{}}`...), 0o600))
	_, err := Load(big)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []string{"larger than 64 MiB"}, pe.Problems)
}

// TestDecodeListsEveryRepeatedKey: each repeat of a key is a problem that
// names the first, keys are escaped in the pointer, and below a layer's
// config (tools' args here) keys compare exactly.
func TestDecodeListsEveryRepeatedKey(t *testing.T) {
	in := `{"version":1,"policy":"p","chains":{},"models":{"a/b":{},"a/b":{},"a/b":{}},"tools":{"t":{"args":{"x":1,"x":2,"X":3}}}}`
	_, err := Decode("bad.json", []byte(in))
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []string{
		`/models/a~1b (line 1, col 58): duplicate key "a/b" (also at line 1, col 49)`,
		`/models/a~1b (line 1, col 67): duplicate key "a/b" (also at line 1, col 49)`,
		`/tools/t/args/x (line 1, col 105): duplicate key "x" (also at line 1, col 99)`,
	}, pe.Problems)
}

// TestLongContextTier: a model's long-context tier round-trips; a plan
// built before the tier existed (no long_context) loads with none, and
// prices every call at the model's own rates; a tier without its threshold
// or with a threshold of 0 is refused.
func TestLongContextTier(t *testing.T) {
	hour := 12.0
	p := &Plan{Version: Version, Policy: "p", Models: map[string]Model{"sonnet": {USDPerMTokIn: 3, USDPerMTokOut: 15,
		LongContext: &LongContext{AboveInputTokens: 200_000, USDPerMTokIn: 6, USDPerMTokOut: 22.5, USDPerMTokCacheWrite1h: &hour}}}}
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode("mem", b)
	require.NoError(t, err)
	assert.Equal(t, p.Models, got.Models)
	assert.Equal(t, 6.0, got.Models["sonnet"].Rates(200_001).USDPerMTokIn)
	assert.Equal(t, 3.0, got.Models["sonnet"].Rates(200_000).USDPerMTokIn)

	old, err := Decode("old", []byte(`{"version":1,"policy":"p","chains":{},"models":{"sonnet":{"usd_per_mtok_in":3,"usd_per_mtok_out":15,"usd_per_mtok_cache_write_1h":6}}}`))
	require.NoError(t, err)
	assert.Nil(t, old.Models["sonnet"].LongContext)
	assert.Equal(t, old.Models["sonnet"], old.Models["sonnet"].Rates(900_000))

	for in, want := range map[string]string{
		`{"usd_per_mtok_in":6,"usd_per_mtok_out":22.5}`:                              "missing properties: 'above_input_tokens'",
		`{"above_input_tokens":0,"usd_per_mtok_in":6,"usd_per_mtok_out":22.5}`:       "/models/m/long_context/above_input_tokens",
		`{"above_input_tokens":1,"usd_per_mtok_in":6,"usd_per_mtok_out":22.5,"x":1}`: "additionalProperties 'x' not allowed",
	} {
		_, err := Decode("bad", []byte(`{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":1,"usd_per_mtok_out":1,"long_context":`+in+`}}}`))
		require.Error(t, err, in)
		assert.ErrorContains(t, err, want, in)
	}
}

// TestDecodeRefusesNumbersNoFieldHolds: a number whose exponent is beyond
// what the schema validator's arithmetic takes crashed the load, one of a
// million digits took seconds (a 64 MiB plan, hours), and one too small
// for a float64 read as 0 (a free model, a budget of nothing). Each is
// refused at its place, before the schema is checked, wherever it is
// (a tool's args schema holds no Go field), and the message quotes a
// long number only in part.
func TestDecodeRefusesNumbersNoFieldHolds(t *testing.T) {
	price := func(n string) string {
		return `{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":` + n + `,"usd_per_mtok_out":1}}}`
	}
	long := strings.Repeat("1", 1_000_000)
	for in, want := range map[string]string{
		price("1e1000001"):  `/models/m/usd_per_mtok_in (line 1, col 72): number 1e1000001 does not fit a Go float64`,
		price("-1e1000001"): `/models/m/usd_per_mtok_in (line 1, col 72): number -1e1000001 does not fit a Go float64`,
		price("1e-1000001"): `/models/m/usd_per_mtok_in (line 1, col 72): number 1e-1000001 does not fit a Go float64`,
		price("1e-400"):     `/models/m/usd_per_mtok_in (line 1, col 72): number 1e-400 does not fit a Go float64`,
		price("1e400"):      `/models/m/usd_per_mtok_in (line 1, col 72): number 1e400 does not fit a Go float64`,
		price(long):         `/models/m/usd_per_mtok_in (line 1, col 72): number 1111111111111111111111111111111111111111... of 1000000 characters: a plan's numbers have at most 100`,
		`{"version":1,"policy":"p","chains":{},"tools":{"t":{"args":{"type":"object","properties":{"n":{"maximum":1e-1000001}}}}}}`: `/tools/t/args/properties/n/maximum (line 1, col 106): number 1e-1000001 does not fit a Go float64`,
	} {
		start := time.Now()
		_, err := Decode("bad.json", []byte(in))
		var pe *Error
		require.ErrorAs(t, err, &pe, in[:min(len(in), 120)])
		assert.Equal(t, []string{want}, pe.Problems)
		assert.Less(t, time.Since(start), time.Second)
	}
	// Zeros, the extremes of float64 and a uint64 are numbers.
	_, err := Decode("ok.json", []byte(`{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":0.0e-999,"usd_per_mtok_out":4.9e-324}},"tools":{"t":{"side_effecting":false,"retry_safe":false,"args":{"maximum":1.7976931348623157e308,"minimum":-0,"multipleOf":18446744073709551615}}},"admit":{"stage":"admit","source":"true","cost_limit":1000000000}}`))
	require.NoError(t, err)
}

// A policy given where its plan is expected (its directory, a .cue file)
// is refused with the command that builds the plan.
func TestLoadOfAPolicySaysToBuildItsPlan(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	require.EqualError(t, err, "invalid plan "+dir+":\n\ta directory, not a plan file (a policy directory? build its plan with `agentc build -o plan.json DIR` and load that)")
	cue := filepath.Join(dir, "policy.cue")
	require.NoError(t, os.WriteFile(cue, []byte("package p\n"), 0o600))
	_, err = Load(cue)
	require.EqualError(t, err, "invalid plan "+cue+":\n\tline 1, col 1: not JSON: invalid character 'p' looking for beginning of value (a CUE policy, not its plan? build the plan with `agentc build -o plan.json POLICY` and load that)")
}

// A builtin's config field outside the bounds its schema gives, nested in
// a struct or not, is refused at its place: a plan edited by hand cannot
// run a breaker that never opens, a budget of a billion billion dollars or
// a negative cooldown that agentc vet would have refused. A duration is
// refused below zero and beyond what a time.Duration holds; a string of
// another form (a meter's window "month") is the layer's to judge.
func TestDecodeRefusesConfigOutsideBounds(t *testing.T) {
	layer := func(use, config string) string {
		return `{"version":1,"policy":"p","chains":{"chat":[{"use":"` + use + `","config":` + config + `}]},"models":` + testModels + `}`
	}
	for _, c := range []struct{ in, want string }{
		{layer("retry", `{"breaker":{"failures":1000000000}}`),
			`/chains/chat/0/config/breaker/failures (line 1, col 92): 1000000000 is out of range: retry's breaker.failures is from 1 to 1000`},
		{layer("retry", `{"breaker":{"failures":-3}}`),
			`/chains/chat/0/config/breaker/failures (line 1, col 92): -3 is out of range: retry's breaker.failures is from 1 to 1000`},
		{layer("retry", `{"breaker":{"cooldown":"-5s"}}`),
			`/chains/chat/0/config/breaker/cooldown (line 1, col 92): retry's breaker.cooldown "-5s" is out of range: a duration is never below zero`},
		{layer("retry", `{"breaker":{"cooldown":"0s"}}`),
			`/chains/chat/0/config/breaker/cooldown (line 1, col 92): retry's breaker.cooldown "0s" is out of range: must be above zero`},
		{layer("retry", `{"breaker":{"cooldown":"1000000000000000000000000000000h"}}`),
			`/chains/chat/0/config/breaker/cooldown (line 1, col 92): retry's breaker.cooldown "1000000000000000000000000000000h" is out of range: longer than the longest duration, 2562047h47m16.854775807s (about 292 years)`},
		{layer("retry", `{"max_attempts":1000}`),
			`/chains/chat/0/config/max_attempts (line 1, col 85): 1000 is out of range: retry's max_attempts is from 1 to 10`},
		{layer("meter", `{"budget":{"usd":1e30}}`),
			`/chains/chat/0/config/budget/usd (line 1, col 86): 1e30 is out of range: meter's budget.usd is above 0 to 1000000`},
		{layer("meter", `{"budget":{"calls":-5}}`),
			`/chains/chat/0/config/budget/calls (line 1, col 88): -5 is out of range: meter's budget.calls is from 1 to 1000000000`},
		{layer("meter", `{"lease":"3000000h"}`),
			`/chains/chat/0/config/lease (line 1, col 78): meter's lease "3000000h" is out of range: longer than the longest duration, 2562047h47m16.854775807s (about 292 years)`},
		{layer("security", `{"classifier":{"url":"http://127.0.0.1:9","threshold":5}}`),
			`/chains/chat/0/config/classifier/threshold (line 1, col 126): 5 is out of range: security's classifier.threshold is from 0 to 1`},
		{layer("security", `{"classifier":{"url":"http://127.0.0.1:9","timeout":"-1s"}}`),
			`/chains/chat/0/config/classifier/timeout (line 1, col 124): security's classifier.timeout "-1s" is out of range: a duration is never below zero`},
	} {
		_, err := Decode("edited.json", []byte(c.in))
		var pe *Error
		require.ErrorAs(t, err, &pe, c.in)
		assert.Equal(t, []string{c.want}, pe.Problems, c.in)
	}
	for _, in := range []string{
		layer("meter", `{"window":"month","budget":{"usd":0.5,"calls":1000000000},"lease":"2562047h"}`),
		layer("retry", `{"max_attempts":10,"multiplier":1,"breaker":{"failures":1000,"cooldown":"30s"}}`),
	} {
		_, err := Decode("ok.json", []byte(in))
		assert.NoError(t, err, in)
	}
}

// One walk of a plan finds its repeated keys and its numbers no float64
// holds; the repeated keys are reported, all of them, before the numbers
// (a number may sit under a key whose other value a reader sees).
func TestDecodeReportsRepeatedKeysBeforeNumbers(t *testing.T) {
	both := `{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":1e400,"usd_per_mtok_out":1,"usd_per_mtok_out":2}},"policy":"q"}`
	_, err := Decode("both.json", []byte(both))
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []string{
		`/models/m/usd_per_mtok_out (line 1, col 99): duplicate key "usd_per_mtok_out" (also at line 1, col 78)`,
		`/policy (line 1, col 122): duplicate key "policy" (also at line 1, col 14)`,
	}, pe.Problems)

	nums := `{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":1e400,"usd_per_mtok_out":-1e-400}}}`
	_, err = Decode("nums.json", []byte(nums))
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []string{
		`/models/m/usd_per_mtok_in (line 1, col 72): number 1e400 does not fit a Go float64`,
		`/models/m/usd_per_mtok_out (line 1, col 97): number -1e-400 does not fit a Go float64`,
	}, pe.Problems)
}

// testModels declares, after the chains so that positions in them stay,
// the models the configs of the tests below name.
const testModels = `{"a":{"usd_per_mtok_in":1,"usd_per_mtok_out":1},"b":{"usd_per_mtok_in":1,"usd_per_mtok_out":1},"m":{"usd_per_mtok_in":1,"usd_per_mtok_out":1}}`

// A builtin's config edited by hand is refused at Decode, where the layer's
// decoder would refuse it at Build or its bounds would not be checked: a
// key spelt in another case than the schema's (the decoder matches keys
// regardless of case, so "Failures" would escape the bound of "failures"),
// a key the schema lacks, a value of another kind, a fraction or an
// exponent where an integer goes (the decoder refuses 3.0 as it refuses
// 3.5), null, a duration that does not parse. Each names its place.
func TestDecodeHoldsBuiltinConfigsToTheirSchema(t *testing.T) {
	layer := func(use, config string) string {
		return `{"version":1,"policy":"p","chains":{"chat":[{"use":"` + use + `","config":` + config + `}]},"models":` + testModels + `}`
	}
	for _, c := range []struct{ in, want string }{
		{layer("retry", `{"breaker":{"Failures":1000000000}}`),
			`/chains/chat/0/config/breaker/Failures (line 1, col 92): unknown field "Failures": retry's config spells it "failures" (keys match the fields exactly)`},
		{layer("retry", `{"Max_Attempts":1000}`),
			`/chains/chat/0/config/Max_Attempts (line 1, col 85): unknown field "Max_Attempts": retry's config spells it "max_attempts" (keys match the fields exactly)`},
		{layer("meter", `{"BUDGET":{"calls":1}}`),
			`/chains/chat/0/config/BUDGET (line 1, col 79): unknown field "BUDGET": meter's config spells it "budget" (keys match the fields exactly)`},
		{layer("retry", `{"attempts":3}`),
			`/chains/chat/0/config/attempts (line 1, col 81): unknown field "attempts": retry's config has no such field (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)`},
		{layer("retry", `{"breaker":{"limit":3}}`),
			`/chains/chat/0/config/breaker/limit (line 1, col 89): unknown field "limit": retry's config has no such field (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)`},
		// A dotted key is no path into the struct below it.
		{layer("retry", `{"breaker.failures":5}`),
			`/chains/chat/0/config/breaker.failures (line 1, col 89): unknown field "breaker.failures": a key names one field, not a path: nest it as {"breaker":{"failures":...}}`},
		{layer("meter", `{"budget":{"calls.x":5}}`),
			`/chains/chat/0/config/budget/calls.x (line 1, col 90): unknown field "calls.x": a key names one field, not a path`},
		{layer("retry", `{"max_attempts":3.0}`),
			`/chains/chat/0/config/max_attempts (line 1, col 85): 3.0 is not an integer as the layer's decoder reads one (digits only, no fraction or exponent): retry's max_attempts is an integer`},
		{layer("retry", `{"max_attempts":3.5}`),
			`/chains/chat/0/config/max_attempts (line 1, col 85): 3.5 is not an integer as the layer's decoder reads one (digits only, no fraction or exponent): retry's max_attempts is an integer`},
		{layer("meter", `{"budget":{"calls":3e2}}`),
			`/chains/chat/0/config/budget/calls (line 1, col 88): 3e2 is not an integer as the layer's decoder reads one (digits only, no fraction or exponent): meter's budget.calls is an integer`},
		{layer("retry", `{"max_attempts":"3"}`),
			`/chains/chat/0/config/max_attempts (line 1, col 85): a string: retry's max_attempts is an integer`},
		{layer("retry", `{"max_attempts":null}`),
			`/chains/chat/0/config/max_attempts (line 1, col 85): null: retry's max_attempts is an integer`},
		{layer("retry", `{"breaker":[1]}`),
			`/chains/chat/0/config/breaker (line 1, col 80): an array: retry's breaker is an object`},
		{layer("log", `{"include_args":"yes"}`),
			`/chains/chat/0/config/include_args (line 1, col 83): a string: log's include_args is a boolean`},
		{layer("judge", `{"model":"m","timeout":"5 parsecs"}`),
			`/chains/chat/0/config/timeout (line 1, col 92): judge's timeout "5 parsecs" is not a duration: a Go duration such as "250ms", "30s" or "1h30m"`},
		{layer("retry", `{"breaker":{"cooldown":"soon"}}`),
			`/chains/chat/0/config/breaker/cooldown (line 1, col 92): retry's breaker.cooldown "soon" is not a duration: a Go duration such as "250ms", "30s" or "1h30m"`},
		{layer("meter", `{"window":"week"}`),
			`/chains/chat/0/config/window (line 1, col 79): meter's window "week" is not a duration: a Go duration such as "250ms", "30s" or "1h30m", or "month"`},
	} {
		_, err := Decode("edited.json", []byte(c.in))
		var pe *Error
		require.ErrorAs(t, err, &pe, c.in)
		assert.Equal(t, []string{c.want}, pe.Problems, c.in)
	}
	for _, in := range []string{
		layer("meter", `{"window":"month","budget":{"calls":3,"usd":2}}`),
		layer("retry", `{"max_attempts":3,"multiplier":2.5,"breaker":{"failures":5,"cooldown":"1m"}}`),
		layer("retry", `{"multiplier":2}`),
		// Names below a map are the host's, matched exactly by the layer.
		layer("tracing", `{"attributes":{"Env":"prod","env":"dev"}}`),
		layer("tracing", `{"attributes":{"service.name":"billing"}}`),
		// A schema is any JSON.
		layer("output_coerce", `{"schema":{"type":"object","Properties":null}}`),
		// Another module's config is its decoder's to judge.
		layer("mine", `{"Anything":3.0}`),
	} {
		_, err := Decode("ok.json", []byte(in))
		assert.NoError(t, err, in)
	}
}

// A builtin's config is held to its schema inside lists and maps keyed by
// names as it is at its top: an element or a value of another kind, a key
// of a list's object the schema lacks or spells in another case (the
// layer's decoder matches keys regardless of case), each at its place.
func TestDecodeHoldsConfigListsAndMapsToTheirSchema(t *testing.T) {
	layer := func(stage, use, config string) string {
		return `{"version":1,"policy":"p","chains":{"` + stage + `":[{"use":"` + use + `","config":` + config + `}]},"models":` + testModels + `}`
	}
	for _, c := range []struct{ in, want string }{
		{layer("chat", "fallback", `{"models":["a",7]}`),
			`/chains/chat/0/config/models/1 (line 1, col 87): a number: fallback's models[] is a string`},
		{layer("chat", "fallback", `{"models":[null]}`),
			`/chains/chat/0/config/models/0 (line 1, col 83): null: fallback's models[] is a string`},
		{layer("tool", "tool_policy", `{"arg_patterns":[{"arg":"path","pattern":"^/etc"},{"Arg":"path","pattern":"x"}]}`),
			`/chains/tool/0/config/arg_patterns/1/Arg (line 1, col 132): unknown field "Arg": tool_policy's config spells it "arg" (keys match the fields exactly)`},
		{layer("tool", "tool_policy", `{"arg_patterns":[{"arg":"path","pattern":"x","flags":"i"}]}`),
			`/chains/tool/0/config/arg_patterns/0/flags (line 1, col 128): unknown field "flags": tool_policy's config has no such field (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)`},
		{layer("tool", "tool_policy", `{"arg_patterns":[{"arg":["path"],"pattern":"x"}]}`),
			`/chains/tool/0/config/arg_patterns/0/arg (line 1, col 99): an array: tool_policy's arg_patterns[].arg is a string`},
		{layer("tool", "tool_policy", `{"arg_patterns":["x"]}`),
			`/chains/tool/0/config/arg_patterns/0 (line 1, col 92): a string: tool_policy's arg_patterns[] is an object`},
		{layer("chat", "redact", `{"patterns":[{"pattern":"x"}]}`),
			`/chains/chat/0/config/patterns/0 (line 1, col 83): an object: redact's patterns[] is a string`},
		{layer("chat", "tracing", `{"attributes":{"env":"prod","team":3}}`),
			`/chains/chat/0/config/attributes/team (line 1, col 106): a number: tracing's attributes.<name> is a string`},
	} {
		_, err := Decode("edited.json", []byte(c.in))
		var pe *Error
		require.ErrorAs(t, err, &pe, c.in)
		assert.Equal(t, []string{c.want}, pe.Problems, c.in)
	}
	for _, in := range []string{
		layer("chat", "fallback", `{"models":["a","b"]}`),
		layer("tool", "tool_policy", `{"arg_patterns":[{"arg":"path","pattern":"^/etc"}],"deny":["rm"]}`),
		layer("chat", "tracing", `{"attributes":{"service.name":"billing","Env":"x"}}`),
	} {
		_, err := Decode("ok.json", []byte(in))
		assert.NoError(t, err, in)
	}
}

// A plan edited by hand past the bounds the policy schema gives its own
// numbers and durations is refused at Decode, where Build would fail late
// (run_idle, a store's timeout) or take it (a state queue of a hundred
// billion events, allocated whole when a field has a background sink; a
// price that makes every bill infinite).
func TestDecodeHoldsPlanValuesToThePolicyBounds(t *testing.T) {
	plan := func(extra string) string {
		return `{"version":1,"policy":"p","chains":{}` + extra + `}`
	}
	for _, c := range []struct{ in, want string }{
		{plan(`,"state":{"queue":100000000000,"fields":{}}`), `/state/queue (line 1, col 56): must be <= 1e+06 but found 100000000000`},
		{plan(`,"models":{"m":{"usd_per_mtok_in":1e300,"usd_per_mtok_out":1}}`), `/models/m/usd_per_mtok_in (line 1, col 72): must be <= 100000 but found 1e300`},
		{plan(`,"models":{"m":{"usd_per_mtok_in":1,"usd_per_mtok_out":1,"context_tokens":1000000000}}`), `/models/m/context_tokens (line 1, col 112): must be <= 1e+08 but found 1000000000`},
		{plan(`,"tools":{"t":{"side_effecting":true,"retry_safe":false}},"invariants":{"max_executions":{"t":1000000}}}`), `/invariants/max_executions/t (line 1, col 132): must be <= 1000 but found 1000000`},
		{plan(`,"settings":{"run_idle":"9999999999999h"}`), `/settings/run_idle (line 1, col 62): "9999999999999h" is out of range: longer than the longest duration, 2562047h47m16.854775807s (about 292 years)`},
		{plan(`,"stores":{"s":{"kind":"redis","url":"redis://127.0.0.1:1","timeout":"0s"}}`), `/stores/s/timeout (line 1, col 107): "0s" is out of range: must be above zero`},
		{plan(`,"settings":{"max_answer_bytes":-1}`), `/settings/max_answer_bytes (line 1, col 70): must be >= 1024 but found -1`},
	} {
		_, err := Decode("edited.json", []byte(c.in))
		var pe *Error
		require.ErrorAs(t, err, &pe, c.in)
		assert.Equal(t, []string{c.want}, pe.Problems, c.in)
	}
	_, err := Decode("ok.json", []byte(plan(`,"settings":{"run_idle":"0s","max_answer_bytes":1048576},"stores":{"s":{"kind":"redis","url":"redis://127.0.0.1:1","timeout":"2s"}}`)))
	assert.NoError(t, err)
}

// A plan saved with a UTF-8 byte order mark (as Windows editors save) loads
// as without it; a problem in it is placed as in the file without it.
func TestLoadReadsAPlanWithAByteOrderMark(t *testing.T) {
	b, err := Encode(&Plan{Version: Version, Policy: "bank", Models: map[string]Model{"primary": {}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(path, append([]byte("\uFEFF"), b...), 0o644))
	p, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "bank", p.Policy)

	_, err = Decode("plan.json", []byte("\uFEFF{\"version\": 1,\n \"x\": }"))
	var perr *Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, []string{"line 2, col 7: not JSON: invalid character '}' looking for beginning of value"}, perr.Problems)
}
