package tracing_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	_ "github.com/agentc-dev/agentc/builtins/fallback"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	_ "github.com/agentc-dev/agentc/builtins/tracing"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func TestSpansCoverTheStream(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("tracing", `{"span_name":"llm","attributes":{"team":"support"}}`)},
		Tool: []plan.Layer{rt.Layer("tracing", "")},
		Turn: []plan.Layer{rt.Layer("tracing", "")},
	})
	var spanDuringStream trace.SpanContext
	model := runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		spanDuringStream = trace.SpanContextFromContext(ctx)
		yield(runtime.Delta{Text: "a"})
		yield(runtime.Delta{Text: "b", Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2}})
		return nil
	})
	tool := rt.NewTool(rt.ToolResult{Err: rt.Permanent("bad args")})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{TracerProvider: tp,
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)

	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "x"}, func(ctx context.Context) (string, error) {
		var openWhileStreaming []bool
		_, err := pl.Stream(ctx, runtime.ChatRequest{Model: "primary"}, func(runtime.Delta) bool {
			// The chat span has not ended while deltas flow.
			openWhileStreaming = append(openWhileStreaming, len(rec.Ended()) == 0)
			return true
		})
		require.NoError(t, err)
		assert.Equal(t, []bool{true, true}, openWhileStreaming)
		_, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
		return "out", nil
	})
	require.NoError(t, err)

	ended := rec.Ended()
	require.Len(t, ended, 3)
	chat, tl, turn := ended[0], ended[1], ended[2]
	assert.Equal(t, "llm", chat.Name())
	assert.Equal(t, "agentc.tool", tl.Name())
	assert.Equal(t, "agentc.turn", turn.Name())
	assert.Equal(t, turn.SpanContext().SpanID(), chat.Parent().SpanID(), "the turn span is the chat span's parent")
	assert.Equal(t, chat.SpanContext().SpanID(), spanDuringStream.SpanID(), "the model sees the chat span")

	ca := attrs(chat)
	assert.Equal(t, "support", ca["team"])
	assert.Equal(t, "r1", ca["agentc.run_id"])
	assert.Equal(t, "primary", ca["agentc.served"])
	assert.Equal(t, int64(2), ca["agentc.deltas"])
	assert.Equal(t, int64(2), ca["agentc.output_tokens"])

	assert.Equal(t, "Error", tl.Status().Code.String())
	assert.Equal(t, "permanent", attrs(tl)["agentc.error_kind"])
	require.NotEmpty(t, tl.Events(), "the error is recorded")
}

func TestNoopWithoutProvider(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("tracing", "")}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Value)
}

func TestASpanEndsWhenTheCallPanics(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("tracing", `{"include_errors":true}`)},
		Tool: []plan.Layer{rt.Layer("tracing", `{"include_errors":true}`)},
		Turn: []plan.Layer{rt.Layer("tracing", `{"include_errors":true}`)},
	})
	model := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { panic("client bug") })
	tool := func(context.Context, *runtime.ToolCall) (any, error) { panic("tool bug") }
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{TracerProvider: tp,
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"t": tool}})
	require.NoError(t, err)
	ctx := context.Background()

	assert.PanicsWithValue(t, "client bug", func() {
		_, _ = pl.Stream(ctx, runtime.ChatRequest{Model: "primary"}, func(runtime.Delta) bool { return true })
	})
	assert.PanicsWithValue(t, "tool bug", func() { _, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "t"}) })
	assert.PanicsWithValue(t, "turn bug", func() {
		_, _ = pl.Turn(ctx, runtime.TurnRequest{Input: "x"}, func(context.Context) (string, error) { panic("turn bug") })
	})

	ended := rec.Ended()
	require.Len(t, ended, 3, "every span ended despite the panic")
	for i, want := range []string{"client bug", "tool bug", "turn bug"} {
		s := ended[i]
		assert.Equal(t, "Error", s.Status().Code.String(), s.Name())
		assert.Contains(t, s.Status().Description, want, s.Name())
		assert.Equal(t, "panic", attrs(s)["agentc.error_kind"], s.Name())
		require.NotEmpty(t, s.Events(), "the panic is recorded on %s", s.Name())
	}
}

// TestTheSpanCountsEveryAttempt: under a fallback with a retry inside (the
// gateway's layout), the chat span's attempts are every model call made,
// the first model's included.
func TestTheSpanCountsEveryAttempt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("tracing", ""), rt.Layer("fallback", `{"models":["primary","backup"]}`),
		rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`)}})
	a := rt.NewModel(rt.Response{Err: rt.Transient("primary down")})
	b := rt.NewModel(rt.Response{Deltas: []string{"fine"}})
	pl := rt.Build(t, p, runtime.Deps{TracerProvider: tp, Models: map[string]runtime.ModelClient{"primary": a, "backup": b}})
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	require.Equal(t, 4, a.Calls()+b.Calls())
	ended := rec.Ended()
	require.Len(t, ended, 1)
	assert.Equal(t, int64(4), attrs(ended[0])["agentc.attempts"])
	assert.Equal(t, 4, resp.Attempts, "the span and the response agree")
}

// A failed call's error text may quote its arguments (a tool's "no match
// for db_password=..."): a span keeps it only with include_errors, as log
// and audit do; by default its status and exception name the layer and the
// text's SHA-256, which matches the error the caller got.
func TestErrorTextIsWithheldUnlessIncluded(t *testing.T) {
	const secret = "db_password=Hunter2-Prod"
	failing := func(context.Context, *runtime.ToolCall) (any, error) {
		return nil, rt.Permanent("no match for " + secret)
	}
	panicking := func(context.Context, *runtime.ToolCall) (any, error) { panic("bad edit " + secret) }
	for _, c := range []struct {
		config   string
		withheld bool
	}{{"", true}, {`{"include_errors":false}`, true}, {`{"include_errors":true}`, false}} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		pl := rt.Build(t, rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("tracing", c.config)}}),
			runtime.Deps{TracerProvider: tp, Tools: map[string]runtime.ToolFunc{"edit": failing, "crash": panicking}})
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "edit"})
		require.Error(t, err)
		assert.Panics(t, func() { _, _ = pl.Tool(context.Background(), runtime.ToolRequest{Name: "crash"}) })
		ended := rec.Ended()
		require.Len(t, ended, 2)
		for i, s := range ended {
			require.Len(t, s.Events(), 1, "%s %d", c.config, i)
			ev := s.Events()[0]
			assert.Equal(t, "exception", ev.Name)
			evAttrs := map[string]string{}
			for _, kv := range ev.Attributes {
				evAttrs[string(kv.Key)] = kv.Value.Emit()
			}
			texts := []string{s.Status().Description, evAttrs["exception.message"]}
			for _, text := range texts {
				if !c.withheld {
					assert.Contains(t, text, secret, c.config)
					continue
				}
				assert.NotContains(t, text, secret, c.config)
				assert.Contains(t, text, "text withheld, sha256 ", c.config)
			}
			if c.withheld && i == 0 {
				sum := sha256.Sum256([]byte(err.Error()))
				assert.Contains(t, texts[0], hex.EncodeToString(sum[:]), "the hash matches the caller's error")
			}
			if c.withheld && i == 1 {
				assert.True(t, strings.HasPrefix(texts[0], "panic; "), texts[0])
			}
			assert.NotEmpty(t, evAttrs["exception.type"])
			assert.Equal(t, []string{"permanent", "panic"}[i], attrs(s)["agentc.error_kind"])
		}
	}
}
