package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fields of a request the model does not read but its provider
// receives (the end user's id, stop sequences, the prompt cache key) are
// read by the layers that mask the transcript: a card number or a key in
// them never reaches the upstream. The end user's id and the stop
// sequences are refused when they hold what the layer finds (a masked id
// would merge every end user masked alike, a masked stop sequence stop the
// answer elsewhere); the prompt cache key and the metadata the policy
// reads are masked on the call's copy.

const (
	endCard   = "4111 1111 1111 1111"
	endEmail  = "jane.doe@example.com"
	endSecret = "AKIAIOSFODNN7EXAMPLE"
)

// maskingChains are the layers that mask the transcript, each with what it
// finds.
var maskingChains = []struct{ chain, found, layer string }{
	{`{use: "pii", action: "redact"}`, endCard, "pii"},
	{`{use: "pii", action: "redact"}`, endEmail, "pii"},
	{`{use: "redact"}`, endSecret, "redact"},
}

func TestEndUserIDAndStopSequencesHoldingAFindingAreRefused(t *testing.T) {
	for _, tt := range maskingChains {
		t.Run(tt.layer+" "+tt.found, func(t *testing.T) {
			g := newGateway(t, tt.chain, nil, nil)
			q := `"` + tt.found + `"`
			for _, c := range []struct{ route, body, field string }{
				{"/v1/chat/completions", `{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "user": ` + q + `}`, "end user's id"},
				{"/v1/chat/completions", `{"model": "backup", "messages": [{"role": "user", "content": "hi"}], "safety_identifier": ` + q + `}`, "safety identifier"},
				{"/v1/chat/completions", `{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "stop": ["END", ` + q + `]}`, "stop sequence 1"},
				{"/v1/chat/completions", `{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "stop": ` + q + `}`, "stop sequence 0"},
				{"/v1/messages", `{"model": "backup", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "metadata": {"user_id": ` + q + `}}`, "end user's id"},
				{"/v1/messages", `{"model": "primary", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "stop_sequences": [` + q + `]}`, "stop sequence 0"},
				{"/v1/responses", `{"model": "primary", "input": "hi", "user": ` + q + `}`, "end user's id"},
				{"/v1/responses", `{"model": "primary", "input": "hi", "safety_identifier": ` + q + `}`, "safety identifier"},
			} {
				code, _, body := do(t, "POST", g.url+c.route, clientKey, []byte(c.body), "anthropic-version", "2023-06-01")
				assert.Equal(t, http.StatusForbidden, code, "%s %s: %s", c.route, c.body, body)
				assert.Contains(t, body, c.field, c.body)
				assert.Contains(t, body, tt.layer, c.body)
				assert.NotContains(t, body, tt.found, "the refusal never repeats the data")
			}
			assert.Zero(t, g.oa.requests()+g.an.requests(), "nothing reached an upstream")
		})
	}
}

func TestPromptCacheKeyAndMetadataAreMasked(t *testing.T) {
	for _, tt := range maskingChains {
		t.Run(tt.layer+" "+tt.found, func(t *testing.T) {
			g := newGateway(t, tt.chain, []reply{{body: transcript(t, "openai", "text.sse")}, {body: transcript(t, "openai", "text.sse")}}, nil)
			code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary",
				"messages": [{"role": "user", "content": "hi"}], "user": "u-1842", "stop": ["END"],
				"prompt_cache_key": "tenant-7 `+tt.found+`", "metadata": {"note": "`+tt.found+`"}}`))
			require.Equal(t, http.StatusOK, code, body)
			sent := sentTo(t, g.oa, 0)
			assert.NotContains(t, g.oa.body(0), tt.found)
			assert.True(t, strings.HasPrefix(sent["prompt_cache_key"].(string), "tenant-7 "), g.oa.body(0))
			assert.Equal(t, "u-1842", sent["user"], "a clean id goes as sent")
			assert.Equal(t, []any{"END"}, sent["stop"], "a clean stop sequence goes as sent")

			code, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "primary", "input": "hi",
				"prompt_cache_key": "`+tt.found+`"}`))
			require.Equal(t, http.StatusOK, code, body)
			assert.NotContains(t, g.oa.body(1), tt.found)
			assert.Contains(t, g.oa.body(1), `"prompt_cache_key"`)
		})
	}
}

// pii with action block refuses any of them holding personal data, as it
// refuses a message.
func TestPIIBlockRefusesTheFieldsTheModelDoesNotRead(t *testing.T) {
	g := newGateway(t, `{use: "pii"}`, nil, nil)
	for field, body := range map[string]string{
		"end user's id":     `"user": "` + endEmail + `"`,
		"stop sequence 0":   `"stop": "` + endCard + `"`,
		"prompt cache key":  `"prompt_cache_key": "` + endEmail + `"`,
		`metadata \"note\"`: `"metadata": {"note": "` + endCard + `"}`,
	} {
		code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary",
			"messages": [{"role": "user", "content": "hi"}], `+body+`}`))
		assert.Equal(t, http.StatusForbidden, code, resp)
		assert.Contains(t, resp, field, body)
		assert.Contains(t, resp, "personal data", body)
	}
	assert.Zero(t, g.oa.requests())
}
