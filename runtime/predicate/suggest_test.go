package predicate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSuggestField checks the did-you-mean of an undefined field: taken
// from the type of what the field selects on, a comprehension variable
// included, and absent when nothing is close.
func TestSuggestField(t *testing.T) {
	tool := toolEnv(t, "refund")
	chat := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	turn := mustEnv(t, EnvConfig{Stage: Turn, Phase: After})
	admit := mustEnv(t, EnvConfig{Stage: Admit})
	for _, tt := range []struct {
		env  *Env
		src  string
		want string // the message, exactly
	}{
		{tool, "args.ammount > 100.0", "undefined field 'ammount'; did you mean 'amount'?"},
		{tool, "tool.nmae == 'refund'", "undefined field 'nmae'; did you mean 'name'?"},
		{tool, "has(args.shipping) && args.shipping.cuntry == 'US'", "undefined field 'cuntry'; did you mean 'country'?"},
		{tool, "has(args.lines) && args.lines.all(l, l.skew == '')", "undefined field 'skew'; did you mean 'sku'?"},
		{tool, "args.zzzzzzzz == 1", "undefined field 'zzzzzzzz'"},
		{chat, "request.params.temprature > 1.0", "undefined field 'temprature'; did you mean 'temperature'?"},
		{chat, "request.tools.exists(t, t.descripton == '')", "undefined field 'descripton'; did you mean 'description'?"},
		{chat, "response.tool_calls.exists(c, c.nme == 'refund')", "undefined field 'nme'; did you mean 'name'?"},
		{chat, "response.usage.input_tokns > 10", "undefined field 'input_tokns'; did you mean 'input_tokens'?"},
		// The innermost comprehension binding the name types it.
		{chat, "request.tools.exists(x, request.messages.exists(x, x.rol == 'user'))", "undefined field 'rol'; did you mean 'role'?"},
		// An object's text goes by text or content: the other name finds it.
		{chat, "messages.exists(m, m.text == 'x')", "undefined field 'text'; did you mean 'content'?"},
		{admit, "item.text.contains('x')", "undefined field 'text'; did you mean 'content'?"},
		{turn, "input.content == 'hi'", "undefined field 'content'; did you mean 'text'?"},
		// An object compared with a string, or given a string method, is told its text field.
		{admit, "item == 'x'", "found no matching overload for '_==_' applied to '(agentc.item, string)'; agentc.item is an object: its text is its field content (item.content)"},
		{turn, "'hi' == input", "found no matching overload for '_==_' applied to '(string, agentc.input)'; agentc.input is an object: its text is its field text (input.text)"},
		{turn, "output.contains('x')", "found no matching overload for 'contains' applied to 'agentc.output.(string)'; agentc.output is an object: its text is its field text (output.text)"},
		{chat, "response.startsWith('x')", "found no matching overload for 'startsWith' applied to 'agentc.response.(string)'; agentc.response is an object: its text is its field text (response.text)"},
	} {
		_, iss := tt.env.Check(tt.src)
		if assert.NotEmpty(t, iss, tt.src) {
			require.Equal(t, RuleType, iss[0].Rule, tt.src)
			assert.Equal(t, tt.want, iss[0].Message, tt.src)
		}
	}
}

// TestHasFieldPosition checks that a misspelt field inside has(), which
// cel-go reports at the macro's parenthesis, is placed on the field and gets
// its did-you-mean.
func TestHasFieldPosition(t *testing.T) {
	tool := toolEnv(t, "refund")
	for _, tt := range []struct {
		src  string
		want string // the issue, exactly
	}{
		{"args.amount > 100.0 && !has(args.aproved_by)", "1:34: cel/type: undefined field 'aproved_by'; did you mean 'approved_by'?"},
		{"!has( args.\n  aproved_by)", "2:3: cel/type: undefined field 'aproved_by'; did you mean 'approved_by'?"},
		{"has(args.shipping.cuntry)", "1:19: cel/type: undefined field 'cuntry'; did you mean 'country'?"},
	} {
		_, iss := tool.Check(tt.src)
		if assert.NotEmpty(t, iss, tt.src) {
			assert.Equal(t, tt.want, iss[0].String(), tt.src)
		}
	}
}

// TestSplitField checks the note of an undefined field that some of the
// tools an entry is scoped to declare: args holds the fields all of them
// declare with one type, so a field typed differently, or that one of them
// lacks, is undefined, and the message says why rather than nothing.
func TestSplitField(t *testing.T) {
	refund := `{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"},"reason":{"type":"string"},
		"tags":{"type":"array","items":{"type":"string"}},"ship":{"type":"object","properties":{"zip":{"type":"string"}}}}}`
	credit := `{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer"},
		"tags":{"type":"array","items":{"type":"integer"}},"ship":{"type":"object","properties":{"zip":{"type":"integer"}}}}}`
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(refund), json.RawMessage(credit)}})
	for _, tt := range []struct{ src, want string }{
		{"args.amount > 100.0", "undefined field 'amount': the tools the entry is scoped to declare args.amount with different types (double, int), and args holds only the fields they all declare with one type; give the tools one type for it, or one entry each"},
		{"has(args.reason) && args.reason == 'x'", "undefined field 'reason': only 1 of the 2 tools the entry is scoped to declares args.reason, and args holds the fields every one of them declares with one type; give the others their own entry, or read dyn(args).reason behind has(dyn(args).reason)"},
		{"size(args.tags) > 3", "undefined field 'tags': the tools the entry is scoped to declare args.tags with different types (lists of different elements), and args holds only the fields they all declare with one type; give the tools one type for it, or one entry each"},
		{"has(args.ship) && has(args.ship.zip)", "undefined field 'zip': the tools the entry is scoped to declare args.ship.zip with different types (int, string), and args holds only the fields they all declare with one type; give the tools one type for it, or one entry each"},
		// A field no tool declares keeps its did-you-mean.
		{"args.amont > 1.0", "undefined field 'amont'"},
	} {
		_, iss := env.Check(tt.src)
		if assert.NotEmpty(t, iss, tt.src) {
			require.Equal(t, RuleType, iss[0].Rule, tt.src)
			assert.Equal(t, tt.want, iss[0].Message, tt.src)
		}
	}
	_, iss := env.Check("has(dyn(args).reason) && dyn(args).reason == 'x'")
	assert.Empty(t, iss, "the read the note suggests type-checks")
}

// TestCheckGiven checks that the paths a layer's when proves present (its
// PresentIfTrue) make a read of them need no test of its own, and that
// CompileSpec honours them as the runtime builds a plan.
func TestCheckGiven(t *testing.T) {
	tool := toolEnv(t, "refund")
	when, iss := tool.Check("has(args.approved_by) && args.amount > 1.0")
	require.Empty(t, iss)
	given := when.PresentIfTrue()
	assert.Contains(t, given, "args.approved_by")

	_, iss = tool.Check("args.approved_by == 'bob'")
	require.NotEmpty(t, iss, "without the when, the optional read needs a test")
	_, iss = tool.CheckGiven("args.approved_by == 'bob'", given)
	assert.Empty(t, iss)

	turn := mustEnv(t, EnvConfig{Stage: Turn})
	w, iss := turn.Check("has(session.meta.tier)")
	require.Empty(t, iss)
	c, iss := turn.CheckGiven("session.meta.tier == 'banned'", w.PresentIfTrue())
	require.Empty(t, iss)
	require.Len(t, c.KeyReads, 1)
	assert.True(t, c.KeyReads[0].Tested, "a key the when tests is read tested")

	spec := Spec{Stage: Tool, Source: "args.approved_by == 'bob'", ArgsSchemas: []json.RawMessage{schema(t, "refund")}}
	_, err := CompileSpec(spec)
	require.Error(t, err)
	spec.Given = given
	_, err = CompileSpec(spec)
	assert.NoError(t, err)
}

// TestSuggestSchemaObjectIndex checks the hint of an object typed from a
// schema read as a map: by a key in brackets (args['x-api-key']) or tested
// with in ('x-api-key' in args). Its fields are read by name, one that is
// not an identifier between backticks, and has() tests one.
func TestSuggestSchemaObjectIndex(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"required": ["x-api-key", "ship"], "properties": {"x-api-key": {"type": "string"}, "order_id": {"type": "string"},
		"ship": {"type": "object", "properties": {"zip-code": {"type": "string"}}}}}`)}})
	for _, tt := range []struct{ src, want string }{
		{"args['x-api-key'] == 'k'", "found no matching overload for '_[_]' applied to '(agentc.args, string)'; args is an object typed from its tools' args schemas, not a map: read its field as args.`x-api-key` (a name that is not an identifier goes between backticks)"},
		{`args["order_id"] == 'k'`, "found no matching overload for '_[_]' applied to '(agentc.args, string)'; args is an object typed from its tools' args schemas, not a map: read its field as args.order_id"},
		{"args.ship['zip-code'] == '1'", "found no matching overload for '_[_]' applied to '(agentc.args.ship, string)'; args.ship is an object typed from its tools' args schemas, not a map: read its field as args.ship.`zip-code` (a name that is not an identifier goes between backticks)"},
		{"'x-api-key' in args", "found no matching overload for '@in' applied to '(string, agentc.args)'; args is an object typed from its tools' args schemas, not a map: test its field with has(args.`x-api-key`) (a name that is not an identifier goes between backticks)"},
		{"!('order_id' in args)", "found no matching overload for '@in' applied to '(string, agentc.args)'; args is an object typed from its tools' args schemas, not a map: test its field with has(args.order_id)"},
	} {
		_, iss := env.Check(tt.src)
		if assert.NotEmpty(t, iss, tt.src) {
			assert.Equal(t, tt.want, iss[0].Message, tt.src)
		}
	}
	_, iss := env.Check("has(args['x-api-key'])")
	require.NotEmpty(t, iss)
	assert.Equal(t, "invalid argument to has() macro: has() takes a field read (has(args.reason); a name that is not an identifier goes between backticks: has(args.`x-api-key`)); a map's key is tested with 'key' in map", iss[0].Message)
	// What the hint says to write checks.
	for _, src := range []string{"args.`x-api-key` == 'k'", "has(args.`x-api-key`) && has(args.order_id)", "has(args.ship.`zip-code`) && args.ship.`zip-code` == '1'"} {
		_, iss := env.Check(src)
		assert.Empty(t, iss, src)
	}
}
