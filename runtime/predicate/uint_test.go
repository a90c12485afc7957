package predicate

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEvalReadsGoUints: a host's Go uint, uint64 or uint32 argument passes
// an args schema's "number" and "integer" as the number it is; a field the
// schema types was refused "want a number, got a number", so a guard
// denying amounts over 500 refused a refund of 400.
func TestEvalReadsGoUints(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object",
		"properties": {"amount": {"type": "number"}, "count": {"type": "integer"}, "ids": {"type": "array", "items": {"type": "integer"}}}}`)}})
	ctx := context.Background()
	for _, v := range []any{uint(400), uint64(400), uint32(400)} {
		for _, src := range []string{
			"has(args.amount) && args.amount > 399.5 && args.amount < 400.5",
			"has(args.count) && args.count == 400 && args.count - 1 == 399",
			"has(args.ids) && args.ids[0] == 400",
		} {
			got, err := mustCompile(t, env, src).Eval(ctx, &ToolVars{Args: map[string]any{"amount": v, "count": v, "ids": []any{v}}})
			require.NoError(t, err, "%T: %s", v, src)
			assert.True(t, got, "%T: %s", v, src)
		}
		got, err := mustCompile(t, env, "has(args.amount) && args.amount > 500.0").Eval(ctx, &ToolVars{Args: map[string]any{"amount": v}})
		require.NoError(t, err, "%T", v)
		assert.False(t, got, "%T 400 is not over 500", v)
	}

	// An integer past the largest int64 is read exactly where a double
	// holds it, and refused, saying why, where an int is wanted (no
	// wrap-around to a negative count) or a double would round it.
	_, err := mustCompile(t, env, "has(args.count) && args.count < 0").Eval(ctx, &ToolVars{Args: map[string]any{"count": uint64(math.MaxUint64)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want an integer, got 18446744073709551615, which an int does not hold")
	_, err = mustCompile(t, env, "has(args.amount) && args.amount > 1.0").Eval(ctx, &ToolVars{Args: map[string]any{"amount": uint64(math.MaxUint64)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want a number a double holds exactly, got the integer 18446744073709551615")
	got, err := mustCompile(t, env, "has(args.amount) && args.amount == 9223372036854775808.0").Eval(ctx, &ToolVars{Args: map[string]any{"amount": uint64(1 << 63)}})
	require.NoError(t, err)
	assert.True(t, got, "2^63 is held exactly")
}

// TestEvalReadsGoUintsUntyped: without a schema a Go uint is read as a
// number too, as CEL compares numbers of any kind.
func TestEvalReadsGoUintsUntyped(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool})
	for _, v := range []any{uint(400), uint64(400), uint32(400)} {
		got, err := mustCompile(t, env, "args.amount > 500.0 || args.amount < 399").Eval(context.Background(), &ToolVars{Args: map[string]any{"amount": v}})
		require.NoError(t, err, "%T", v)
		assert.False(t, got, "%T", v)
		got, err = mustCompile(t, env, "args.amount == 400.0").Eval(context.Background(), &ToolVars{Args: map[string]any{"amount": v}})
		require.NoError(t, err, "%T", v)
		assert.True(t, got, "%T", v)
	}
}
