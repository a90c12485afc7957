package predicate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nullSchema types the arguments of TestNullReadsAbsent: an optional string, an object with an
// optional string, a map of strings and a map of integers.
const nullSchema = `{"type": "object", "required": ["ship", "labels", "counts"], "properties": {
	"reason": {"type": ["string", "null"]},
	"ship": {"type": "object", "required": ["country"], "properties": {"zip": {"type": "string"}, "country": {"type": "string"}}},
	"labels": {"type": "object", "additionalProperties": {"type": "string"}},
	"counts": {"type": "object", "additionalProperties": {"type": "integer"}}}}`

// nullArgs holds a null at each depth a predicate reads: a top-level argument, a field of an
// object argument, a map value.
const nullArgs = `{"reason": null, "ship": {"zip": null, "country": "FR"},
	"labels": {"env": null, "team": "ops"}, "counts": {"a": null, "b": 2}}`

// nullReads are the ways of reading a null, each true when the null reads as absent.
var nullReads = []string{
	"!has(args.reason)",
	"!args.?reason.hasValue()",
	"args.?reason.orValue('none') == 'none'",
	"args.?reason.orValue('') == ''",
	"!has(args.ship.zip)",
	"args.?ship.?zip.orValue('none') == 'none'",
	"args.ship.?zip.orValue('none') == 'none'",
	"args.?ship.zip.orValue('none') == 'none'",
	"args.ship.country == 'FR'",
	"args.labels[?'env'].orValue('none') == 'none'",
	"args.?labels[?'env'].orValue('none') == 'none'",
	"!has(args.labels.env)",
	"args.counts[?'a'].orValue(0) == 0 && args.counts['b'] == 2",
}

// untypedNullReads are more ways of reading a null, which only an untyped args map admits.
var untypedNullReads = []string{
	"!('reason' in args)",
	"size(args) == 3",
	"args.labels == {'team': 'ops'}",
	"size(args.labels) == 1",
	"args.?ship.?zip.orValue('none') == 'none' && !has(args.ship.zip)",
}

// TestNullReadsAbsent: every way of reading a JSON null agrees that it is absent, typed or
// untyped: has() is false, an optional read is empty, orValue gives the default, `in` is false,
// iteration and size skip it.
func TestNullReadsAbsent(t *testing.T) {
	envs := map[string]*Env{
		"typed":   mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(nullSchema)}}),
		"untyped": mustEnv(t, EnvConfig{Stage: Tool}),
	}
	for name, env := range envs {
		srcs := nullReads
		if name == "untyped" {
			srcs = append(slices.Clone(nullReads), untypedNullReads...)
		}
		for _, src := range srcs {
			if name == "untyped" && src == "args.counts[?'a'].orValue(0) == 0 && args.counts['b'] == 2" {
				src = "args.counts[?'a'].orValue(0.0) == 0.0 && args.counts['b'] == 2.0"
			}
			p := mustCompile(t, env, src)
			for _, args := range []map[string]any{jsonArgs(t, nullArgs), jsonNumberArgs(t, nullArgs)} {
				got, err := p.Eval(context.Background(), &ToolVars{Args: args})
				require.NoError(t, err, "%s: %s", name, src)
				assert.True(t, got, "%s: %s", name, src)
			}
		}
	}
}

// TestNullReadIsError: a plain read of a null is the error a plain read of an absent key is,
// typed or untyped.
func TestNullReadIsError(t *testing.T) {
	for name, cfg := range map[string]EnvConfig{
		"typed":   {Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(nullSchema)}},
		"untyped": {Stage: Tool},
	} {
		env := mustEnv(t, cfg)
		srcs := []string{"args.reason == ''", "args.ship.zip == ''", "args.labels['env'] == ''", "args.labels.env == ''"}
		if name == "typed" {
			// Typed, an optional field is read after has(), or through dyn.
			srcs = []string{"dyn(args).reason == ''", "has(args.ship) && dyn(args.ship).zip == ''",
				"has(args.labels) && args.labels['env'] == ''", "has(args.labels) && args.labels.env == ''"}
		}
		for _, src := range srcs {
			p := mustCompile(t, env, src)
			_, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, nullArgs)})
			require.Error(t, err, "%s: %s", name, src)
			assert.Contains(t, err.Error(), "no such key", "%s: %s", name, src)
		}
	}
}

// TestNullRefundGuard: a deny that refuses a refund without a reason blocks one whose reason
// is null, as it blocks one without the key; before, the optional read saw the null as a value
// and the deny let the call through.
func TestNullRefundGuard(t *testing.T) {
	const deny = "args.?reason.orValue('') == ''"
	for _, cfg := range []EnvConfig{
		{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(nullSchema)}},
		{Stage: Tool},
	} {
		p := mustCompile(t, mustEnv(t, cfg), deny)
		for args, want := range map[string]bool{`{"reason": null}`: true, `{}`: true, `{"reason": ""}`: true, `{"reason": "late"}`: false} {
			got, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, args)})
			require.NoError(t, err, args)
			assert.Equal(t, want, got, args)
		}
	}
}

// TestNullInOtherValues: run.meta, session.meta, item.metadata, a tool result and a tool
// call's arguments read a null as absent too.
func TestNullInOtherValues(t *testing.T) {
	meta := map[string]any{"tier": nil, "nested": map[string]any{"k": nil}}
	reads := []string{"!has(%s.tier)", "%s.?tier.orValue('x') == 'x'", "!('tier' in %s)", "%s[?'tier'].orValue('x') == 'x'",
		"%s.?nested.?k.orValue('x') == 'x'", "!has(%s.nested.k)", "size(%s) == 1"}
	type stage struct {
		cfg  EnvConfig
		root string
		vars Activation
	}
	result := map[string]any{"tier": nil, "nested": map[string]any{"k": nil}}
	stages := []stage{
		{EnvConfig{Stage: Chat}, "run.meta", &ChatVars{Run: RunInfo{Meta: meta}}},
		{EnvConfig{Stage: Tool}, "run.meta", &ToolVars{Run: RunInfo{Meta: meta}}},
		{EnvConfig{Stage: Turn}, "session.meta", &TurnVars{Session: SessionInfo{Meta: meta}}},
		{EnvConfig{Stage: Admit}, "item.metadata", &AdmitVars{Item: Item{Metadata: meta}}},
		{EnvConfig{Stage: Tool, Phase: After}, "result", &ToolVars{Result: result, HasResult: true}},
		{EnvConfig{Stage: Chat, Phase: After}, "response.tool_calls[0].args", &ChatVars{HasResponse: true,
			Response: ChatResponse{ToolCalls: []ToolCall{{ID: "c1", Name: "t", Arguments: json.RawMessage(`{"tier": null, "nested": {"k": null}}`)}}}}},
	}
	for _, s := range stages {
		env := mustEnv(t, s.cfg)
		for _, r := range reads {
			if s.root == "result" && strings.Contains(r, " in ") {
				continue // a scan of a dyn result has no cost bound
			}
			src := fmt.Sprintf(r, s.root)
			p, iss := env.Compile(src)
			require.Empty(t, iss, src)
			got, err := p.Eval(context.Background(), s.vars)
			require.NoError(t, err, src)
			assert.True(t, got, src)
		}
	}
}

// TestJSONObjectSkipsNulls: iteration, size, equality and conversion of a JSON object skip its
// null members; its Go value keeps them.
func TestJSONObjectSkipsNulls(t *testing.T) {
	m := jsonObject{"a": nil, "b": 1.0, "c": "x"}
	var keys []string
	for it := m.Iterator(); it.HasNext() == types.True; {
		keys = append(keys, string(it.Next().(types.String)))
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"b", "c"}, keys)
	assert.Equal(t, types.Int(2), m.Size())
	assert.False(t, m.IsZeroValue())
	assert.True(t, jsonObject{"a": nil}.IsZeroValue())
	assert.Equal(t, types.True, m.Equal(jsonObject{"b": 1.0, "c": "x"}))
	assert.Equal(t, types.True, m.Equal(jsonObject{"b": 1.0, "c": "x", "d": nil}))
	assert.Equal(t, types.False, m.Equal(jsonObject{"b": 2.0, "c": "x"}))
	assert.Equal(t, types.False, m.Equal(jsonObject{"b": 1.0}))
	assert.Equal(t, types.False, m.Contains(types.String("a")))
	assert.Equal(t, types.True, m.Contains(types.String("b")))
	assert.True(t, types.IsError(m.Get(types.String("a"))))
	assert.True(t, types.IsError(m.Contains(types.Int(1))))
	native, err := m.ConvertToNative(reflect.TypeFor[map[string]any]())
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"b": 1.0, "c": "x"}, native)
	assert.Equal(t, map[string]any{"a": nil, "b": 1.0, "c": "x"}, m.Value())
}

// TestEvalValueKeepsNulls: a state set transform that returns an object whole keeps its null
// members; a null reads as absent, it is not dropped from data.
func TestEvalValueKeepsNulls(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: State, Value: true})
	p := mustCompile(t, env, "value")
	vars, err := p.StateActivation(RunInfo{}, "f", map[string]any{"a": nil, "b": map[string]any{"c": nil, "d": 1.0}}, nil)
	require.NoError(t, err)
	got, err := p.EvalValue(context.Background(), vars)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": nil, "b": map[string]any{"c": nil, "d": 1.0}}, got)
}

// TestNullObjectComparison: a field typed as an object never equals null, whether the schema
// requires it, makes it optional or lets it be null: a null reads as absent, so the read of a
// null one is a "no such key" error, and one that is there is an object. args.ship == null is
// never true (a deny with it never fires), args.ship != null never false; the check refuses
// both, naming the has() test that does what they were written for.
func TestNullObjectComparison(t *testing.T) {
	// The evaluation, untyped: the same reads the typed environment makes of the JSON.
	untyped := mustEnv(t, EnvConfig{Stage: Tool})
	for _, src := range []string{"args.ship == null", "args.ship.addr == null", "null == args.ship"} {
		p := mustCompile(t, untyped, src)
		for _, args := range []string{`{"ship": null}`, `{"ship": {"addr": null}}`, `{}`} {
			got, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, args)})
			if err == nil {
				assert.False(t, got, "%s on %s", src, args)
				continue
			}
			assert.Contains(t, err.Error(), "no such key", "%s on %s", src, args)
		}
		got, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, `{"ship": {"addr": {"zip": "1"}}}`)})
		require.NoError(t, err, src)
		assert.False(t, got, src)
	}

	const schema = `{"type": "object", "required": ["ship"], "properties": {
		"ship": {"type": "object", "required": ["addr"], "properties": {"addr": {"type": "object", "properties": {"zip": {"type": "string"}}}}},
		"bill": {"type": "object", "properties": {"zip": {"type": "string"}}},
		"alt": {"anyOf": [{"type": "object", "properties": {"zip": {"type": "string"}}}, {"type": "null"}]},
		"books": {"type": "object", "additionalProperties": {"type": "object", "properties": {"zip": {"type": "string"}}}},
		"lines": {"type": "array", "items": {"type": ["object", "null"], "properties": {"sku": {"type": "string"}}}}}}`
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(schema)}})
	for _, c := range []struct{ src, path, test, op string }{
		{"args.ship == null", "args.ship", "!has(args.ship)", "=="},
		{"null == args.ship", "args.ship", "!has(args.ship)", "=="},
		{"args.ship != null && has(args.ship.addr.zip)", "args.ship", "has(args.ship)", "!="},
		{"args.ship.addr == null", "args.ship.addr", "!has(args.ship.addr)", "=="},
		{"has(args.bill) && args.bill == null", "args.bill", "!has(args.bill)", "=="},
		{"has(args.alt) && args.alt == null", "args.alt", "!has(args.alt)", "=="},
		{"has(args.books) && args.books.home == null", "args.books.home", "!has(args.books.home)", "=="},
		{"has(args.books) && args.books['home'] == null", `args.books["home"]`, `!("home" in args.books)`, "=="},
		{"has(args.books) && args.books['home'] != null", `args.books["home"]`, `"home" in args.books`, "!="},
		{"has(args.lines) && args.lines.exists(l, l != null && has(l.sku) && l.sku == 'x')", "", "", ""},
	} {
		_, iss := env.Check(c.src)
		if c.path == "" {
			assert.Empty(t, iss, c.src)
			continue
		}
		require.Len(t, iss, 1, c.src)
		assert.Equal(t, RuleType, iss[0].Rule, c.src)
		assert.Equal(t, strings.Index(c.src, c.op), iss[0].Offset, c.src)
		assert.Contains(t, iss[0].Message, c.path+" is an object, never null", c.src)
		assert.Contains(t, iss[0].Message, "a JSON null reads as absent", c.src)
		assert.Contains(t, iss[0].Message, "test "+c.test+" instead", c.src)
	}
	// An entry of a map of scalars read by its key is tested by the key.
	scalars := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"required": ["labels"], "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}`)}})
	for src, want := range map[string]string{
		"args.labels['env'] == null":    `test !('env' in args.labels) instead (true when it is null or missing)`,
		`args.labels["env"] != null`:    `test "env" in args.labels instead (false when it is null or missing)`,
		"null == args.labels [ 'env' ]": `test !('env' in args.labels) instead (true when it is null or missing)`,
		"args.labels.env == null":       `test !has(args.labels.env) instead (true when it is null or missing)`,
	} {
		_, iss := scalars.Check(src)
		require.Len(t, iss, 1, src)
		assert.Contains(t, iss[0].Message, "a JSON null reads as absent, never as null: "+want, src)
	}
	// A field of a list's element read by its index is named whole.
	items := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"required": ["items"], "properties": {"items": {"type": "array", "maxItems": 5, "items": {"type": "object",
		"required": ["sku"], "properties": {"sku": {"type": "string"}}}}}}`)}})
	for src, want := range map[string]string{
		"args.items[0].sku == null":                    `test !has(args.items[0].sku) instead (true when it is null or missing)`,
		"null != args.items[size(args.items) - 1].sku": `test has(args.items[size(args.items) - 1].sku) instead (false when it is null or missing)`,
		"(args.items[0]).sku == null":                  `test the field with has() instead`,
	} {
		_, iss := items.Check(src)
		require.Len(t, iss, 1, src)
		assert.Contains(t, iss[0].Message, "a JSON null reads as absent, never as null: "+want, src)
	}
	// The variable itself is an object, never null.
	for _, src := range []string{"args == null", "null != args"} {
		_, iss := env.Check(src)
		require.Len(t, iss, 1, src)
		assert.Equal(t, RuleType, iss[0].Rule, src)
		assert.Contains(t, iss[0].Message, "args is always an object, never null", src)
	}
	// An element of a list may be null, whether read by its index or bound by a macro.
	for _, src := range []string{
		"has(args.lines) && size(args.lines) > 0 && args.lines[0] == null",
		"has(args.lines) && args.lines.all(l, l != null)",
	} {
		_, iss := env.Check(src)
		assert.Empty(t, iss, src)
	}
	// An element of a list may be null, and compares equal to it.
	p := mustCompile(t, env, "has(args.lines) && args.lines.exists(l, l == null)")
	got, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, `{"ship": {"addr": {}}, "lines": [null, {"sku": "x"}]}`)})
	require.NoError(t, err)
	assert.True(t, got)
}

// The variables of fixed types and their object fields (request,
// request.params, response.usage) are Go structs, always there: compared
// with null they never decide anything, and the checker says so. Their
// scalars, and the elements of their lists, are judged as before.
func TestNullFixedObjectComparison(t *testing.T) {
	after := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	for src, want := range map[string]string{
		"request.params == null":                         "request.params is always an object, never null, so request.params == null is never true; test one of its fields instead (request.params.metadata,",
		"null != request.params":                         "request.params is always an object, never null, so request.params != null is never false",
		"request == null":                                "request is always an object, never null, so request == null is never true",
		"response.usage == null && request.model == 'a'": "response.usage is always an object, never null",
	} {
		_, iss := after.Check(src)
		require.Len(t, iss, 1, src)
		assert.Equal(t, RuleType, iss[0].Rule, src)
		assert.Contains(t, iss[0].Message, want, src)
	}
	for _, src := range []string{
		"has(request.params.temperature) && request.params.temperature > 1.0",
		"request.messages.exists(m, m.role == 'tool')",
	} {
		_, iss := after.Check(src)
		assert.Empty(t, iss, src)
	}
}
