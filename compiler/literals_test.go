package compiler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A != with a value the field never holds is always true. Where that can
// only make the predicate fail closed (a deny or a when that holds for more
// calls, a require under a negation) it is a warning; where it can make it
// fail open (a require, a negated deny, an invariant), or where its place
// is not known (a function's argument), it stays an error.
func TestUnknownValueInequalitySeverityFollowsOutcome(t *testing.T) {
	dir := writePolicy(t, `package p

tools: {
	search: {args: {type: "object", properties: q: type: "string"}}
	buy: {side_effecting: true, args: {type: "object", properties: sku: type: "string"}}
}
chains: tool: [
	{use: "guard", name: "deny_and", deny: "tool.name != 'serch' && run.meta.?readonly.orValue(false) == true"},
	{use: "guard", name: "deny_or", deny: "tool.name != 'serch' || run.meta.?readonly.orValue(false) == true"},
	{use: "guard", name: "deny_exists", deny: "['a'].exists(x, tool.name != 'serch' && x == run.meta.?k.orValue(''))"},
	{use: "guard", name: "deny_not", deny: "!(tool.name != 'serch') && run.meta.?readonly.orValue(false) == true"},
	{use: "guard", name: "require", require: "tool.name != 'serch' && run.meta.?ok.orValue(false) == true"},
	{use: "guard", name: "require_not", require: "!(tool.name != 'serch' && run.meta.?ro.orValue(false) == true)"},
	{use: "guard", name: "deny_cond", deny: "(tool.name != 'serch' ? 1 : 2) == run.meta.?n.orValue(0)"},
	{use: "guard", name: "deny_eq", deny: "tool.name == 'serch'"},
	{use: "log", when: "tool.name != 'serch'"},
]
chains: turn: [
	{use: "guard", name: "after", phase: "after", deny: "status != 'blocked' && output.text.contains('secret')"},
]
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range c.Diagnostics {
		if d.Rule == ruleUnknownValue {
			got = append(got, fmt.Sprintf("%d %s", d.Pos.Line, d.Severity))
		}
	}
	assert.Equal(t, []string{
		"8 warning", "9 warning", "10 warning", "11 error",
		"12 error", "13 warning", "14 error", "15 error", "16 warning",
		"19 warning",
	}, got)
}

func TestComparisonPolarity(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want int
	}{
		{"tool.name != 'x'", 1},
		{"a && (b || tool.name != 'x')", 1},
		{"!(a && tool.name != 'x')", -1},
		{"!!(tool.name != 'x')", 1},
		{"l.all(e, e != 'x')", 1},
		{"!l.exists(e, e != 'x')", -1},
		{"l.exists_one(e, e != 'x')", 0},
		{"l.filter(e, e != 'x').size() > 0", 0},
		{"c ? tool.name != 'x' : false", 1},
		{"(tool.name != 'x') ? a : b", 0},
		{"f(tool.name != 'x')", 0},
		{"tool.name in ['a', 'x']", 1},
		{"tool.name != 'y'", 0}, // no constant at the offset
	} {
		assert.Equal(t, tt.want, comparisonPolarity(tt.src, strings.Index(tt.src, "'x'")), tt.src)
	}
}

// A model's provider id, a provider's stop reason or an API's role, where
// agentc reports another name, gets that name as its did-you-mean.
func TestUnknownValueProviderWords(t *testing.T) {
	dir := writePolicy(t, `package p

models: fast: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "OPENAI_API_KEY"}
chains: chat: [
	{use: "guard", name: "a", deny: "request.model == 'gpt-4.1-mini'"},
	{use: "guard", name: "b", phase: "after", deny: "response.finish_reason == 'max_tokens'"},
	{use: "guard", name: "c", deny: "messages.exists(m, m.role == 'developer')"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleUnknownValue, true)
	require.Len(t, got, 3)
	assert.True(t, strings.HasSuffix(got[0], "; 'gpt-4.1-mini' is the provider's id of the model `fast`, and request.model holds the name the policy gives it: did you mean 'fast'?"), got[0])
	assert.True(t, strings.HasSuffix(got[1], "; agentc reports the API's 'max_tokens' as 'length': did you mean 'length'?"), got[1])
	assert.True(t, strings.HasSuffix(got[2], "; agentc reports the API's 'developer' as 'system': did you mean 'system'?"), got[2])
}

// A field of an element read by a constant index holds what the field of
// every element does: its comparison with a value it never holds is
// reported at the value, named as the predicate reads it.
func TestUnknownValueIndexedElement(t *testing.T) {
	dir := writePolicy(t, `package p

tools: send: {args: {type: "object", properties: {to: {type: "string"}}}}
chains: chat: [
	{use: "guard", name: "a", phase: "after", deny: "size(response.tool_calls) > 0 && response.tool_calls[0].name == 'sned'"},
	{use: "guard", name: "b", deny: "size(messages) > 0 && messages[0].role == 'developer'"},
	{use: "guard", name: "c", deny: "size(request.messages) > 1 && request.messages[1].role in ['usr', 'user']"},
	{use: "guard", name: "d", deny: "size(messages) > 0 && messages[0].role == 'user' && messages[?0].role.orValue('') == 'x'"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleUnknownValue, true)
	require.Len(t, got, 3, got)
	assert.True(t, strings.HasPrefix(got[0], "5:115 cel/unknown-value: response.tool_calls[0].name is never 'sned': it is one of the declared tools ('send'"), got[0])
	assert.True(t, strings.HasPrefix(got[1], "6:77 cel/unknown-value: messages[0].role is never 'developer'"), got[1])
	assert.True(t, strings.HasSuffix(got[1], "; agentc reports the API's 'developer' as 'system': did you mean 'system'?"), got[1])
	assert.True(t, strings.HasPrefix(got[2], "7:94 cel/unknown-value: request.messages[1].role is never 'usr'"), got[2])
	assert.Contains(t, got[2], "'usr' in the list never matches (its other values may)", got[2])
}
