package predicate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkGuard compares the refund guard of the README's example policy evaluated through a compiled
// Program with the same predicate written in Go over the argument map.
func BenchmarkGuard(b *testing.B) {
	const src = "args.amount > 100.0 && !has(args.approved_by)"
	env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{schema(b, "refund")}})
	require.NoError(b, err)
	prg, iss := env.Compile(src)
	require.Empty(b, iss)
	require.False(b, prg.CostTracked())

	var args map[string]any
	require.NoError(b, json.Unmarshal([]byte(`{"order_id":"A1","amount":150}`), &args))
	vars := &ToolVars{Tool: ToolInfo{Name: "refund", SideEffecting: true}, Args: args, Run: RunInfo{ID: "run-1"}}
	ctx := context.Background()

	b.Run("compiled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ok, err := prg.Eval(ctx, vars)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ok, err := nativeRefundGuard(vars.Args)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}

// nativeRefundGuard is args.amount > 100.0 && !has(args.approved_by) in Go, with the same
// error on a missing or mistyped amount.
func nativeRefundGuard(args map[string]any) (bool, error) {
	_, approved := args["approved_by"]
	raw, ok := args["amount"]
	if !ok {
		if approved {
			return false, nil
		}
		return false, errNoAmount
	}
	amount, ok := raw.(float64)
	if !ok {
		return false, errNoAmount
	}
	return amount > 100.0 && !approved, nil
}

var errNoAmount = errorString("no such key: amount")

type errorString string

func (e errorString) Error() string { return string(e) }

// BenchmarkCompile measures Check plus Program of the refund guard in a cached environment,
// what the runtime pays per predicate at Build.
func BenchmarkCompile(b *testing.B) {
	env := toolEnv(b, "refund")
	b.ReportAllocs()
	for b.Loop() {
		if _, iss := env.Compile("args.amount > 100.0 && !has(args.approved_by)"); len(iss) > 0 {
			b.Fatal(iss)
		}
	}
}

// BenchmarkNewEnv measures building a typed tool environment that is not cached yet.
func BenchmarkNewEnv(b *testing.B) {
	refund := schema(b, "refund")
	b.ReportAllocs()
	limit := uint64(1 << 40)
	for b.Loop() {
		limit++ // a new configuration each time: no cache hit
		if _, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{refund}, CostLimit: limit}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUntypedReads measures reads of an untyped args map and of run.meta, plain, optional
// and presence tests, over values without nulls.
func BenchmarkUntypedReads(b *testing.B) {
	env, err := NewEnv(EnvConfig{Stage: Tool})
	require.NoError(b, err)
	prg, iss := env.Compile("args.amount > 100.0 && args.?reason.orValue('') != '' && has(args.ship.zip) && run.meta.?tier.orValue('') == 'gold'")
	require.Empty(b, iss)
	var args map[string]any
	require.NoError(b, json.Unmarshal([]byte(`{"amount":150,"reason":"late","ship":{"zip":"94107"}}`), &args))
	vars := &ToolVars{Args: args, Run: RunInfo{ID: "run-1", Meta: map[string]any{"tier": "gold"}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := prg.Eval(ctx, vars); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
