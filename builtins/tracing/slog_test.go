package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == "span" {
			out = append(out, m)
		}
	}
	return out
}

func TestLogWithoutAProvider(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	model := rt.NewModel(rt.Response{Deltas: []string{"a", "b"}, Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2}})
	tool := rt.NewTool(rt.ToolResult{Err: rt.Permanent("bad args")})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("tracing", `{"log":true,"attributes":{"team":"support"}}`)},
		Tool: []plan.Layer{rt.Layer("tracing", `{"log":true}`)},
	}), runtime.Deps{TracerProvider: noop.NewTracerProvider(), Logger: logger,
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	text, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "ab", text)
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
	require.Error(t, err)

	lines := logLines(t, &buf)
	require.Len(t, lines, 2)
	chat, tl := lines[0], lines[1]
	assert.Equal(t, "INFO", chat["level"])
	assert.Equal(t, "agentc.chat", chat["span"])
	assert.Equal(t, "client", chat["kind"])
	assert.Equal(t, "r1", chat["agentc.run_id"])
	assert.Equal(t, "primary", chat["agentc.served"])
	assert.Equal(t, "support", chat["team"])
	assert.EqualValues(t, 2, chat["agentc.deltas"])
	assert.EqualValues(t, 2, chat["agentc.output_tokens"])
	assert.Equal(t, "WARN", tl["level"])
	assert.Equal(t, "agentc.tool", tl["span"])
	assert.Equal(t, "error", tl["status"])
	assert.Equal(t, "permanent", tl["agentc.error_kind"])
	assert.Contains(t, tl["exception"], "text withheld, sha256 ", "the error's text is withheld without include_errors")
	assert.NotContains(t, tl["exception"], "bad args")
	assert.Equal(t, tl["exception"], tl["status_message"])
}

func TestNoLogWithoutTheFlag(t *testing.T) {
	var buf bytes.Buffer
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("tracing", "")}}),
		runtime.Deps{TracerProvider: noop.NewTracerProvider(), Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
			Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Empty(t, logLines(t, &buf))
	assert.Equal(t, 1, tool.Calls())
}
