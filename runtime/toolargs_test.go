package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/guard"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const refundArgs = `{"type": "object", "required": ["order_id", "amount"], "properties": {
	"order_id": {"type": "string", "maxLength": 64},
	"amount": {"type": "number", "minimum": 0},
	"tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}}}}`

// declaredPlan declares refund with its args schema, on a plan that does
// not allow undeclared tools.
func declaredPlan(chain ...plan.Layer) *plan.Plan {
	p := rt.Plan(plan.Chains{Tool: chain})
	p.Settings = plan.Settings{}
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true, Args: json.RawMessage(refundArgs)}}
	return p
}

func blockedBy(t *testing.T, err error) *runtime.BlockedError {
	t.Helper()
	var b *runtime.BlockedError
	require.True(t, errors.As(err, &b), "want a *BlockedError, got %v", err)
	return b
}

func TestToolArgsValidated(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "paid"})
	pl := rt.Build(t, declaredPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing required", map[string]any{"amount": 5.0},
			`the arguments of refund do not match its args schema: args: missing properties: 'order_id'`},
		{"wrong types", map[string]any{"order_id": 7.0, "amount": "five"},
			`args.amount: expected number, but got string; args.order_id: expected string, but got number`},
		{"below minimum", map[string]any{"order_id": "A1", "amount": -1.0}, `args.amount: must be >= 0 but found -1`},
		{"over maxLength", map[string]any{"order_id": strings.Repeat("x", 65), "amount": 1.0}, `args.order_id: length must be <= 64, but got 65`},
		{"over maxItems", map[string]any{"order_id": "A1", "amount": 1.0, "tags": []any{"a", "b", "c"}}, `args.tags: maximum 2 items required, but found 3 items`},
		{"nested item", map[string]any{"order_id": "A1", "amount": 1.0, "tags": []any{"a", 2.0}}, `args.tags.1: expected string, but got number`},
		{"nil args", nil, `args: missing properties: 'order_id', 'amount'`},
		// Go values of types JSON does not have are checked in their JSON form.
		{"go types", map[string]any{"order_id": "A1", "amount": int16(3), "tags": []string{"a", "b", "c"}}, `args.tags: maximum 2 items required, but found 3 items`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: tt.args})
			b := blockedBy(t, err)
			assert.Equal(t, runtime.LayerTools, b.Layer)
			assert.Contains(t, b.Message, tt.want)
			assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))
			assert.Zero(t, res.Attempts)
		})
	}
	assert.Zero(t, tool.Calls(), "a refused call ran")

	res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": int16(3), "tags": []string{"a"}}})
	require.NoError(t, err)
	assert.Equal(t, "paid", res.Value)
	assert.Equal(t, 1, tool.Calls())
}

// The bounds a schema declares are enforced before any guard evaluates:
// a CEL expression whose cost grows with the string never sees 60,000
// characters declared at most 64.
func TestToolArgsBoundsBeforeGuards(t *testing.T) {
	const deny = "args.order_id.replace('a', args.order_id) != ''"
	g := rt.Layer("guard", `{"deny": "`+deny+`", "message": "never"}`)
	g.Tools = []string{"refund"}
	g.Predicates = map[string]*plan.Predicate{"deny": {Stage: plan.StageTool, Source: deny, Tools: []string{"refund"}}}
	p := declaredPlan(g)
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": staticTool}})
	start := time.Now()
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": strings.Repeat("a", 60000), "amount": 1.0}})
	b := blockedBy(t, err)
	assert.Equal(t, runtime.LayerTools, b.Layer)
	assert.Contains(t, b.Message, "args.order_id: length must be <= 64, but got 60000")
	assert.Less(t, time.Since(start), time.Second)
}

func TestToolArgsFaultsBounded(t *testing.T) {
	props := map[string]any{}
	args := map[string]any{}
	for i := range 15 {
		props[fmt.Sprintf("p%02d", i)] = map[string]any{"type": "string"}
		args[fmt.Sprintf("p%02d", i)] = float64(i)
	}
	schema, err := json.Marshal(map[string]any{"type": "object", "properties": props})
	require.NoError(t, err)
	p := declaredPlan()
	p.Tools["many"] = plan.Tool{Args: schema}
	pl := rt.Build(t, p, runtime.Deps{})
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "many", Args: args})
	b := blockedBy(t, err)
	assert.Equal(t, 10, strings.Count(b.Message, "expected string"))
	assert.True(t, strings.HasSuffix(b.Message, "; and 5 more"), b.Message)
	assert.Contains(t, b.Message, "args.p00: expected string, but got number; args.p01:")
}

func TestUndeclaredToolRefused(t *testing.T) {
	ran := 0
	tools := map[string]runtime.ToolFunc{"adhoc": func(context.Context, *runtime.ToolCall) (any, error) { ran++; return "ok", nil }}
	pl := rt.Build(t, declaredPlan(), runtime.Deps{Tools: tools})
	for _, name := range []string{"adhoc", "nowhere"} {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: name})
		b := blockedBy(t, err)
		assert.Equal(t, runtime.LayerTools, b.Layer)
		assert.Equal(t, fmt.Sprintf("tool %q is not declared in the policy's tools (settings.allow_undeclared_tools is not set)", name), b.Message)
	}
	assert.Zero(t, ran)

	// settings.allow_undeclared_tools lets them run, unchecked.
	p := declaredPlan()
	p.Settings.AllowUndeclaredTools = true
	pl = rt.Build(t, p, runtime.Deps{Tools: tools})
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "adhoc", Args: map[string]any{"anything": 1.0}})
	require.NoError(t, err)
	assert.Equal(t, "ok", res.Value)
	assert.Equal(t, 1, ran)
	// A declared tool is still checked.
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
	assert.Equal(t, runtime.LayerTools, blockedBy(t, err).Layer)
	// An undeclared tool that is not registered passes the chain and fails
	// at its end.
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "nowhere"})
	assert.Equal(t, "permanent", runtime.KindOf(err))
	assert.ErrorContains(t, err, `tool "nowhere" is not registered`)
}

// A declared tool the host does not register still passes the chain.
func TestDeclaredUnregisteredTool(t *testing.T) {
	pl := rt.Build(t, declaredPlan(), runtime.Deps{})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 1.0}})
	assert.ErrorContains(t, err, `tool "refund" is not registered`)
}

// Deps.ToolArgs declares a host's tools (an MCP proxy's upstream tools):
// they are not refused, and their arguments are checked.
func TestHostToolArgs(t *testing.T) {
	lookup := rt.NewTool(rt.ToolResult{Value: "found"})
	refund := rt.NewTool(rt.ToolResult{Value: "paid"})
	pl := rt.Build(t, declaredPlan(), runtime.Deps{
		Tools: map[string]runtime.ToolFunc{"lookup": lookup.Func(), "refund": refund.Func()},
		ToolArgs: map[string]json.RawMessage{
			"lookup": json.RawMessage(`{"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}`),
			// The policy's schema wins for a tool it declares with one.
			"refund": json.RawMessage(`{"type": "object"}`),
			// A host tool without a schema is declared and unchecked.
			"ping": nil,
		},
	})
	ctx := context.Background()
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order_id": 7.0}})
	assert.Contains(t, blockedBy(t, err).Message, "the arguments of lookup do not match its args schema: args.order_id: expected string, but got number")
	res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.Equal(t, "found", res.Value)
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 1.0}})
	assert.Contains(t, blockedBy(t, err).Message, "missing properties: 'order_id'")
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "ping", Args: map[string]any{"x": 1.0}})
	assert.ErrorContains(t, err, `tool "ping" is not registered`)
	assert.Equal(t, 1, lookup.Calls())
	assert.Zero(t, refund.Calls())
}

func TestToolArgsSchemaErrorsFailBuild(t *testing.T) {
	tests := []struct {
		name string
		p    func() *plan.Plan
		deps runtime.Deps
		want string
	}{
		{"bad keyword", func() *plan.Plan {
			p := declaredPlan()
			p.Tools["refund"] = plan.Tool{Args: json.RawMessage(`{"type": "numbr"}`)}
			return p
		}, runtime.Deps{}, "build tools.refund.args: "},
		{"remote ref", func() *plan.Plan {
			p := declaredPlan()
			p.Tools["refund"] = plan.Tool{Args: json.RawMessage(`{"$ref": "file:///etc/passwd"}`)}
			return p
		}, runtime.Deps{}, "a tool's args schema may only refer inside itself"},
		{"host schema", func() *plan.Plan { return declaredPlan() }, runtime.Deps{ToolArgs: map[string]json.RawMessage{"lookup": json.RawMessage(`{"minLength": "x"}`)}},
			`build: Deps.ToolArgs["lookup"]: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.Build(context.Background(), tt.p(), tt.deps)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// A schema that accepts everything checks nothing, and a draft-07
	// schema compiles under its own draft.
	p := declaredPlan()
	p.Tools["open"] = plan.Tool{Args: json.RawMessage(`true`)}
	p.Tools["old"] = plan.Tool{Args: json.RawMessage(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"n": {"type": "integer"}}}`)}
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"open": staticTool, "old": staticTool}})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "open", Args: map[string]any{"x": 1.0}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "old", Args: map[string]any{"n": 1.5}})
	assert.Contains(t, blockedBy(t, err).Message, "args.n: expected integer, but got number")
}

// A host's arguments may hold a NaN or infinite number, which JSON cannot
// hold: the schema validator compared it with `minimum` through a nil
// big.Rat and panicked. The call is refused on entry, naming the problem,
// and the tool does not run.
func TestToolArgsNonFiniteNumbersRefused(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "refunded"})
	pl := rt.Build(t, declaredPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	for _, amount := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		var err error
		require.NotPanics(t, func() {
			_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": amount}})
		})
		b := blockedBy(t, err)
		assert.Equal(t, runtime.LayerTools, b.Layer)
		assert.Contains(t, b.Message, "the arguments of refund are not JSON")
		assert.Contains(t, b.Message, "unsupported value")
		require.NotPanics(t, func() {
			err = pl.AdmitTool(context.Background(), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": amount}})
		})
		assert.Equal(t, runtime.LayerTools, blockedBy(t, err).Layer)
	}
	assert.Zero(t, tool.Calls())
}

// A host's arguments may hold a json.Number the schema validator cannot
// turn into a number (one out of a float64's range, or not a number at
// all): its bound checks dereferenced a nil big.Rat twice, on the Go value
// and on its JSON form. The call is refused, and the tool does not run.
func TestToolArgsNumbersTheValidatorCannotReadRefused(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "refunded"})
	pl := rt.Build(t, declaredPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	for _, amount := range []json.Number{"1e999999999", "12abc"} {
		var err error
		require.NotPanics(t, func() {
			_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": amount}})
		}, amount)
		b := blockedBy(t, err)
		assert.Equal(t, runtime.LayerTools, b.Layer)
		assert.Contains(t, b.Message, "the arguments of refund", amount)
	}
	assert.Zero(t, tool.Calls())
}

// A tool that decodes its arguments as Go's encoding/json does matches
// member names case-insensitively, the last one winning: {"amount": 5,
// "Amount": 500} refunds 500 where a guard reading args.amount saw 5, and
// {"order_id": "A1", "AMOUNT": 500} where its has(args.amount) was false.
// A member whose name differs only in case from a property the schema
// declares for its object is refused on entry to the chain, at any depth.
func TestToolArgsCaseVariantRefused(t *testing.T) {
	const deny = "has(args.amount) && args.amount > 100.0"
	g := rt.Layer("guard", `{"deny": "`+deny+`", "message": "too much"}`)
	g.Tools = []string{"refund"}
	g.Predicates = map[string]*plan.Predicate{"deny": {Stage: plan.StageTool, Source: deny, Tools: []string{"refund"}}}
	p := declaredPlan(g)
	p.Tools["refund"] = plan.Tool{SideEffecting: true, RetrySafe: true, Args: json.RawMessage(`{"type": "object", "required": ["order_id"], "properties": {
		"order_id": {"type": "string"},
		"amount": {"type": "number"},
		"ship": {"type": "object", "properties": {"zip": {"type": "string"}}},
		"lines": {"type": "array", "items": {"$ref": "#/$defs/line"}}},
		"$defs": {"line": {"type": "object", "properties": {"qty": {"type": "integer"}}}}}`)}
	tool := rt.NewTool(rt.ToolResult{Value: "paid"})
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for _, tt := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"beside", map[string]any{"order_id": "A1", "amount": 5.0, "Amount": 500.0}, `args.Amount: differs only in case from the declared property "amount"`},
		{"instead", map[string]any{"order_id": "A1", "AMOUNT": 500.0}, `args.AMOUNT: differs only in case from the declared property "amount"`},
		{"nested", map[string]any{"order_id": "A1", "ship": map[string]any{"ZIP": "1"}}, `args.ship.ZIP: differs only in case from the declared property "zip"`},
		{"through items and $ref", map[string]any{"order_id": "A1", "lines": []any{map[string]any{"qty": 1.0}, map[string]any{"Qty": 9.0}}}, `args.lines.1.Qty: differs only in case`},
		{"unicode folding", map[string]any{"order_id": "A1", "\u017Fhip": map[string]any{"zip": "1"}}, `differs only in case from the declared property "ship"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: tt.args})
			b := blockedBy(t, err)
			assert.Equal(t, runtime.LayerTools, b.Layer)
			assert.Contains(t, b.Message, tt.want)
		})
	}
	assert.Zero(t, tool.Calls(), "a refused call ran")

	// Names the schema declares, in whichever case it declares them, and
	// members it does not know of another name, pass.
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 5.0, "note": "x", "ship": map[string]any{"zip": "1", "Street": "s"}}})
	require.NoError(t, err)
	assert.Equal(t, 1, tool.Calls())
}

// Names a schema declares in more than one case (id and ID both, or each
// in a branch of a oneOf), members of a map the schema types by
// additionalProperties or patternProperties (HTTP headers in any case),
// and objects under a $ref that refers to itself are taken as declared:
// a member that the schema does not declare, in the case written, and
// whose name folds to a declared property, is refused, and so are two
// declared members of one object given together whose names differ only
// in case (id and ID): a tool decoding case-insensitively reads one of
// them for both, whichever a guard read.
func TestToolArgsCaseDeclaredVariantsPass(t *testing.T) {
	p := declaredPlan()
	p.Tools["call"] = plan.Tool{Args: json.RawMessage(`{"type": "object",
		"properties": {
			"id": {"type": "string"}, "ID": {"type": "string"},
			"headers": {"type": "object", "additionalProperties": {"type": "string"}},
			"labels": {"type": "object", "patternProperties": {"^[a-zA-Z-]+$": {"type": "string"}}},
			"target": {"oneOf": [
				{"type": "object", "required": ["userId"], "properties": {"userId": {"type": "string"}}},
				{"type": "object", "required": ["UserID"], "properties": {"UserID": {"type": "string"}}}]},
			"tree": {"$ref": "#/$defs/node"}},
		"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}`)}
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"call": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for _, args := range []map[string]any{
		{"id": "a"},
		{"ID": "b"},
		{"headers": map[string]any{"Content-Type": "text/plain", "content-type": "text/plain", "X-Id": "1"}},
		{"labels": map[string]any{"Env": "prod", "env": "dev"}},
		{"target": map[string]any{"userId": "u"}},
		{"target": map[string]any{"UserID": "u"}},
		{"tree": map[string]any{"name": "r", "children": []any{map[string]any{"name": "c", "children": []any{map[string]any{"name": "g"}}}}}},
	} {
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "call", Args: args})
		require.NoError(t, err, "%v", args)
	}
	assert.Equal(t, 7, tool.Calls())

	// Both spellings given together are refused.
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "call", Args: map[string]any{"id": "a", "ID": "b"}})
	assert.Contains(t, blockedBy(t, err).Message, `args.id: differs only in case from the member "ID" the same object gives`)
	assert.Equal(t, 7, tool.Calls(), "a refused call ran")

	// Under the $ref that refers to itself, a case variant is refused at
	// its depth.
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "call", Args: map[string]any{"tree": map[string]any{"children": []any{map[string]any{"Name": "c"}}}}})
	assert.Contains(t, blockedBy(t, err).Message, `args.tree.children.0.Name: differs only in case from the declared property "name"`)
}
