package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/guard"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// numbersPlan declares close (account_id an integer, checked by a guard),
// close_any (no args schema, checked by a guard reading args untyped) and
// pay (an amount held to a maximum), and runs every call through fn.
func numbersPlan(t *testing.T, fn runtime.ToolFunc) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("no_big_close", rt.Layer("guard", `{"deny": "args.account_id == 9007199254740993", "phase": "before", "on_error": "closed"}`)),
		rt.Named("no_listed", rt.Layer("guard", `{"deny": "args.account_id in [9007199254740993, 9007199254740995]", "phase": "before", "on_error": "closed"}`)),
		rt.Layer("tool_policy", `{"arg_patterns": [{"arg": "to", "pattern": "^9007199254740993$"}]}`),
		rt.Layer("idempotent", `{"key_args": ["to"]}`),
	}})
	p.Chains.Tool[0].Tools = []string{"close"}
	p.Chains.Tool[1].Tools = []string{"close_any"}
	p.Chains.Tool[2].Tools = []string{"transfer"}
	p.Chains.Tool[3].Tools = []string{"transfer"}
	p.Settings = plan.Settings{}
	p.Tools = map[string]plan.Tool{
		"close":     {Args: json.RawMessage(`{"type": "object", "required": ["account_id"], "properties": {"account_id": {"type": "integer"}}}`)},
		"close_any": {},
		"transfer":  {SideEffecting: true},
		"pay":       {Args: json.RawMessage(`{"type": "object", "properties": {"cents": {"type": "integer", "maximum": 9007199254740992}, "rate": {"type": "number"}}}`)},
	}
	return rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"close": fn, "close_any": fn, "pay": fn, "transfer": fn}})
}

// proposed returns the tool-chain request of the model's call of tool
// with the JSON arguments args.
func proposed(t *testing.T, tool, args string) runtime.ToolRequest {
	t.Helper()
	req, err := runtime.ToolUse{ID: "c1", Name: tool, Arguments: json.RawMessage(args)}.Request()
	require.NoError(t, err)
	return req
}

// TestBigIntegerArgsAreCheckedAsSent: an integer float64 cannot hold
// (above 2^53) was decoded rounded to a neighbour, so a guard denying
// account 9007199254740993 saw 9007199254740992 and let the call through,
// while the model's call (relayed as its text) named 9007199254740993; a
// schema maximum of 9007199254740992 passed it. The checks and the tool
// now see the integer exactly (an int64).
func TestBigIntegerArgsAreCheckedAsSent(t *testing.T) {
	var got []map[string]any
	pl := numbersPlan(t, func(_ context.Context, c *runtime.ToolCall) (any, error) {
		got = append(got, c.Args)
		return "ok", nil
	})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for _, tc := range []struct{ name, tool, args, layer string }{
		{"typed guard", "close", `{"account_id": 9007199254740993}`, "no_big_close"},
		{"untyped guard, in a list", "close_any", `{"account_id": 9007199254740993}`, "no_listed"},
		{"untyped guard, in a list, other", "close_any", `{"account_id": 9007199254740995}`, "no_listed"},
		{"schema maximum", "pay", `{"cents": 9007199254740993}`, runtime.LayerTools},
		{"arg_patterns", "transfer", `{"to": 9007199254740993}`, "tool_policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := proposed(t, tc.tool, tc.args)
			assert.Equal(t, tc.layer, blockedBy(t, pl.AdmitTool(ctx, req)).Layer)
			_, err := pl.Tool(ctx, req)
			assert.Equal(t, tc.layer, blockedBy(t, err).Layer)
		})
	}
	assert.Empty(t, got, "no refused call ran")

	_, err := pl.Tool(ctx, proposed(t, "close", `{"account_id": 9007199254740992}`))
	require.NoError(t, err)
	_, err = pl.Tool(ctx, proposed(t, "close_any", `{"account_id": 9007199254740997, "n": 5}`))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, float64(9007199254740992), got[0]["account_id"], "an integer float64 holds stays a float64")
	assert.Equal(t, int64(9007199254740997), got[1]["account_id"], "the tool receives the integer sent")
	assert.Equal(t, float64(5), got[1]["n"])

	// idempotent keyed on the argument: two transfers to accounts float64
	// cannot tell apart were one call, the second replayed, never run.
	for _, to := range []string{"9007199254740995", "9007199254740996", "9007199254740995"} {
		_, err := pl.Tool(ctx, proposed(t, "transfer", `{"to": `+to+`}`))
		require.NoError(t, err)
	}
	require.Len(t, got, 4, "the transfer to 9007199254740996 ran; the repeat of 9007199254740995 did not")
	assert.Equal(t, int64(9007199254740995), got[2]["to"])
	assert.Equal(t, float64(9007199254740996), got[3]["to"])
}

// TestBigIntegerArgsHaveDistinctDigests: two calls that differ only in an
// integer above 2^53 had the same digest and derived idempotency key, so
// the second could be deduplicated as a repeat of the first.
func TestBigIntegerArgsHaveDistinctDigests(t *testing.T) {
	a := proposed(t, "close", `{"account_id": 9007199254740993}`)
	b := proposed(t, "close", `{"account_id": 9007199254740992}`)
	ca := &runtime.ToolCall{Name: a.Name, Args: a.Args}
	cb := &runtime.ToolCall{Name: b.Name, Args: b.Args}
	assert.NotEqual(t, ca.ArgsDigest(), cb.ArgsDigest())
	assert.NotEqual(t, ca.IdempotencyKey(), cb.IdempotencyKey())
}

// TestNumbersFloat64CannotHoldAreRefused: a number with more digits than a
// float64 holds, or out of its range, was decoded to another value (0.1)
// or made the arguments fail as "not a JSON object". Such a call is now
// refused by the tool chain's entry, naming the field; nothing runs.
func TestNumbersFloat64CannotHoldAreRefused(t *testing.T) {
	ran := 0
	pl := numbersPlan(t, func(context.Context, *runtime.ToolCall) (any, error) { ran++; return "ok", nil })
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for _, tc := range []struct{ name, tool, args, field string }{
		{"decimal digits", "pay", `{"rate": 0.1000000000000000055511151231257827}`, "args.rate"},
		{"exponent out of range", "pay", `{"rate": 1e400}`, "args.rate"},
		{"below the smallest", "pay", `{"rate": 1e-400}`, "args.rate"},
		{"integer above int64", "pay", `{"ids": [1, 123456789012345678901234567890]}`, "args.ids.1"},
		{"integer with a fraction part", "pay", `{"x": {"id": 9007199254740993.0}}`, "args.x.id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := proposed(t, tc.tool, tc.args)
			b := blockedBy(t, pl.AdmitTool(ctx, req))
			assert.Equal(t, runtime.LayerTools, b.Layer)
			assert.Contains(t, b.Message, tc.field)
			_, err := pl.Tool(ctx, req)
			assert.Equal(t, runtime.LayerTools, blockedBy(t, err).Layer)
		})
	}
	assert.Zero(t, ran)
	// Numbers float64 holds pass as they are, whatever their spelling.
	for _, args := range []string{`{"rate": 0.1}`, `{"rate": 1.50}`, `{"rate": 1e2}`, `{"rate": -0.0}`, `{"rate": 1e300}`, `{"rate": 100000000000000000000}`, `{"cents": 9007199254740991}`} {
		_, err := pl.Tool(ctx, proposed(t, "pay", args))
		assert.NoError(t, err, args)
	}
}

// TestCheckpointedToolResultKeepsItsNumbers: a tool result was recorded
// in the run's checkpoint as encoding/json decodes it, so a turn resumed
// after the call answered the model from the record with a balance of
// 9007199254740992 where the tool had returned 9007199254740993. The
// record, and the answer made from it, hold the number returned.
func TestCheckpointedToolResultKeepsItsNumbers(t *testing.T) {
	want := map[string]any{"balance": int64(9007199254740993), "rate": json.Number("0.1000000000000000055511151231257827"), "n": 2.5}
	store := runtime.NewMemoryCheckpoints()
	model := rt.NewModel(callTools(use("l1", "lookup", `{"order":7}`)), rt.Response{Deltas: []string{"done"}})
	pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"lookup": func(context.Context, *runtime.ToolCall) (any, error) { return want, nil }}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "big"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "go"})
	require.NoError(t, err)
	live := answers(res.Messages)
	require.Len(t, live, 1)
	assert.Contains(t, live[0], "9007199254740993")

	cp, ok, err := store.LatestCheckpoint(context.Background(), "big")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, cp.Tools, 1)
	assert.Equal(t, want, cp.Tools[0].Result)

	// A turn resumed with the call pending answers it from the record, as
	// the live turn did.
	saved := cp
	saved.Status, saved.Version = runtime.RunRunning, 0
	saved.Transcript = res.Messages[:2]
	resumedModel := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	pl2, rctx, made := resumed(t, saved, resumedModel)
	res2, err := pl2.RunAgent(rctx, runtime.AgentRequest{Model: "primary", Messages: pl2.Transcript(rctx)})
	require.NoError(t, err)
	assert.Empty(t, made(), "nothing runs again")
	assert.Equal(t, live, answers(res2.Messages))
}
