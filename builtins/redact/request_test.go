package redact_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// requestModel records each request it received.
type requestModel struct{ seen []runtime.ChatRequest }

func (m *requestModel) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.seen = append(m.seen, *req)
	yield(runtime.Delta{Text: "ok"})
	return nil
}

func redactPipeline(t *testing.T, model runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	return rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
}

const projKey = "sk-proj-abcdefghijklmnopqrstuvwx"

// The tool definitions a call offers and the schema its output must match
// are read by the model as the transcript is: a key a client pasted into a
// description, an enum or a default is masked on the call's copy.
func TestChatToolDefinitionsAndResponseFormat(t *testing.T) {
	model := &requestModel{}
	pl := redactPipeline(t, model)
	tools := []runtime.ToolDef{
		{Name: "deploy", Description: "deploys; use key " + awsKey,
			Parameters: json.RawMessage(`{"type":"object","properties":{"env":{"type":"string","enum":["prod","` + projKey + `"]},"n":{"type":"integer","maximum":10}}}`)},
		{Name: "notify", Description: "sends a message", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	format := &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "report", Strict: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"login":{"type":"string","description":"always password=hunter22x","default":"token=` + "s3cr3tvalue123" + `"}}}`)}
	toolsBefore, err := json.Marshal(tools)
	require.NoError(t, err)
	formatBefore, err := json.Marshal(format)
	require.NoError(t, err)

	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "go"}},
		Tools: tools, ResponseFormat: format})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	sent := model.seen[0]
	b, err := json.Marshal(struct {
		Tools  []runtime.ToolDef
		Format *runtime.ResponseFormat
	}{sent.Tools, sent.ResponseFormat})
	require.NoError(t, err)
	for _, secret := range []string{awsKey, projKey, "hunter22x", "s3cr3tvalue123"} {
		assert.NotContains(t, string(b), secret)
	}
	require.Len(t, sent.Tools, 2)
	assert.Equal(t, "deploy", sent.Tools[0].Name)
	assert.Equal(t, "deploys; use key [REDACTED:aws-access-key-id]", sent.Tools[0].Description)
	assert.JSONEq(t, `{"type":"object","properties":{"env":{"type":"string","enum":["prod","[REDACTED:openai-key]"]},"n":{"type":"integer","maximum":10}}}`,
		string(sent.Tools[0].Parameters), "the schema stays valid JSON, its numbers as they were")
	assert.Equal(t, tools[1], sent.Tools[1], "a clean definition goes on as it is")
	require.NotNil(t, sent.ResponseFormat)
	assert.Equal(t, "report", sent.ResponseFormat.Name)
	assert.True(t, sent.ResponseFormat.Strict)
	assert.True(t, json.Valid(sent.ResponseFormat.Schema))

	toolsAfter, err := json.Marshal(tools)
	require.NoError(t, err)
	formatAfter, err := json.Marshal(format)
	require.NoError(t, err)
	assert.Equal(t, string(toolsBefore), string(toolsAfter), "the caller's definitions are untouched")
	assert.Equal(t, string(formatBefore), string(formatAfter), "the caller's response format is untouched")
}

// A signed thinking block cannot be masked (the model refuses one whose
// text changed): one holding a secret is left out of the call's copy, or,
// when the turn it belongs to cannot go on without it, the call fails.
func TestChatThinkingBlocksSentBack(t *testing.T) {
	secretThinking := runtime.ContentPart{Type: runtime.PartThinking, Text: "the key is " + awsKey, Signature: "sig-1"}
	cleanThinking := runtime.ContentPart{Type: runtime.PartThinking, Text: "look it up first", Signature: "sig-2"}
	redacted := runtime.ContentPart{Type: runtime.PartRedactedThinking, Signature: "opaque-" + awsKey}
	call := func(id string) []runtime.ToolUse {
		return []runtime.ToolUse{{ID: id, Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}}
	}
	transcript := func() []runtime.Message {
		return []runtime.Message{
			{Role: "user", Content: "find it"},
			{Role: "assistant", Parts: []runtime.ContentPart{secretThinking, redacted}, ToolCalls: call("t1")},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "t1", Text: "found"}}},
			{Role: "assistant", Content: "found it"},
			{Role: "user", Content: "and now?"},
			{Role: "assistant", Parts: []runtime.ContentPart{cleanThinking}, ToolCalls: call("t2")},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "t2", Text: "done"}}},
		}
	}
	enabled := &runtime.Thinking{Type: "enabled", BudgetTokens: 2048}

	t.Run("an earlier turn's block is left out", func(t *testing.T) {
		model := &requestModel{}
		msgs := transcript()
		_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs, Thinking: enabled})
		require.NoError(t, err)
		require.Len(t, model.seen, 1)
		sent := model.seen[0].Messages
		assert.Equal(t, []runtime.ContentPart{redacted}, sent[1].Parts, "the encrypted block goes on as it is")
		assert.Equal(t, msgs[1].ToolCalls, sent[1].ToolCalls)
		assert.Equal(t, msgs[5], sent[5], "a clean block goes on byte for byte")
		assert.Equal(t, transcript(), msgs, "the caller's messages are untouched")
	})
	t.Run("an earlier interleaved turn keeps its calls in place", func(t *testing.T) {
		model := &requestModel{}
		msgs := transcript()
		// thinking, t1, secret thinking, text, t1b: left out, the
		// secret block leaves t1 between the clean block and the text.
		msgs[1].Parts = []runtime.ContentPart{cleanThinking, secretThinking, {Type: runtime.PartText, Text: "and"}}
		msgs[1].ToolCalls = append(call("t1"), call("t1b")...)
		msgs[1].ToolCalls[0].PartsAfter = 2
		msgs[2].Parts = append(msgs[2].Parts, runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "t1b", Text: "found"})
		_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs, Thinking: enabled})
		require.NoError(t, err)
		require.Len(t, model.seen, 1)
		sent := model.seen[0].Messages[1]
		var order []string
		for j, k := range sent.Blocks() {
			if k >= 0 {
				order = append(order, sent.ToolCalls[k].ID)
			} else {
				order = append(order, sent.Parts[j].Signature+sent.Parts[j].Text)
			}
		}
		assert.Equal(t, []string{"sig-2look it up first", "t1", "and", "t1b"}, order)
		assert.Equal(t, 2, msgs[1].ToolCalls[0].PartsAfter, "the caller's messages are untouched")
	})
	t.Run("the turn going on cannot lose its block", func(t *testing.T) {
		model := &requestModel{}
		msgs := transcript()
		msgs[5].Parts = []runtime.ContentPart{secretThinking}
		_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs, Thinking: enabled})
		requireRefused(t, err, "messages[5].parts[0]")
		assert.Empty(t, model.seen, "the model is not called")

		// Without thinking asked for, the API reads no earlier block: left out.
		_, err = redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
		require.NoError(t, err)
		require.Len(t, model.seen, 1)
		assert.Empty(t, model.seen[0].Messages[5].Parts)
		assert.Equal(t, msgs[5].ToolCalls, model.seen[0].Messages[5].ToolCalls)
	})
	t.Run("a message that is nothing but the block", func(t *testing.T) {
		model := &requestModel{}
		msgs := transcript()
		msgs[3] = runtime.Message{Role: "assistant", Parts: []runtime.ContentPart{secretThinking}}
		_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs, Thinking: enabled})
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, ce.Message, "messages[3].parts[0]")
		assert.Empty(t, model.seen)
	})
}

// Thinking the model streams is relayed when it is clean, whole, its
// signature with it; a block holding a secret cannot be masked without
// breaking its signature, so it is left out (the next block takes its
// index), and the text is masked as always.
func TestChatStreamedThinking(t *testing.T) {
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Thinking: &runtime.ThinkingDelta{Index: 0}},
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "the user's key is " + awsKey[:8]}},
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: awsKey[8:]}},
		{Thinking: &runtime.ThinkingDelta{Index: 0, Signature: "sig"}},
		{Thinking: &runtime.ThinkingDelta{Index: 1, Redacted: true, Signature: "opaque"}},
		{Thinking: &runtime.ThinkingDelta{Index: 2, Text: "Answer plainly.", Signature: "sig2"}},
		{Text: "your key is " + awsKey + "\n", FinishReason: runtime.FinishStop},
	}})
	pl := redactPipeline(t, model)
	var got []runtime.Delta
	resp, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	})
	require.NoError(t, err)
	text := ""
	var thinking []runtime.ThinkingDelta
	for _, d := range got {
		if d.Thinking != nil {
			thinking = append(thinking, *d.Thinking)
		}
		text += d.Text
	}
	assert.Equal(t, []runtime.ThinkingDelta{{Index: 0, Redacted: true, Signature: "opaque"}, {Index: 1, Text: "Answer plainly.", Signature: "sig2"}}, thinking)
	assert.Equal(t, "your key is [REDACTED:aws-access-key-id]\n", text)
	assert.Equal(t, len(got), resp.Deltas)

	done, err := redactPipeline(t, rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "key " + awsKey, Signature: "sig"}},
		{Text: "ok"},
	}})).Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	assert.Empty(t, done.Thinking)
	assert.Equal(t, "ok", done.Text)

	done, err = redactPipeline(t, rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "Call the tool.", Signature: "sig"}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "t1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, FinishReason: runtime.FinishToolCalls},
	}})).Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartThinking, Text: "Call the tool.", Signature: "sig"}}, done.Thinking)
	require.Len(t, done.ToolCalls, 1)
}

// Tool calls after a thinking block holding a secret fail the call: the
// client could not continue the turn without the block, which cannot be
// masked. Nothing of the response is released.
func TestChatToolCallsAfterSecretThinking(t *testing.T) {
	var got []runtime.Delta
	_, err := redactPipeline(t, rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "key " + awsKey, Signature: "sig"}},
		{Text: "Let me check.\n"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "t1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, FinishReason: runtime.FinishToolCalls},
	}})).Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	})
	requireRefused(t, err, "thinking block 0 holds a secret")
	assert.Empty(t, got)
}

// requireRefused requires err to be the layer's permanent error, its
// message holding want and not the secret.
func requireRefused(t *testing.T, err error, want string) {
	t.Helper()
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
	assert.Equal(t, "redact", ce.Layer)
	assert.Contains(t, ce.Message, want)
	assert.NotContains(t, err.Error(), awsKey)
}

// TestSchemaUnderKeyWordKept: a schema describing a parameter named by a key word
// (`"password": {"type": "string", "format": "password", "description": "..."}`, as a tool's
// parameters, an MCP tool's input schema or an OpenAPI document write it), a reference to a
// secret by its name (`"secret": {"name": "db-credentials", "key": "password"}`), a token's
// settings (`"token": {"issuer": ..., "audience": ...}`) and a list of rules or scopes
// (`"token": ["read", "write"]`) go on as they are: their strings describe a value and hold
// none. A value under a key word one level down (`"password": {"value": "..."}`) is still
// masked. The strings under "type" were masked
// as the password itself, which left a schema the provider refuses.
func TestSchemaUnderKeyWordKept(t *testing.T) {
	schema := `{"type":"object","properties":{"user":{"type":"string"},` +
		`"password":{"type":"string","format":"password","description":"The user's password","title":"Password","pattern":"^.{8,}$"},` +
		`"token":{"$ref":"#/components/schemas/Token"}},"required":["user","password"]}`
	model := &requestModel{}
	tools := []runtime.ToolDef{{Name: "login", Description: "logs in", Parameters: json.RawMessage(schema)}}
	_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary",
		Messages: []runtime.Message{{Role: "user", Content: "go"}}, Tools: tools})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	require.Len(t, model.seen[0].Tools, 1)
	assert.JSONEq(t, schema, string(model.seen[0].Tools[0].Parameters), "tool definition")

	for _, in := range []string{
		schema,
		`{"env":[{"name":"DB_PASSWORD","valueFrom":{"secret":{"name":"db-credentials","key":"password","kind":"Secret"}}}]}`,
		`{"token":{"issuer":"https://auth.example.com","audience":"api","algorithm":"RS256"}}`,
		`{"api_key":{"header":"X-Api-Key","location":"header"},"secret":{"version":"AWSCURRENT","region":"us-east-1"}}`,
		`{"token":["read","write","admin"],"password":["required","min:8","max:64"]}`,
	} {
		assertJSONMasked(t, in, in)
	}
	assertJSONMasked(t, `{"password":{"type":"plain","value":"hunter22x"}}`,
		`{"password":{"type":"plain","value":"[REDACTED:password-assignment]"}}`)
}

// The fields a model client receives that no model reads are read too: the
// prompt cache key and the metadata's values are masked on the call's copy
// (the caller's map untouched); the end user's id and a stop sequence
// holding a secret refuse the call, as masking them would change what
// they do.
func TestChatFieldsTheModelDoesNotRead(t *testing.T) {
	model := &requestModel{}
	pl := redactPipeline(t, model)
	meta := map[string]string{"note": "key " + awsKey, "tier": "gold", "user_id": "u-1"}
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "go"}},
		PromptCacheKey: "t7-" + projKey, Metadata: meta, Stop: []string{"END"}})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	sent := model.seen[0]
	assert.Equal(t, map[string]string{"note": "key [REDACTED:aws-access-key-id]", "tier": "gold", "user_id": "u-1"}, sent.Metadata)
	assert.NotContains(t, sent.PromptCacheKey, projKey)
	assert.Contains(t, sent.PromptCacheKey, "t7-")
	assert.Equal(t, []string{"END"}, sent.Stop)
	assert.Equal(t, "key "+awsKey, meta["note"], "the caller's map is never modified")

	for name, req := range map[string]runtime.ChatRequest{
		"the end user's id":     {Metadata: map[string]string{"user_id": awsKey}},
		"the safety identifier": {SafetyIdentifier: projKey},
		"stop sequence 1":       {Stop: []string{"END", "token=" + awsKey}},
	} {
		req.Model, req.Messages = "primary", []runtime.Message{{Role: "user", Content: "go"}}
		_, err := pl.Complete(context.Background(), req)
		var blocked *runtime.BlockedError
		require.ErrorAs(t, err, &blocked, name)
		assert.Equal(t, "redact", blocked.Layer)
		assert.Contains(t, blocked.Message, name)
		assert.NotContains(t, blocked.Message, awsKey)
	}
	assert.Len(t, model.seen, 1, "no refused call reached the model")
}

// The URL of an image or a document is no text a model reads, but its
// provider fetches it, from the host the client chose, query included: a
// key in it (?key=sk-...) reached both. A URL masked would locate another
// resource, so one holding a secret refuses the call, naming the message,
// never the URL; a clean one, and a data: URL (read as the text it holds),
// go on as they are.
func TestChatPartURLs(t *testing.T) {
	image := func(u string) []runtime.Message {
		return []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "see"}, {Type: runtime.PartImage, ImageURL: u}}}}
	}
	for name, tt := range map[string]struct {
		msgs    []runtime.Message
		blocked string
	}{
		"a key in the query": {image("https://img.example/a.png?key=" + projKey),
			"message 0 image URL holds a secret, which the model's provider fetches: a URL masked would locate another resource"},
		"a percent-encoded key in the path": {image("https://img.example/u/token%3D" + awsKey + "/a.png"),
			"message 0 image URL holds a secret"},
		"in a system message": {[]runtime.Message{{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "https://img.example/logo.png?key=" + projKey}}}, {Role: "user", Content: "hi"}},
			"message 0 image URL holds a secret"},
		"a clean URL": {image("https://img.example/cat.png?w=1024"), ""},
	} {
		t.Run(name, func(t *testing.T) {
			model := &requestModel{}
			_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: tt.msgs})
			if tt.blocked == "" {
				require.NoError(t, err)
				require.Len(t, model.seen, 1)
				assert.Equal(t, tt.msgs, model.seen[0].Messages)
				return
			}
			var blocked *runtime.BlockedError
			require.ErrorAs(t, err, &blocked)
			assert.Contains(t, blocked.Message, tt.blocked)
			assert.NotContains(t, err.Error(), "sk-proj")
			assert.NotContains(t, err.Error(), awsKey)
			assert.Empty(t, model.seen)
		})
	}
}
