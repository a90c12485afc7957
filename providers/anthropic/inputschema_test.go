package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/runtime"
)

// The Messages API requires every tool's input_schema ("tools.0.custom.
// input_schema: Field required"), and a tool of no parameters (its schema
// absent, {} or bare {"type":"object"}) was sent with none: every call
// offering a tool without arguments failed on a Claude model. Such a tool
// is sent with the schema of an object of no properties.
func TestToolWithoutParametersHasAnInputSchema(t *testing.T) {
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	for name, params := range map[string]json.RawMessage{
		"absent":           nil,
		"empty":            json.RawMessage(`{}`),
		"bare object":      json.RawMessage(`{"type":"object"}`),
		"null properties":  json.RawMessage(`{"type":"object","properties":null}`),
		"empty properties": json.RawMessage(`{"type":"object","properties":{}}`),
	} {
		t.Run(name, func(t *testing.T) {
			req := runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "Time?"}},
				Tools: []runtime.ToolDef{{Name: "get_time", Parameters: params}}}
			b, err := c.body(&req)
			require.NoError(t, err)
			schema := gjson.GetBytes(b, "tools.0.input_schema")
			require.True(t, schema.Exists(), string(b))
			assert.JSONEq(t, `{"type":"object","properties":{}}`, schema.Raw)
		})
	}
	// A schema with keywords but no properties keeps them.
	req := runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "Time?"}},
		Tools: []runtime.ToolDef{{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","additionalProperties":false}`)}}}
	b, err := c.body(&req)
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{},"additionalProperties":false}`, gjson.GetBytes(b, "tools.0.input_schema").Raw)
}
