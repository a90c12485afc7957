package agentc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc"
	"github.com/agentc-dev/agentc/runtime"
)

func TestLoadBuildsAPipeline(t *testing.T) {
	// The example's models name their keys' variables; building the
	// clients does not contact the providers.
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("OPENAI_API_KEY", "test-key")
	ctx := context.Background()
	refund := func(context.Context, *runtime.ToolCall) (any, error) { return map[string]any{"ok": true}, nil }
	pipe, err := agentc.Load(ctx, filepath.Join("examples", "support"), runtime.Deps{
		Tools: map[string]runtime.ToolFunc{"refund": refund},
	})
	require.NoError(t, err)
	defer pipe.Close()

	_, err = pipe.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 500.0}})
	assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "the refund_limit guard blocks: %v", err)

	res, err := pipe.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 50.0}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"ok": true}, res.Value)
}

func TestLoadReportsPolicyErrors(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("package p\nchains: chat: [{use: \"retry\", max_attempts: 99}]\n"), 0o644))
	_, err := agentc.Load(context.Background(), dir, runtime.Deps{})
	var pe *agentc.PolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Len(t, pe.Diagnostics, 1)
	assert.Equal(t, "schema/invalid-value", pe.Diagnostics[0].Rule)
	assert.Contains(t, err.Error(), "p.cue:2:")
}

// A policy that vets clean builds: a guard's deny is compiled with the
// policy's cel_cost_limit, and a read of an argument its when tests
// present needs no test of its own, at run time as at vet time.
func TestLoadBuildsGuardsAsVetted(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(`package p
settings: cel_cost_limit: 100000000
tools: note: {args: {type: "object", required: ["text"], properties: {text: {type: "string", maxLength: 50000000}, tag: type: "string"}}}
chains: tool: [
	{use: "guard", name: "big", tools: ["note"], deny: "args.text.contains('DROP TABLE')"},
	{use: "guard", name: "tagged", tools: ["note"], when: "has(args.tag)", deny: "args.tag == 'x'"},
]
`), 0o644))
	ctx := context.Background()
	note := func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }
	pipe, err := agentc.Load(ctx, dir, runtime.Deps{Tools: map[string]runtime.ToolFunc{"note": note}})
	require.NoError(t, err)
	defer pipe.Close()
	_, err = pipe.Tool(ctx, runtime.ToolRequest{Name: "note", Args: map[string]any{"text": "hi"}})
	require.NoError(t, err, "without a tag the guard is skipped")
	_, err = pipe.Tool(ctx, runtime.ToolRequest{Name: "note", Args: map[string]any{"text": "DROP TABLE x"}})
	assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
	_, err = pipe.Tool(ctx, runtime.ToolRequest{Name: "note", Args: map[string]any{"text": "hi", "tag": "x"}})
	assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
}

func ExampleLoad() {
	ctx := context.Background()
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "hello", Usage: runtime.Usage{InputTokens: 3, OutputTokens: 1}})
		return nil
	})
	pipe, err := agentc.Load(ctx, "examples/support", runtime.Deps{
		Models: map[string]runtime.ModelClient{"primary": model, "backup": model},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pipe.Close()
	ctx = runtime.WithRun(ctx, runtime.Run{ID: "run-1"})
	resp, err := pipe.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	fmt.Println(resp.Text, resp.Model, err)
	// Output: hello primary <nil>
}

// TestLoadLogsTheWarnings: a policy that compiled with warnings built
// without a word of them, though agentc vet prints them. Load logs each
// through Deps.Logger, one line with its position and rule.
func TestLoadLogsTheWarnings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("package p\nchains: chat: [\n\t{use: \"retry\", name: \"outer\", max_attempts: 2},\n\t{use: \"retry\", name: \"inner\", max_attempts: 2},\n]\n"), 0o644))
	var buf bytes.Buffer
	pipe, err := agentc.Load(context.Background(), dir, runtime.Deps{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	require.NoError(t, pipe.Close())
	var warned []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "order/nested-retry") {
			warned = append(warned, line)
		}
	}
	require.Len(t, warned, 1, "one line per warning: %s", buf.String())
	assert.Contains(t, warned[0], "level=WARN")
	assert.Contains(t, warned[0], "p.cue:4:")

	pipe, err = agentc.Load(context.Background(), dir, runtime.Deps{})
	require.NoError(t, err, "without a logger, the warnings are not logged")
	require.NoError(t, pipe.Close())
}
