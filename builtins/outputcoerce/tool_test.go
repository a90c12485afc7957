package outputcoerce_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func toolPipeline(t *testing.T, config string, results map[string]any) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("output_coerce", config)}})
	p.Tools = map[string]plan.Tool{
		"order": {ResultSchema: json.RawMessage(`{"type":"object","required":["status"],"properties":{"status":{"enum":["open","shipped"]}}}`)},
		"free":  {},
	}
	tools := map[string]runtime.ToolFunc{}
	for name, v := range results {
		tools[name] = rt.NewTool(rt.ToolResult{Value: v}).Func()
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: tools})
	require.NoError(t, err)
	return pl
}

func TestToolResultSchemaEnforced(t *testing.T) {
	pl := toolPipeline(t, `{}`, map[string]any{"order": map[string]any{"status": "lost"}, "free": "anything"})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	var re *outputcoerce.ResultError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "order", re.Tool)
	assert.Equal(t, "output_coerce", re.Layer)
	require.Len(t, re.Diagnostics, 1)
	assert.Equal(t, "/status", re.Diagnostics[0].Path)
	assert.Equal(t, string(runtime.KindPermanent), runtime.KindOf(err))
	assert.False(t, runtime.IsTransient(err))
	assert.Equal(t, "output_coerce", runtime.LayerOf(err))

	v, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "free"})
	require.NoError(t, err, "a tool without a result_schema passes")
	assert.Equal(t, "anything", v.Value)
}

func TestToolResultSchemaValidPassesAndAnnotateLogs(t *testing.T) {
	good := map[string]any{"status": "shipped"}
	pl := toolPipeline(t, `{}`, map[string]any{"order": good})
	v, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	require.NoError(t, err)
	assert.Equal(t, good, v.Value)

	raw := toolPipeline(t, `{}`, map[string]any{"order": json.RawMessage(`{"status":"open"}`)})
	_, err = raw.Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	require.NoError(t, err, "raw JSON results are parsed")

	// Raw bytes holding a valid value and another after it were checked
	// by the first, and the tool's reader got both.
	for _, v := range []any{json.RawMessage(`{"status":"open"} {"status":"lost"}`), []byte(`{"status":"open"}{"status":"lost"}`)} {
		_, err = toolPipeline(t, `{}`, map[string]any{"order": v}).Tool(context.Background(), runtime.ToolRequest{Name: "order"})
		var re *outputcoerce.ResultError
		require.ErrorAs(t, err, &re, "%s", v)
		assert.Equal(t, "not valid JSON: trailing data after the value", re.Diagnostics[0].Message)
	}

	ann := toolPipeline(t, `{"mode":"annotate"}`, map[string]any{"order": map[string]any{"status": "lost"}})
	v, err = ann.Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"status": "lost"}, v.Value)
}

func TestToolStageLayerSchemaOverrides(t *testing.T) {
	pl := toolPipeline(t, `{"schema":{"type":"string"}}`, map[string]any{"free": 42})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "free"})
	var re *outputcoerce.ResultError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Error(), "result of tool free does not match its result_schema")
}

func TestChatStageNeedsASchema(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("output_coerce", `{}`)}}), runtime.Deps{})
	require.ErrorContains(t, err, "schema is required in the chat stage")
}

// TestToolResultSchemaReadsStructuredContent: an MCP tool result (a
// "content" list and a "structuredContent" value) is checked by its
// structured content, the value a tool's outputSchema describes; the result
// itself passes unchanged. A result without structured content is checked
// whole.
func TestToolResultSchemaReadsStructuredContent(t *testing.T) {
	mcpResult := func(sc any) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "see structured"}}, "structuredContent": sc}
	}
	good := mcpResult(map[string]any{"status": "shipped"})
	v, err := toolPipeline(t, `{}`, map[string]any{"order": good}).Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	require.NoError(t, err)
	assert.Equal(t, good, v.Value, "the result passes whole")

	raw := json.RawMessage(`{"content":[],"structuredContent":{"status":"open"}}`)
	_, err = toolPipeline(t, `{}`, map[string]any{"order": raw}).Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	require.NoError(t, err, "raw JSON results are read alike")

	_, err = toolPipeline(t, `{}`, map[string]any{"order": mcpResult(map[string]any{"status": "lost"})}).
		Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	var re *outputcoerce.ResultError
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Diagnostics, 1)
	assert.Equal(t, "/status", re.Diagnostics[0].Path)
	assert.JSONEq(t, `{"status":"lost"}`, re.Result, "the rejected value is the structured content")

	_, err = toolPipeline(t, `{}`, map[string]any{"order": map[string]any{"content": []any{}, "structuredContent": nil}}).
		Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	require.ErrorAs(t, err, &re, "a result without structured content is checked whole")
	assert.Equal(t, "", re.Diagnostics[0].Path)
}

// TestToolResultSchemaReadsJSONText: a string result that the schema
// refuses and that is the JSON text of another value (an MCP tool without an
// outputSchema answers JSON as text) is checked by that value; the result
// passes unchanged, as text. A schema that accepts the string checks it as
// a string; when both fail, the diagnostics are the encoded value's if the
// schema refused the string by its type, else the string's.
func TestToolResultSchemaReadsJSONText(t *testing.T) {
	ctx := context.Background()
	call := func(config string, v any) (runtime.ToolResult, error) {
		return toolPipeline(t, config, map[string]any{"order": v}).Tool(ctx, runtime.ToolRequest{Name: "order"})
	}
	res, err := call(`{}`, `{"status": "shipped"}`)
	require.NoError(t, err)
	assert.Equal(t, `{"status": "shipped"}`, res.Value, "the result passes as the text it was")

	var re *outputcoerce.ResultError
	_, err = call(`{}`, `{"status": "lost"}`)
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Diagnostics, 1)
	assert.Equal(t, "/status", re.Diagnostics[0].Path, "the encoded value's diagnostics")
	assert.Equal(t, `{"status": "lost"}`, re.Result)

	for _, text := range []string{"shipped", `{"status": "shipped"} and more`, `"{\"status\": \"shipped\"}"`} {
		_, err = call(`{}`, text)
		require.ErrorAs(t, err, &re, text)
		assert.Equal(t, []outputcoerce.Diagnostic{{Path: "", Message: "expected object, but got string"}}, re.Diagnostics, text)
	}

	res, err = call(`{"schema": {"type": "string", "maxLength": 4}}`, `1234`)
	require.NoError(t, err, "a schema that accepts the string checks it as one")
	_, err = call(`{"schema": {"type": "string", "maxLength": 4}}`, `12345`)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "length must be <= 4, but got 5", re.Diagnostics[0].Message, "the string's diagnostics")
	res, err = call(`{"schema": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "array"}]}}`, `[1, 2, 3]`)
	require.NoError(t, err, "a value either reading accepts passes")
	assert.Equal(t, `[1, 2, 3]`, res.Value)
}
