package predicate

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEvalNumbersAreNotRounded: a number a double cannot hold was read
// rounded to a neighbour, so a predicate decided on another number than
// the arguments carry (9007199254740993 read as 9007199254740992, which a
// deny of ids above 9007199254740992 let through). An integer is read
// exactly where an int is wanted; where a double is wanted, or in a dyn
// value, a number a double does not hold exactly is an evaluation error
// (a guard's on_error decides it: closed by default).
func TestEvalNumbersAreNotRounded(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"properties": {"id": {"type": "integer"}, "rate": {"type": "number"}, "ids": {"type": "array", "items": {"type": "integer"}}}}`)}})
	ctx := context.Background()
	eval := func(src string, args map[string]any) (bool, error) {
		t.Helper()
		return mustCompile(t, env, src).Eval(ctx, &ToolVars{Args: args})
	}
	for _, tc := range []struct {
		src  string
		args map[string]any
	}{
		{"has(args.id) && args.id > 9007199254740992", map[string]any{"id": int64(9007199254740993)}},
		{"has(args.id) && args.id > 9007199254740992", map[string]any{"id": json.Number("9007199254740993")}},
		{"has(args.ids) && args.ids.exists(i, i == 9007199254740993)", map[string]any{"ids": []any{int64(9007199254740993)}}},
		{"has(args.id) && args.id == 1152921504606846977", map[string]any{"id": int64(1152921504606846977)}},
	} {
		got, err := eval(tc.src, tc.args)
		require.NoError(t, err, tc.src)
		assert.True(t, got, "%s on %v", tc.src, tc.args)
	}
	for _, tc := range []struct {
		src  string
		args map[string]any
	}{
		{"has(args.id) && args.id == 9007199254740992", map[string]any{"id": json.Number("9007199254740993.0")}},
		{"has(args.rate) && args.rate == 9007199254740992.0", map[string]any{"rate": int64(9007199254740993)}},
		{"has(args.rate) && args.rate == 0.1", map[string]any{"rate": json.Number("0.1000000000000000055511151231257827")}},
	} {
		_, err := eval(tc.src, tc.args)
		assert.Error(t, err, "%s on %v", tc.src, tc.args)
	}
	// Untyped, a json.Number reads as a double, or as an int where only
	// an int holds it; one neither holds is an error.
	dyn := mustEnv(t, EnvConfig{Stage: Tool})
	for _, n := range []string{"1e-400", "0.1000000000000000055511151231257827", "9007199254740993.0", "123456789012345678901234567890"} {
		_, err := mustCompile(t, dyn, "args.x < 1.0").Eval(ctx, &ToolVars{Args: map[string]any{"x": json.Number(n)}})
		assert.Error(t, err, n)
	}
	got, err := mustCompile(t, dyn, "args.x == 9007199254740993 && args.x > 9007199254740992").Eval(ctx, &ToolVars{Args: map[string]any{"x": json.Number("9007199254740993")}})
	require.NoError(t, err)
	assert.True(t, got)
	// Numbers a double holds read as they always did.
	got, err = eval("has(args.rate) && args.rate == 0.1 && has(args.id) && args.id == 5", map[string]any{
		"rate": json.Number("0.1"), "id": json.Number("5")})
	require.NoError(t, err)
	assert.True(t, got)
	got, err = mustCompile(t, dyn, "args.x == 2.5").Eval(ctx, &ToolVars{Args: map[string]any{"x": json.Number("2.50")}})
	require.NoError(t, err)
	assert.True(t, got)
}

// TestEvalResponseToolCallArgsAreNotRounded: a chat guard reading a
// proposed call's arguments (response.tool_calls[i].args) read an integer
// above 2^53 rounded.
func TestEvalResponseToolCallArgsAreNotRounded(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	p := mustCompile(t, env, "response.tool_calls.exists(c, c.args.id > 9007199254740992)")
	got, err := p.Eval(context.Background(), &ChatVars{HasResponse: true, Response: ChatResponse{
		ToolCalls: []ToolCall{{ID: "c1", Name: "close", Arguments: json.RawMessage(`{"id": 9007199254740993}`)}}}})
	require.NoError(t, err)
	assert.True(t, got)
	p = mustCompile(t, env, "response.tool_calls.exists(c, c.args.rate == 0.1)")
	_, err = p.Eval(context.Background(), &ChatVars{HasResponse: true, Response: ChatResponse{
		ToolCalls: []ToolCall{{ID: "c1", Name: "pay", Arguments: json.RawMessage(`{"rate": 0.1000000000000000055511151231257827}`)}}}})
	assert.Error(t, err)
}

// TestEvalResultNumbersAreNotRounded: a tool's result parsed from its JSON
// text (numbers as json.Number) read a balance of 9007199254740993 as the
// double 9007199254740992, so an after-phase guard denying balances above
// 9007199254740992 let the result through to the client, which read the
// text.
func TestEvalResultNumbersAreNotRounded(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool, Phase: After})
	p := mustCompile(t, env, "has(result.balance) && result.balance > 9007199254740992")
	got, err := p.Eval(context.Background(), &ToolVars{HasResult: true, Result: map[string]any{"balance": json.Number("9007199254740993")}})
	require.NoError(t, err)
	assert.True(t, got)
	_, err = p.Eval(context.Background(), &ToolVars{HasResult: true, Result: map[string]any{"balance": json.Number("9007199254740992.5")}})
	assert.Error(t, err, "a number neither a double nor an int holds is an error")
}

// TestEvalIntAgainstDoubleIsExact: CEL compares an int with a double by
// rounding the int to a double, so an id of 9007199254740993 (an int64:
// above 2^53) compared with one of 9007199254740992 (a float64, which
// holds it) read as equal: an after-phase guard denying a result for
// another account than the call named (result.account_id !=
// args.account_id) let it through. An int and a double compare as the
// numbers they are.
func TestEvalIntAgainstDoubleIsExact(t *testing.T) {
	ctx := context.Background()
	dyn := mustEnv(t, EnvConfig{Stage: Tool})
	// Ordering two untyped values has no cost bound (they may be
	// strings): the arguments are typed for it.
	typed := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"required": ["a", "b"], "properties": {"a": {"type": "integer"}, "b": {"type": "number"}}}`)}})
	big, near := int64(9007199254740993), 9007199254740992.0
	for _, tc := range []struct {
		src  string
		args map[string]any
		want bool
	}{
		{"args.a == args.b", map[string]any{"a": big, "b": near}, false},
		{"args.b == args.a", map[string]any{"a": big, "b": near}, false},
		{"args.a != args.b", map[string]any{"a": big, "b": near}, true},
		{"args.b != args.a", map[string]any{"a": big, "b": near}, true},
		{"args.a > args.b", map[string]any{"a": big, "b": near}, true},
		{"args.a >= args.b", map[string]any{"a": big, "b": near}, true},
		{"args.a < args.b", map[string]any{"a": big, "b": near}, false},
		{"args.a <= args.b", map[string]any{"a": big, "b": near}, false},
		{"args.b < args.a", map[string]any{"a": big, "b": near}, true},
		{"args.b <= args.a", map[string]any{"a": big, "b": near}, true},
		{"args.b > args.a", map[string]any{"a": big, "b": near}, false},
		{"args.b >= args.a", map[string]any{"a": big, "b": near}, false},
		{"args.a > 9007199254740992.0", map[string]any{"a": big}, true},
		{"args.a == 9007199254740992.0", map[string]any{"a": big}, false},
		{"args.a in [9007199254740992.0]", map[string]any{"a": big}, false},
		{"args.a in [args.b]", map[string]any{"a": big, "b": near}, false},
		{"args.b in [args.a]", map[string]any{"a": big, "b": near}, false},
		{"args.a in [args.b, 1]", map[string]any{"a": int64(1), "b": near}, true},
		{"[args.b].exists(x, x == args.a)", map[string]any{"a": big, "b": near}, false},
		// Below 2^53, and for doubles with a fraction, as before.
		{"args.a == args.b", map[string]any{"a": int64(5), "b": 5.0}, true},
		{"args.a < args.b", map[string]any{"a": int64(5), "b": 5.5}, true},
		{"args.a > args.b", map[string]any{"a": int64(-5), "b": -5.5}, true},
		{"args.a == args.b", map[string]any{"a": big, "b": 9007199254740994.0}, false},
		{"args.a < args.b", map[string]any{"a": big, "b": 9007199254740994.0}, true},
		{"args.a < args.b", map[string]any{"a": int64(math.MaxInt64), "b": 9223372036854775808.0}, true},
		{"args.a == args.b", map[string]any{"a": int64(math.MinInt64), "b": -9223372036854775808.0}, true},
		{"args.a > args.b", map[string]any{"a": int64(math.MinInt64), "b": -1e300}, true},
		{"args.a == args.b", map[string]any{"a": int64(0), "b": math.Copysign(0, -1)}, true},
		{"args.a < args.b || args.a > args.b || args.a <= args.b || args.a >= args.b", map[string]any{"a": int64(1), "b": math.NaN()}, false},
		{"args.a == args.b", map[string]any{"a": int64(1), "b": math.NaN()}, false},
		{"args.a != args.b", map[string]any{"a": int64(1), "b": math.NaN()}, true},
		{"args.s == args.t && args.s < 'b'", map[string]any{"s": "a", "t": "a"}, true},
	} {
		env := dyn
		if strings.ContainsAny(tc.src, "<>") && strings.Contains(tc.src, "args.b") {
			env = typed
		}
		got, err := mustCompile(t, env, tc.src).Eval(ctx, &ToolVars{Args: tc.args})
		require.NoError(t, err, "%s on %v", tc.src, tc.args)
		assert.Equal(t, tc.want, got, "%s on %v", tc.src, tc.args)
	}
	// A result read as an int above 2^53 against an argument a float64
	// holds.
	after := mustEnv(t, EnvConfig{Stage: Tool, Phase: After})
	got, err := mustCompile(t, after, "has(result.account_id) && result.account_id != args.account_id").Eval(ctx, &ToolVars{
		Args: map[string]any{"account_id": near}, HasResult: true, Result: map[string]any{"account_id": json.Number("9007199254740993")}})
	require.NoError(t, err)
	assert.True(t, got, "the result names another account than the call")
}

// TestEvalListsAndMapsCompareNumbersExactly: == and != of two lists or two
// maps compared their elements as CEL does, the int rounded to a double,
// so [9007199254740993] equalled [9007199254740992.0] and a guard requiring
// a call's ids to differ from a result's (args.ids != result.ids) let the
// same account through as another. Their elements compare as == compares
// two numbers.
func TestEvalListsAndMapsCompareNumbersExactly(t *testing.T) {
	ctx := context.Background()
	dyn := mustEnv(t, EnvConfig{Stage: Tool})
	big, near := int64(9007199254740993), 9007199254740992.0
	for _, tc := range []struct {
		src  string
		args map[string]any
		want bool
	}{
		{"[args.a] == [args.b]", map[string]any{"a": big, "b": near}, false},
		{"[args.a] != [args.b]", map[string]any{"a": big, "b": near}, true},
		{"args.l == [9007199254740992.0]", map[string]any{"l": []any{big}}, false},
		{"args.l == [[1, 9007199254740992.0]]", map[string]any{"l": []any{[]any{1.0, big}}}, false},
		{"args.m == {'x': 9007199254740992.0}", map[string]any{"m": map[string]any{"x": big}}, false},
		{"args.m != {'x': [9007199254740992.0]}", map[string]any{"m": map[string]any{"x": []any{big}}}, true},
		{"args.l in [[9007199254740992.0]]", map[string]any{"l": []any{big}}, false},
		{"{1: args.a} == {1: args.b}", map[string]any{"a": big, "b": near}, false},
		// Equal numbers, and other values, as before.
		{"args.l == [9007199254740993, 2.0]", map[string]any{"l": []any{big, int64(2)}}, true},
		{"args.m == {'x': [1, 'a'], 'y': true}", map[string]any{"m": map[string]any{"x": []any{1.0, "a"}, "y": true}}, true},
		{"args.m == {'x': 1}", map[string]any{"m": map[string]any{"x": 1.0, "y": 2.0}}, false},
		{"args.m == {'x': 1, 'z': 2}", map[string]any{"m": map[string]any{"x": 1.0, "y": 2.0}}, false},
		{"args.l == [1]", map[string]any{"l": []any{1.0, 2.0}}, false},
		{"args.l in [[1.0]]", map[string]any{"l": []any{int64(1)}}, true},
	} {
		got, err := mustCompile(t, dyn, tc.src).Eval(ctx, &ToolVars{Args: tc.args})
		require.NoError(t, err, "%s on %v", tc.src, tc.args)
		assert.Equal(t, tc.want, got, "%s on %v", tc.src, tc.args)
	}
}

// TestEvalConversionsKeepTheNumber: string() of a double wrote it as %g
// does, with an exponent from a million up (1e+06, 4.111111111111111e+15),
// so a guard denying an account by its digits
// (string(args.acct).startsWith('4111')) let it through when the call sent
// it as a JSON number, which decodes to a double; and double() of an int
// (or of a string) above 2^53 rounded it to a neighbour. string() writes a
// double in plain decimal form, as tool_policy's arg_patterns read it, and
// double() of a number a double does not hold is an evaluation error.
func TestEvalConversionsKeepTheNumber(t *testing.T) {
	ctx := context.Background()
	typed := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"required": ["a", "b", "s"], "properties": {"a": {"type": "integer"}, "b": {"type": "number"}, "s": {"type": "string", "maxLength": 40}}}`)}})
	for _, tc := range []struct {
		src string
		b   any
	}{
		{"string(args.b) == '4111111111111111'", 4111111111111111.0},
		{"string(args.b).startsWith('4111')", 4111111111111111.0},
		{"string(args.b) == '1000000'", 1e6},
		{"string(args.b) == '1000000000000000000000'", 1e21},
		{"string(args.b) == '0.0000001'", 1e-7},
		{"string(args.b) == '0.1'", 0.1},
		{"string(args.b) == '-12300'", -1.23e4},
		{"string(args.b) == '0'", math.Copysign(0, -1)},
		{"string(args.b) == 'NaN'", math.NaN()},
		{"string(args.b) == '+Inf'", math.Inf(1)},
		{"double(args.a) == 9007199254740992.0", 1.0},
		{"double(args.s) == 0.5", 1.0},
	} {
		args := map[string]any{"a": int64(9007199254740992), "b": tc.b, "s": "0.5"}
		got, err := mustCompile(t, typed, tc.src).Eval(ctx, &ToolVars{Args: args})
		require.NoError(t, err, "%s on %v", tc.src, tc.b)
		assert.True(t, got, "%s on %v", tc.src, tc.b)
	}
	for _, tc := range []struct {
		src  string
		args map[string]any
	}{
		{"double(args.a) == 9007199254740992.0", map[string]any{"a": int64(9007199254740993), "b": 0.0, "s": ""}},
		{"double(args.a) > 0.0", map[string]any{"a": int64(math.MaxInt64), "b": 0.0, "s": ""}},
		{"double(args.s) <= 100.0", map[string]any{"a": int64(0), "b": 0.0, "s": "100.000000000000001"}},
		{"double(args.s) == 9007199254740992.0", map[string]any{"a": int64(0), "b": 0.0, "s": "9007199254740993"}},
	} {
		_, err := mustCompile(t, typed, tc.src).Eval(ctx, &ToolVars{Args: tc.args})
		assert.Error(t, err, "%s on %v", tc.src, tc.args)
	}
	// A constant one is refused when the predicate is built.
	for _, src := range []string{"double(18446744073709551615u) > 0.0", "double(9007199254740993) > 0.0", "double('0.1000000000000000055511151231257827') > 0.0"} {
		_, iss := typed.Compile(src)
		require.NotEmpty(t, iss, src)
		assert.Contains(t, iss[0].Message, "a double does not hold", src)
	}
	// What a double holds converts as before.
	for _, src := range []string{"double(9007199254740992) == 9007199254740992.0", "double('+.5') == 0.5", "double('1e3') == 1000.0",
		"double('007.') == 7.0", "double(-5) == -5.0", "double(5u) == 5.0", "double('-inf') < 0.0", "double(1.5) == 1.5",
		"string(true) == 'true'", "string(5) == '5'", "string(b'ab') == 'ab'", "string('x') == 'x'", "string(2.5) == '2.5'"} {
		got, err := mustCompile(t, typed, src).Eval(ctx, &ToolVars{Args: map[string]any{"a": int64(0), "b": 0.0, "s": ""}})
		require.NoError(t, err, src)
		assert.True(t, got, src)
	}
}
