package compiler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCELCheckedBesideSchemaErrors checks which predicates of a policy
// with a schema error are type-checked in the same round: those that
// read no part with an error.
func TestCELCheckedBesideSchemaErrors(t *testing.T) {
	const tools = `tools: refund: args: {type: "object", additionalProperties: false, required: ["amount"], properties: amount: type: "number"}
tools: search: args: {type: "object", additionalProperties: false, required: ["q"], properties: q: type: "string"}
`
	const guards = `chains: tool: [
	{use: "guard", name: "r", tools: ["refund"], deny: "args.amout > 1.0"},
	{use: "guard", name: "s", tools: ["search"], deny: "args.qq == ''"},
	{use: "guard", name: "u", deny: "args.qqq == ''"},
]
chains: chat: [{use: "guard", deny: "reqest.model == 'm'"}]
chains: turn: [{use: "guard", phase: "after", deny: "outpt == ''"}]
`
	const model = `models: m: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "OPENAI_API_KEY"}
`
	for _, tc := range []struct {
		name, src string
		want      []string // the lines of the cel findings
	}{
		{"an error in a part no predicate reads", model + tools + guards + `stores: s: {kind: "redis", urll: "x"}`,
			[]string{"7", "8", "9", "11", "12"}},
		{"a broken tool", model + `tools: refund: args: {type: "object", additionalProperties: false, required: ["amount"], propertes: amount: type: "number"}
tools: search: args: {type: "object", additionalProperties: false, required: ["q"], properties: q: type: "string"}
` + guards, []string{"8", "11", "12"}},
		{"a broken model", `models: m: {provider: "openai", max_tokens: "x"}
` + tools + guards, []string{"7", "8", "9", "12"}},
		{"a broken model, an invariant", `models: m: {provider: "openai", max_tokens: "x"}
` + tools + `invariants: custom: few: "executions.tools.refnd.calls < 2"`, []string{"6"}},
		{"a misspelt models section, an invariant", `modles: m: {provider: "openai"}
` + tools + `invariants: custom: few: "executions.tools.refnd.calls < 2"`, nil},
		{"an error in settings", model + tools + guards + `settings: cel_cost_limt: 5000000`, nil},
		{"an error in mcp", model + tools + guards + `mcp: fs: {command: 5}`, []string{"12"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(context.Background(), []string{writePolicy(t, "package p\n\n"+tc.src+"\n")}, Options{})
			require.NoError(t, err)
			assert.Equal(t, []string{"load-policy"}, c.Stages)
			assert.Nil(t, c.Policy, "a policy with errors is not kept")
			assert.Empty(t, c.Predicates, "nor the checked forms of its predicates")
			var got []string
			schemaErrors := 0
			for _, d := range c.Diagnostics {
				if d.Rule[:4] == "cel/" {
					got = append(got, fmt.Sprint(d.Pos.Line))
				} else {
					schemaErrors++
				}
			}
			assert.Positive(t, schemaErrors, "%v", c.Diagnostics)
			assert.Equal(t, tc.want, got, "%v", c.Diagnostics)
		})
	}
}
