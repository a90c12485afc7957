package compiler

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A CEL predicate written with another language's habit gets a message
// that says what CEL writes instead.
func TestHabitHints(t *testing.T) {
	const tools = `tools: send_email: {side_effecting: true, args: {type: "object", required: ["to", "body"], properties: {to: {type: "string"}, body: {type: "string"}, cc: {type: "array", items: type: "string"}}}}
`
	tests := []struct{ name, pred, rule, want string }{
		{"assignment", `args.to = 'a'`, "cel/syntax", "CEL compares with ==, not ="},
		{"and", `args.to == 'a' and args.body == ''`, "cel/syntax", "CEL writes && for and, || for or, ! for not"},
		{"not equal", `args.to <> 'a'`, "cel/syntax", "CEL writes != for not equal"},
		{"len", `len(args.body) > 100`, "cel/type", "CEL writes size(x)"},
		{"substring in", `'evil.com' in args.to`, "cel/type", "for a substring write s.contains('...')"},
		{"list contains", `has(args.cc) && args.cc.contains('boss@example.com')`, "cel/type", "for an element of a list write x in list"},
		{"look-alike letter", "args.tо == 'a'", "cel/syntax", "'о' (U+043E, a Cyrillic letter) is not ASCII: CEL names and operators are, so retype it"},
		{"regex escape", `args.to.matches('@evil\.com$')`, "cel/syntax",
			"`\\.` is not an escape of a CEL string: the CEL text needs `\\\\.`, written `\\\\\\\\.` in a CUE \"...\" string or `\\\\.` in a #\"...\"# one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\n" + tools + "chains: tool: [{use: \"guard\", tools: [\"send_email\"], deny: #\"" + tt.pred + "\"#}]\n"
			c, err := Compile(context.Background(), []string{writePolicy(t, src)}, Options{})
			require.NoError(t, err)
			require.NotEmpty(t, c.Diagnostics)
			assert.Equal(t, tt.rule, c.Diagnostics[0].Rule)
			assert.Contains(t, c.Diagnostics[0].Message, tt.want)
		})
	}
	// A valid escape, a == and an && are left alone.
	ok := "package p\n" + tools + "chains: tool: [{use: \"guard\", tools: [\"send_email\"], deny: #\"args.to.matches('@evil\\\\.com$') && args.body == 'x'\"#}]\n"
	c, err := Compile(context.Background(), []string{writePolicy(t, ok)}, Options{})
	require.NoError(t, err)
	assert.Empty(t, c.Diagnostics)
}

// A variable of another stage is named as such, with the variables the
// predicate's own stage has.
func TestStageVariableHint(t *testing.T) {
	src := "package p\nmodels: primary: {}\nchains: chat: [{use: \"guard\", deny: \"args.amount > 5.0\"}]\n"
	c, err := Compile(context.Background(), []string{writePolicy(t, src)}, Options{})
	require.NoError(t, err)
	require.Len(t, c.Diagnostics, 1)
	assert.Equal(t, "cel/type", c.Diagnostics[0].Rule)
	assert.Equal(t, "undeclared reference to 'args': args is a variable of the tool stage; a chat predicate reads run, request, messages and, after the call, response", c.Diagnostics[0].Message)

	// A misspelt name of no stage gets no such hint.
	src = "package p\ntools: t: {}\nchains: tool: [{use: \"guard\", deny: \"argz.amount > 5.0\"}]\n"
	c, err = Compile(context.Background(), []string{writePolicy(t, src)}, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, c.Diagnostics)
	assert.NotContains(t, c.Diagnostics[0].Message, "is a variable of")
}

// A misspelt variable is given the closest variable of the predicate's
// stage: in a chain entry, in a state handler and in an invariant, whose
// message carries no note of cel-go's empty container. A state handler's
// predicate gets the habit hints too.
func TestMisspeltVariableHint(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"tool guard", "tools: t: {}\nchains: tool: [{use: \"guard\", deny: \"arg.amount > 5.0\"}]",
			"undeclared reference to 'arg'; did you mean args?"},
		{"admit", `admit: "itme.score > 0.5"`, "undeclared reference to 'itme'; did you mean item?"},
		{"state deny", `state: fields: credit: {schema: {type: "integer"}, on_set: [{deny: "valeu > 200"}]}`,
			"undeclared reference to 'valeu'; did you mean value?"},
		{"state habit", `state: fields: credit: {schema: {type: "integer"}, on_set: [{deny: "value = 200"}]}`,
			"CEL compares with ==, not ="},
		{"invariant", `invariants: custom: once: "execution.tools.refund <= 1"`,
			"invariant: undeclared reference to 'execution'; did you mean executions?"},
		{"invariant far", `invariants: custom: once: "effects.refund <= 1"`,
			"invariant: undeclared reference to 'effects'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(context.Background(), []string{writePolicy(t, "package p\n"+tt.src+"\n")}, Options{})
			require.NoError(t, err)
			require.NotEmpty(t, c.Diagnostics)
			assert.True(t, strings.HasSuffix(c.Diagnostics[0].Message, tt.want), c.Diagnostics[0].Message)
		})
	}
}

// An estimate over the limit says what the policy can do about it in its
// stage: a chat predicate has no schema to declare sizes in.
func TestCostHint(t *testing.T) {
	tests := []struct {
		name, chains string
		want         []string
		not          []string
	}{
		{"chat regex", `chains: chat: [{use: "guard", deny: "messages.exists(m, m.content.matches('ignore (all )?previous instructions'))"}]`,
			[]string{"256 elements in messages and 16384 characters in a message's content", "contains() with a fixed string costs less than matches()",
				"content_filter's patterns", "or raise settings.cel_cost_limit"},
			[]string{"schema"}},
		{"chat nested", `chains: chat: [{use: "guard", deny: "messages.exists(m, messages.exists(n, m.content == n.content))"}]`,
			[]string{"256 elements in messages", "; raise settings.cel_cost_limit"},
			[]string{"schema", "content_filter", "matches()"}},
		{"turn regex", "settings: cel_cost_limit: 1000\nchains: turn: [{use: \"guard\", deny: \"input.text.matches('secret')\"}]",
			[]string{"32768 characters in a string", "contains() with a fixed string", "or raise settings.cel_cost_limit"},
			[]string{"schema", "content_filter"}},
		{"typed args", "tools: t: {args: {type: \"object\", properties: {q: type: \"string\"}}}\nsettings: cel_cost_limit: 1000\nchains: tool: [{use: \"guard\", tools: [\"t\"], deny: \"has(args.q) && args.q.contains('secret')\"}]",
			[]string{"declare maxLength/maxItems in the tool's schema", "or raise settings.cel_cost_limit"},
			[]string{"content_filter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(context.Background(), []string{writePolicy(t, "package p\n"+tt.chains+"\n")}, Options{})
			require.NoError(t, err)
			require.Len(t, c.Diagnostics, 1)
			assert.Equal(t, "cel/cost", c.Diagnostics[0].Rule)
			for _, w := range tt.want {
				assert.Contains(t, c.Diagnostics[0].Message, w)
			}
			for _, n := range tt.not {
				assert.NotContains(t, c.Diagnostics[0].Message, n)
			}
		})
	}
}
