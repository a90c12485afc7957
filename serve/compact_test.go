package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// codexCompactBody is the body Codex sends to POST /v1/responses/compact
// when its provider is OpenAI's (a base_url set for the built-in
// provider): the conversation of serve/testdata/responses/codex.json,
// with no tools, as its compaction request carries it.
func codexCompactBody(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/responses/codex.json")
	require.NoError(t, err)
	var turn map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &turn))
	body := map[string]json.RawMessage{"tools": json.RawMessage(`[]`), "parallel_tool_calls": json.RawMessage(`false`)}
	for _, k := range []string{"model", "instructions", "input", "reasoning", "prompt_cache_key", "text"} {
		body[k] = turn[k]
	}
	out, err := json.Marshal(body)
	require.NoError(t, err)
	return out
}

// Codex compacts a long conversation with POST /v1/responses/compact when
// its provider is OpenAI's, and the gateway answered "no route", which
// told a Codex user nothing of what to do. The route answers, to a caller
// with a key, a 404 not_found in the API's format saying that the
// gateway does not serve it and how to have Codex compact through
// /v1/responses instead; no upstream is called.
func TestResponsesCompactIsRefusedWithWhatToDo(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	code, _, body := do(t, "POST", g.url+"/v1/responses/compact", clientKey, codexCompactBody(t))
	assert.Equal(t, http.StatusNotFound, code, body)
	assert.Equal(t, "not_found", gjson.Get(body, "error.code").String(), body)
	assert.Equal(t, "not_found_error", gjson.Get(body, "error.type").String(), body)
	msg := gjson.Get(body, "error.message").String()
	assert.Contains(t, msg, "POST /v1/responses/compact is not served")
	assert.Contains(t, msg, `wire_api = "responses"`)

	_, err := g.openai(t).Responses.Compact(context.Background(), responses.ResponseCompactParams{Model: "primary",
		Input: responses.ResponseCompactParamsInputUnion{OfString: openai.String("hi")}})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusNotFound, oe.StatusCode)
	assert.Equal(t, "not_found", oe.Code)

	code, _, _ = do(t, "POST", g.url+"/v1/responses/compact", "not-a-key", codexCompactBody(t))
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Equal(t, 0, g.oa.requests()+g.an.requests())
	assert.Contains(t, g.metrics(t), `agentc_serve_requests_total{code="404",model="-",route="responses_compact"} 2`)
}
