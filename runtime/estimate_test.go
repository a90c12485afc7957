package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A request's estimate counts its tools' schemas as their compact JSON
// reads: the same schema indented (as a plan file holds it) or compact
// (as a policy compiles it) is estimated alike, and a string's spaces
// count.
func TestEstimateRequestIgnoresJSONLayout(t *testing.T) {
	compact := json.RawMessage(`{"type":"object","properties":{"note":{"type":"string","description":"a b  c"}}}`)
	indented := json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\n    \"note\": {\n      \"type\": \"string\",\n      \"description\": \"a b  c\"\n    }\n  }\n}")
	req := func(schema json.RawMessage) *ChatRequest {
		return &ChatRequest{Messages: []Message{{Role: "user", Content: "hi"}},
			Tools:          []ToolDef{{Name: "note", Description: "take a note", Parameters: schema}},
			ResponseFormat: &ResponseFormat{Name: "out", Schema: schema}}
	}
	assert.Equal(t, EstimateRequest(req(compact)), EstimateRequest(req(indented)))
	assert.Equal(t, EstimateMessages(req(compact).Messages)+EstimateTokens("note")+EstimateTokens("take a note")+
		EstimateTokens(string(compact))+EstimateTokens("out")+EstimateTokens(string(compact)), EstimateRequest(req(compact)))
	assert.Equal(t, int64((len(`{"a":"x \" y"}`)+3)/4), estimateJSON([]byte(`{ "a" : "x \" y" }`)), "an escaped quote does not end the string")
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
