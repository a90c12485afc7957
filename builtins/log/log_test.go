package log_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/log"
	_ "github.com/agentc-dev/agentc/builtins/pii"
	_ "github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		out = append(out, m)
	}
	return out
}

func TestOneLinePerCall(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("log", `{"level":"debug","include_args":true}`)},
		Tool: []plan.Layer{rt.Layer("log", `{"level":"info"}`)},
		Turn: []plan.Layer{rt.Layer("log", "")},
	})
	model := rt.NewModel(rt.Response{Deltas: []string{"a", "b"}, Usage: runtime.Usage{InputTokens: 7, OutputTokens: 2}})
	tool := rt.NewTool(rt.ToolResult{Err: rt.Permanent("nope")})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger,
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r9"})
	_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(ctx context.Context) (string, error) {
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
		require.NoError(t, err)
		_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "t", Args: map[string]any{"x": 1.0}})
		require.Error(t, err)
		return "done", nil
	})
	require.NoError(t, err)

	got := lines(t, &buf)
	require.Len(t, got, 3)
	chat, tl, turn := got[0], got[1], got[2]
	assert.Equal(t, "agentc chat", chat["msg"])
	assert.Equal(t, "DEBUG", chat["level"])
	assert.Equal(t, "r9", chat["run_id"])
	assert.Equal(t, "chat", chat["stage"])
	assert.Equal(t, "log", chat["layer"])
	assert.Equal(t, "primary", chat["served"])
	assert.Equal(t, float64(7), chat["input_tokens"])
	assert.Equal(t, "ok", chat["outcome"])
	assert.NotNil(t, chat["messages"], "include_args logs the messages")

	assert.Equal(t, "agentc tool", tl["msg"])
	assert.Equal(t, "WARN", tl["level"], "a failure is logged at least at warn")
	assert.Equal(t, "failed", tl["outcome"])
	assert.Equal(t, "permanent", tl["error_kind"])
	assert.Nil(t, tl["args"])

	assert.Equal(t, "agentc turn", turn["msg"])
	assert.Equal(t, "INFO", turn["level"])
	assert.Equal(t, float64(4), turn["output_bytes"])
}

func TestDisabledLevelWritesNothing(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("log", `{"level":"debug"}`)}}),
		runtime.Deps{Logger: logger, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Empty(t, buf.String())
	_, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("log", `{"level":"loud"}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, "level must be one of")
}

// TestIncludeArgsMasksTheRunsSecrets: the token a secret_result tool
// returned, passed on by the model in a tool's arguments, quoted in a chat
// message and a turn's input and echoed by a tool's error, is logged as
// "[SECRET]", never in clear.
func TestIncludeArgsMasksTheRunsSecrets(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := `{"level":"info","include_args":true,"include_errors":true}`
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("log", cfg)}, Tool: []plan.Layer{rt.Layer("log", cfg)},
		Turn: []plan.Layer{rt.Layer("log", cfg)}})
	p.Tools = map[string]plan.Tool{"vault": {SecretResult: true}, "call_api": {}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger,
		Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"ok"}})},
		Tools: map[string]runtime.ToolFunc{
			"vault":    rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_9f8e7d6c"}}).Func(),
			"call_api": rt.NewTool(rt.ToolResult{Err: rt.Permanent(`401: token "tok_9f8e7d6c" refused`)}).Func(),
		}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r-secret"})
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "vault", Args: map[string]any{}})
	require.NoError(t, err)
	_, _ = pl.Turn(ctx, runtime.TurnRequest{Input: "use tok_9f8e7d6c"}, func(ctx context.Context) (string, error) {
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: "the token is tok_9f8e7d6c"}}}, 0)
		require.NoError(t, err)
		_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "call_api", Args: map[string]any{"auth": "Bearer tok_9f8e7d6c"}})
		return "", err
	})
	assert.NotContains(t, buf.String(), "tok_9f8e7d6c")
	got := lines(t, &buf)
	require.Len(t, got, 4)
	assert.Contains(t, got[1]["messages"], map[string]any{"role": "user", "content": "[SECRET]"})
	assert.Equal(t, map[string]any{"auth": "[SECRET]"}, got[2]["args"])
	assert.Equal(t, `401: token "[SECRET]" refused`, got[2]["error"])
	assert.Equal(t, "use [SECRET]", got[3]["input"])
}

// TestOutcomeInDoubt: a call in doubt (it may have had its effect) is
// logged with outcome "in_doubt", not "failed".
func TestOutcomeInDoubt(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("log", "")}})
	tool := rt.NewTool(rt.ToolResult{Err: &runtime.InDoubtError{Layer: "idempotent", Tool: "t", IdempotencyKey: "k"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}), runtime.ToolRequest{Name: "t"})
	require.Error(t, err)
	got := lines(t, &buf)
	require.Len(t, got, 1)
	assert.Equal(t, "in_doubt", got[0]["outcome"])
	assert.Equal(t, "in_doubt", runtime.Status(err))
}

// A call whose inner layers panic is a call too: it gets its line (outcome
// "failed", error_kind "panic", at least at warn) before the panic goes on
// with its value, in every stage.
func TestPanicIsLogged(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("log", "")},
		Tool: []plan.Layer{rt.Layer("log", "")},
		Turn: []plan.Layer{rt.Layer("log", "")},
	})
	model := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { panic("model boom") })
	tool := func(context.Context, *runtime.ToolCall) (any, error) { panic("tool boom") }
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger,
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"t": tool}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})

	assert.PanicsWithValue(t, "model boom", func() {
		_, _, _ = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
	})
	assert.PanicsWithValue(t, "tool boom", func() { _, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "t"}) })
	assert.PanicsWithValue(t, "turn boom", func() {
		_, _ = pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) { panic("turn boom") })
	})

	got := lines(t, &buf)
	require.Len(t, got, 3)
	for i, want := range []string{"agentc chat", "agentc tool", "agentc turn"} {
		assert.Equal(t, want, got[i]["msg"])
		assert.Equal(t, "WARN", got[i]["level"])
		assert.Equal(t, "failed", got[i]["outcome"])
		assert.Equal(t, "panic", got[i]["error_kind"])
		assert.Equal(t, "r1", got[i]["run_id"])
	}
	sum := sha256.Sum256([]byte("panic: tool boom"))
	assert.Equal(t, "panic; text withheld, sha256 "+hex.EncodeToString(sum[:]), got[1]["error"])
	assert.Equal(t, "t", got[1]["tool"])
}

// TestErrorTextWithheld: a tool's error that quotes its arguments (a card
// number) is not logged in clear without include_errors: the line keeps
// the error's kind, the layer it names and the SHA-256 of its text, as an
// audit record does; with include_errors the text is logged.
func TestErrorTextWithheld(t *testing.T) {
	const text = "card 4111111111111111 declined"
	for _, tc := range []struct {
		cfg, want string
	}{
		{`{}`, ""},
		{`{"include_errors":true}`, text},
	} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, nil))
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("log", tc.cfg)}, Turn: []plan.Layer{rt.Layer("log", tc.cfg)}})
		tool := rt.NewTool(rt.ToolResult{Err: rt.Permanent(text)})
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger, Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
		require.NoError(t, err)
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
		_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "pay"}, func(ctx context.Context) (string, error) {
			_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"card": "4111111111111111"}})
			return "", err
		})
		require.Error(t, err)
		got := lines(t, &buf)
		require.Len(t, got, 2)
		for _, l := range got {
			assert.Equal(t, "permanent", l["error_kind"])
			if tc.want != "" {
				assert.Equal(t, tc.want, l["error"])
				continue
			}
			assert.NotContains(t, buf.String(), "4111")
			sum := sha256.Sum256([]byte(err.Error()))
			assert.Equal(t, "text withheld, sha256 "+hex.EncodeToString(sum[:]), l["error"])
		}
	}
}

// TestErrorTextMaskedByAnOuterPII logs a tool error that quotes a card
// number and an email address inside a pii layer, and one that quotes a
// secret inside a tool-chain redact layer, each of which masks the error
// for the caller: the line holds the text the caller reads
// (include_errors) or its digest, never what the layer masked.
func TestErrorTextMaskedByAnOuterPII(t *testing.T) {
	for _, outer := range []struct {
		layer  plan.Layer
		text   string
		masked []string
	}{
		{rt.Layer("pii", `{"action":"redact"}`), "card 4111111111111111 declined for ann@example.com", []string{"4111", "ann@example.com"}},
		{rt.Layer("redact", `{}`), "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx refused", []string{"sk-proj-AbCdEfGhIjKlMnOpQrStUvWx"}},
	} {
		for _, cfg := range []string{`{"include_errors":true}`, `{}`} {
			var buf bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, nil))
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{outer.layer, rt.Layer("log", cfg)}})
			tool := rt.NewTool(rt.ToolResult{Err: rt.Permanent(outer.text)})
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger, Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
			require.NoError(t, err)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{}})
			require.Error(t, err)
			for _, m := range outer.masked {
				require.NotContains(t, err.Error(), m, "the caller's error is masked")
				assert.NotContains(t, buf.String(), m)
			}
			got := lines(t, &buf)
			require.Len(t, got, 1)
			if cfg != `{}` {
				assert.Equal(t, err.Error(), got[0]["error"], "the text the caller reads")
				continue
			}
			sum := sha256.Sum256([]byte(err.Error()))
			assert.Equal(t, "text withheld, sha256 "+hex.EncodeToString(sum[:]), got[0]["error"])
		}
	}
}

// TestChatLineWaitsForTheHostsVerdict: under a context carrying an
// AnswerVerdict the line of a chat call that succeeded is written when the
// host settles it, with the host's refusal as its outcome; a call that
// failed is written at once.
func TestChatLineWaitsForTheHostsVerdict(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("log", "")}})
	model := rt.NewModel(rt.Response{Deltas: []string{"a"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Logger: logger, Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	v := &runtime.AnswerVerdict{}
	ctx := runtime.WithAnswerVerdict(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}), v)
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
	require.NoError(t, err)
	assert.Empty(t, buf.String(), "no line before the host's verdict")
	v.Settle(&runtime.BlockedError{Layer: "refund_limit", Message: "no"})
	got := lines(t, &buf)
	require.Len(t, got, 1)
	assert.Equal(t, "blocked", got[0]["outcome"])
	assert.Equal(t, "blocked", got[0]["error_kind"])
	assert.Equal(t, 1.0, got[0]["deltas"])
	v.Settle(nil)
	assert.Len(t, lines(t, &buf), 1, "a verdict settles once")
}
