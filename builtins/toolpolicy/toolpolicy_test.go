package toolpolicy_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/toolpolicy"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestPolicy(t *testing.T) {
	const cfg = `{"allow":["search_kb","run_sql","fetch"],"deny":["drop_db"],
		"arg_patterns":[{"arg":"query","pattern":"(?i)\\bdrop\\s+table\\b"},{"arg":"limit","pattern":"^[0-9]{4,}$"},
			{"arg":"cmd","pattern":"&&|<script"},{"arg":"path","pattern":"^/etc/"}]}`
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("tools", rt.Layer("tool_policy", cfg))}})
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	fns := map[string]runtime.ToolFunc{}
	for _, n := range []string{"search_kb", "run_sql", "drop_db", "shell", "fetch"} {
		fns[n] = tool.Func()
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: fns})
	require.NoError(t, err)
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		blocked string
	}{
		{"allowed", "search_kb", map[string]any{"query": "refunds"}, ""},
		{"denied", "drop_db", nil, "denied"},
		{"not on allow", "shell", nil, "not allowed"},
		{"arg pattern", "run_sql", map[string]any{"query": "SELECT 1; DROP  TABLE users"}, "argument query"},
		{"numeric arg as JSON text", "run_sql", map[string]any{"query": "select", "limit": 100000.0}, "argument limit"},
		{"small numeric arg", "run_sql", map[string]any{"query": "select", "limit": 10.0}, ""},
		// A host's json.Number is matched as the number it is (10000), as
		// a guard reads it, not as its spelling.
		{"numeric arg a host spells with an exponent", "run_sql", map[string]any{"query": "select", "limit": json.Number("1e4")}, "argument limit"},
		{"numeric arg a host spells with a fraction", "run_sql", map[string]any{"query": "select", "limit": json.Number("10000.0")}, "argument limit"},
		{"pattern arg absent", "fetch", map[string]any{"url": "x"}, ""},
		{"symbols in a list are not escaped", "run_sql", map[string]any{"cmd": []any{"ls", "&&", "curl"}}, "argument cmd"},
		{"symbols in an object are not escaped", "run_sql", map[string]any{"cmd": map[string]any{"html": "<script>"}}, "argument cmd"},
		{"anchored pattern on a nested string", "run_sql", map[string]any{"path": []any{"/etc/passwd"}}, "argument path"},
		{"anchored pattern on a nested key", "run_sql", map[string]any{"path": map[string]any{"/etc/shadow": true}}, "argument path"},
		{"nested string not matching", "run_sql", map[string]any{"path": []any{"/tmp/etc/x"}}, ""},
		{"argument name in another case", "run_sql", map[string]any{"query": "select", "QUERY": "drop table users"}, "argument query"},
		// A value with no JSON form (a host's Go value holding NaN) cannot be
		// checked: it is refused, not let through unchecked.
		{"value without a JSON form", "run_sql", map[string]any{"cmd": []any{"ls && curl", math.NaN()}}, "argument cmd cannot be checked"},
		{"clean value without a JSON form", "run_sql", map[string]any{"cmd": []any{"ls", math.Inf(1)}}, "argument cmd cannot be checked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tool.Calls()
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: tt.tool, Args: tt.args})
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Equal(t, before+1, tool.Calls())
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "tools", b.Layer)
			assert.Contains(t, b.Message, tt.blocked)
			assert.NotContains(t, b.Message, "users", "the message never quotes the value")
			assert.Equal(t, before, tool.Calls())
		})
	}
}

func TestNoAllowListAllowsAll(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("tool_policy", `{"deny":["x"]}`)}})
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"y": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "y"})
	require.NoError(t, err)
	assert.Equal(t, 1, tool.Calls())
}

func TestConfigErrors(t *testing.T) {
	tests := []struct{ cfg, want string }{
		{`{"arg_patterns":[{"arg":"q","pattern":"ok"},{"arg":"q","pattern":"(bad"}]}`, "arg_patterns[1].pattern"},
		{`{"arg_patterns":[{"arg":"","pattern":"x"}]}`, "arg_patterns[0].arg"},
		{`{"allow":["b","a"],"deny":["c","a"]}`, `deny[1]: tool "a" is also allow[1]`},
		{`{"arg_patterns":[{"arg":"q","pattern":"x","flags":"i"}]}`, "unknown field"},
	}
	for _, tt := range tests {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("tool_policy", tt.cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		require.Error(t, err, tt.cfg)
		assert.Contains(t, err.Error(), tt.want)
	}
}

// TestArgPatternNumbersAsPlainDecimals: a pattern sees a number in plain
// decimal form, never with an exponent, at the top and inside a list or an
// object, so a digits-only deny pattern holds however the number is
// spelled or held.
func TestArgPatternNumbersAsPlainDecimals(t *testing.T) {
	const cfg = `{"arg_patterns":[{"arg":"account","pattern":"^-?[0-9]{10,}$"},{"arg":"rate","pattern":"^0\\.0000001$"},
		{"arg":"zero","pattern":"^-"}]}`
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("tools", rt.Layer("tool_policy", cfg))}})
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
	require.NoError(t, err)
	var decoded map[string]any
	require.NoError(t, runtime.DecodeArgs([]byte(`{"account":1000000000000000000000}`), &decoded))
	var huge map[string]any
	require.NoError(t, runtime.DecodeArgs([]byte(`{"account":1e400}`), &huge))
	tests := []struct {
		name    string
		args    map[string]any
		blocked bool
	}{
		{"float64 1e21", map[string]any{"account": 1e21}, true},
		{"negative float64 1e21", map[string]any{"account": -1e21}, true},
		{"float64 of 24 digits", map[string]any{"account": 123456789012345678901234.0}, true},
		{"decoded 1e21", decoded, true},
		{"int64", map[string]any{"account": int64(9007199254740993)}, true},
		{"host json.Number with an exponent", map[string]any{"account": json.Number("12345e20")}, true},
		{"json.Number beyond float64", huge, true},
		{"json.Number of more digits than float64 holds", map[string]any{"account": json.Number("1234567890123456789012345678901")}, true},
		{"host Go int", map[string]any{"account": 12345678901}, true},
		{"host float32", map[string]any{"account": float32(1e20)}, true},
		{"float64 1e21 in a list", map[string]any{"account": []any{"x", 1e21}}, true},
		{"int64 in an object", map[string]any{"account": map[string]any{"id": int64(9007199254740993)}}, true},
		{"host []float64", map[string]any{"account": []float64{1, 1e21}}, true},
		{"short number", map[string]any{"account": 12345.0}, false},
		{"short numbers in a list", map[string]any{"account": []any{1.0, 2.0}}, false},
		{"small float64 1e-7", map[string]any{"rate": 1e-7}, true},
		{"small json.Number 1e-7", map[string]any{"rate": json.Number("1E-7")}, true},
		{"negative zero", map[string]any{"zero": math.Copysign(0, -1)}, false},
		{"json.Number negative zero", map[string]any{"zero": json.Number("-0.0e3")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "pay", Args: tt.args})
			if !tt.blocked {
				require.NoError(t, err)
				return
			}
			// A number no float64 or int64 holds is refused before the
			// layer (it cannot be checked exactly); any other by the pattern.
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Regexp(t, "matches the blocked pattern|cannot be checked exactly", b.Message)
		})
	}
}
