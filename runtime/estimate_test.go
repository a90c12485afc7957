package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// The declared tools a request offers carry their schemas in compact JSON:
// a plan loaded from the indented file agentc build writes offers, and is
// estimated for, the same bytes as the compiled policy.
func TestDeclaredToolsAreCompact(t *testing.T) {
	indented := json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\n    \"note\": {\"type\": \"string\", \"description\": \"a b  c\"}\n  }\n}")
	compact := `{"type":"object","properties":{"note":{"type":"string","description":"a b  c"}}}`
	defs := DeclaredTools(&plan.Plan{Tools: map[string]plan.Tool{"note": {Description: "take a note", Args: indented}, "any": {}}})
	require.Len(t, defs, 2)
	assert.Equal(t, `{"type":"object"}`, string(defs[0].Parameters), "a tool without args takes any object")
	assert.Equal(t, compact, string(defs[1].Parameters))
	req := &ChatRequest{Messages: []Message{{Role: "user", Content: "hi"}}, Tools: defs[1:]}
	assert.Equal(t, EstimateMessages(req.Messages)+EstimateTokens("note")+EstimateTokens("take a note")+EstimateTokens(compact), EstimateRequest(req))
}

// A structured tool result reaches the model as JSON without HTML
// escaping: "<" as it is, as truncate measures it.
func TestResultTextKeepsMarkup(t *testing.T) {
	s, err := resultText(map[string]any{"html": "<b>A & B</b>"})
	assert.NoError(t, err)
	assert.Equal(t, `{"html":"<b>A & B</b>"}`, s)
	_, err = resultText(map[string]any{"bad": func() {}})
	assert.Error(t, err)
}
