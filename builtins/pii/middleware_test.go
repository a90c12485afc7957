package pii_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// recordingModel records the transcript each call received.
type recordingModel struct{ seen [][]runtime.Message }

func (m *recordingModel) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.seen = append(m.seen, append([]runtime.Message(nil), req.Messages...))
	yield(runtime.Delta{Text: "ok"})
	return nil
}

func chatPipeline(t testing.TB, config string, model runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("privacy", rt.Layer("pii", config))}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

func TestChatBlock(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		msgs    []runtime.Message
		blocked string
	}{
		{"email in latest user message", `{}`, []runtime.Message{{Role: "user", Content: "mail me at ann@example.com"}}, "email"},
		{"card", `{"action":"block"}`, []runtime.Message{{Role: "user", Content: "card 4111 1111 1111 1111"}}, "card"},
		{"clean", `{}`, []runtime.Message{{Role: "user", Content: "what is the refund policy?"}}, ""},
		{"an earlier user message is checked too", `{}`, []runtime.Message{
			{Role: "user", Content: "ann@example.com"}, {Role: "assistant", Content: "noted"}, {Role: "user", Content: "thanks"}}, "message 0 contains personal data (email)"},
		{"fabricated assistant turn", `{}`, []runtime.Message{
			{Role: "user", Content: "hi"}, {Role: "assistant", Content: "your card 4111 1111 1111 1111"}, {Role: "user", Content: "thanks"}}, "message 1 contains personal data (card)"},
		{"tool result in the history", `{}`, []runtime.Message{
			{Role: "user", Content: "look me up"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c0", Name: "crm", Arguments: []byte(`{}`)}}},
			{Role: "tool", ToolCallID: "c0", Content: `{"card":"4111111111111111"}`},
			{Role: "assistant", Content: "found you"}, {Role: "user", Content: "thanks"}}, "message 2 tool result contains personal data (card)"},
		{"card number as a JSON number in earlier tool call arguments", `{}`, []runtime.Message{
			{Role: "user", Content: "pay"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c0", Name: "pay", Arguments: []byte(`{"pan":4111111111111111}`)}}},
			{Role: "tool", ToolCallID: "c0", Content: "ok"}, {Role: "user", Content: "thanks"}}, "message 1 tool call arguments contains personal data (card)"},
		{"system prompt", `{}`, []runtime.Message{{Role: "system", Content: "support bot for ops@example.com"}, {Role: "user", Content: "hi"}},
			"message 0 (system) contains personal data (email); the operator's own text is scanned with system: true (the default): set system: false to leave it alone"},
		{"system prompt left alone with system false", `{"system":false}`, []runtime.Message{{Role: "system", Content: "support bot for ops@example.com"}, {Role: "user", Content: "hi"}}, ""},
		{"text in place of an image", `{}`, []runtime.Message{{Role: "user", Content: "read this", Parts: []runtime.ContentPart{
			{Type: runtime.PartImage, ImageURL: "data:text/plain;base64,bWFpbCBhbm5AZXhhbXBsZS5jb20="}}}}, "message 0 attachment contains personal data (email)"},
		{"kinds filter skips email", `{"kinds":["ssn"]}`, []runtime.Message{{Role: "user", Content: "ann@example.com"}}, ""},
		{"kinds filter ip", `{"kinds":["ip"]}`, []runtime.Message{{Role: "user", Content: "server 203.0.113.9 is down"}}, "ipv4"},
		{"iban by default", `{}`, []runtime.Message{{Role: "user", Content: "refund to DE89 3704 0044 0532 0130 00"}}, "message 0 contains personal data (iban)"},
		{"kinds filter leaves iban out", `{"kinds":["card"]}`, []runtime.Message{{Role: "user", Content: "refund to GB29NWBK60161331926819"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkChatBlock(t, tt.config, tt.msgs, tt.blocked) })
	}
}

// checkChatBlock sends msgs through a pii layer of config: with blocked ""
// the call reaches the model, else it is blocked before, the refusal
// holding blocked and quoting no data.
func checkChatBlock(t *testing.T, config string, msgs []runtime.Message, blocked string) {
	t.Helper()
	model := &recordingModel{}
	_, err := chatPipeline(t, config, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	if blocked == "" {
		require.NoError(t, err)
		assert.Len(t, model.seen, 1)
		return
	}
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "privacy", b.Layer)
	assert.Contains(t, b.Message, blocked)
	assert.NotContains(t, b.Message, "@", "the message never quotes the data")
	assert.NotContains(t, b.Message, "4111")
	assert.Empty(t, model.seen, "a blocked call never reaches the model")
}

func TestChatRedactDoesNotMutateInput(t *testing.T) {
	model := &recordingModel{}
	pl := chatPipeline(t, `{"action":"redact"}`, model)
	msgs := []runtime.Message{
		{Role: "system", Content: "support bot for ops@example.com"},
		{Role: "user", Content: "I am ann@example.com"},
		{Role: "assistant", Content: "hello"},
		{Role: "user", Content: "call 555-867-5309 or 415-555-0100"},
	}
	orig := append([]runtime.Message(nil), msgs...)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.Text)
	assert.Equal(t, orig, msgs, "the caller's transcript is untouched")
	require.Len(t, model.seen, 1)
	seen := model.seen[0]
	assert.Equal(t, "support bot for [REDACTED:email]", seen[0].Content, "system messages are redacted too")
	assert.Equal(t, "I am [REDACTED:email]", seen[1].Content)
	assert.NotContains(t, seen[3].Content, "555")

	model = &recordingModel{}
	_, err = chatPipeline(t, `{"action":"redact","system":false}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "support bot for ops@example.com", model.seen[0][0].Content, "system false leaves system messages alone")
	assert.Equal(t, "I am [REDACTED:email]", model.seen[0][1].Content)
}

func toolPipeline(t testing.TB, config string, fn runtime.ToolFunc) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("privacy", rt.Layer("pii", config))}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"lookup": fn}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

func TestToolArgs(t *testing.T) {
	var seen map[string]any
	fn := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen = c.Args
		return "done", nil
	}
	args := map[string]any{"customer": map[string]any{"email": "ann@example.com", "name": "Ann"}, "ssn": "078-05-1120"}

	block := toolPipeline(t, `{"action":"block"}`, fn)
	_, err := block.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "privacy", b.Layer)
	assert.Contains(t, b.Message, "/customer/email")
	assert.Nil(t, seen, "a blocked call never runs")

	for _, keyed := range []map[string]any{
		{"cc": map[string]any{"ann@example.com": "work"}},
		{"ann@example.com": "to"},
	} {
		_, err = block.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: keyed})
		require.ErrorAs(t, err, &b, "a key holding personal data blocks")
		assert.NotContains(t, b.Message, "@", "the message never quotes the key")
		assert.Nil(t, seen)
	}

	redact := toolPipeline(t, `{"action":"redact"}`, fn)
	res, err := redact.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Value)
	assert.Equal(t, map[string]any{"customer": map[string]any{"email": "[REDACTED:email]", "name": "Ann"}, "ssn": "[REDACTED:ssn]"}, seen)
	assert.Equal(t, "ann@example.com", args["customer"].(map[string]any)["email"], "the caller's args are untouched")
	assert.Equal(t, "078-05-1120", args["ssn"])

	seen = nil
	_, err = redact.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{
		"cards": map[string]any{"4111111111111111": "x", "5500 0000 0000 0004": "y"}, "[REDACTED:card]": "kept"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"cards": map[string]any{"[REDACTED:card]": "x", "[REDACTED:card]#2": "y"},
		"[REDACTED:card]": "kept"}, seen, "a key holding personal data is renamed to the mask; keys masked alike keep their values")

	seen = nil
	_, err = redact.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"q": "refunds"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"q": "refunds"}, seen)
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []string{`{"action":"mask"}`, `{"kinds":["dna"]}`, `{"on_error":"maybe"}`, `{"bogus":true}`, `{"regions":["XX"]}`} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("pii", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}

// BenchmarkChatScan2KB scans a 2 KB user message (no personal data) through
// the layer.
func BenchmarkChatScan2KB(b *testing.B) {
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "ok"})
		return nil
	})
	pl := chatPipeline(b, `{}`, model)
	text := strings.Repeat("Order 4471 shipped on 2024-05-01 to the warehouse, version 1.2.3 ok. ", 30)[:2048]
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: text}}}
	ctx := context.Background()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Stream(ctx, req, func(runtime.Delta) bool { return true }); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChatOutput: a model that echoes personal data does not get it past the layer.
func TestChatOutput(t *testing.T) {
	deltas := []string{"Your order is on its way.\nThe card on file is 4111 11", "11 1111 1111, thanks", "\nbye"}
	run := func(config string) (string, error) {
		model := rt.NewModel(rt.Response{Deltas: deltas})
		pl := chatPipeline(t, config, model)
		var got strings.Builder
		_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: "where is my order?"}}},
			func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
		return got.String(), err
	}
	text, err := run(`{}`)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, "output contains personal data (card)")
	assert.Equal(t, "Your order is on its way.\n", text, "the clean line went out; the one with the card never did")

	text, err = run(`{"action":"redact"}`)
	require.NoError(t, err)
	assert.Equal(t, "Your order is on its way.\nThe card on file is [REDACTED:card], thanks\nbye", text)

	text, err = run(`{"output":false}`)
	require.NoError(t, err)
	assert.Contains(t, text, "4111 1111 1111 1111", "output false leaves the output alone")
}

// TestChatAttachmentRedacted: text carried in place of an image reaches the
// model redacted, as a text part.
func TestChatAttachmentRedacted(t *testing.T) {
	model := &recordingModel{}
	msgs := []runtime.Message{{Role: "user", Content: "read this", Parts: []runtime.ContentPart{
		{Type: runtime.PartImage, ImageURL: "data:text/plain,mail%20ann@example.com"},
		{Type: runtime.PartImage, ImageURL: "data:image/png;base64,iVBORw0K"}}}}
	_, err := chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartText, Text: "mail [REDACTED:email]"}, msgs[0].Parts[1]}, model.seen[0][0].Parts)
	assert.Equal(t, "data:text/plain,mail%20ann@example.com", msgs[0].Parts[0].ImageURL, "the caller's message is untouched")
}

func TestChatResponseFormat(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}},
		ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "contact",
			Schema: []byte(`{"type":"object","properties":{"to":{"type":"string","description":"e.g. ann@example.com"}}}`)}}
	_, err := chatPipeline(t, `{}`, &recordingModel{}).Complete(context.Background(), req)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, "the response format contains personal data (email)")
}

func TestChatToolDefinitions(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}},
		Tools: []runtime.ToolDef{{Name: "mail", Parameters: []byte(`{"type":"object","properties":{"to":{"type":"string","description":"e.g. ann@example.com"}}}`)}}}
	_, err := chatPipeline(t, `{}`, &recordingModel{}).Complete(context.Background(), req)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, "the definition of tool mail contains personal data (email)")
	_, err = chatPipeline(t, `{"system":false}`, &recordingModel{}).Complete(context.Background(), req)
	require.NoError(t, err, "system false leaves the operator's tool definitions alone")
}

// A host calling a tool from Go may pass arguments of any Go type: a value
// that is not of the JSON-decoded shapes (a struct, a []map[string]any, a
// map of numbers) is read as its JSON form, which is what the tool is sent,
// rather than skipped; with "redact" the tool gets that form masked.
func TestToolArgsOfGoTypes(t *testing.T) {
	type customer struct {
		Email string `json:"email"`
	}
	var seen map[string]any
	fn := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen = c.Args
		return "done", nil
	}
	block := toolPipeline(t, `{}`, fn)
	redact := toolPipeline(t, `{"action":"redact"}`, fn)
	for name, args := range map[string]map[string]any{
		"struct":            {"customer": customer{Email: "ann@example.com"}},
		"pointer to struct": {"customer": &customer{Email: "ann@example.com"}},
		"list of maps":      {"customers": []map[string]any{{"email": "ann@example.com"}}},
		"map of numbers":    {"cards": map[string]int64{"primary": 4111111111111111}},
	} {
		seen = nil
		_, err := block.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, name)
		assert.Nil(t, seen, name)

		_, err = redact.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		require.NoError(t, err, name)
		require.NotNil(t, seen, name)
		text := fmt.Sprint(seen)
		assert.NotContains(t, text, "ann@example.com", name)
		assert.NotContains(t, text, "4111111111111111", name)
	}

	// A value with no JSON form cannot be checked: it is refused.
	for _, pl := range []*runtime.Pipeline{block, redact} {
		seen = nil
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"x": []any{"ann@example.com", math.NaN()}}})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
		assert.Contains(t, b.Message, "cannot be checked")
		assert.Nil(t, seen)
	}
}

// requestModel records each request it received, whole.
type requestModel struct{ seen []runtime.ChatRequest }

func (m *requestModel) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.seen = append(m.seen, *req)
	yield(runtime.Delta{Text: "ok"})
	return nil
}

// TestChatRedactToolDefinitionsAndResponseFormat: with "redact", the tool
// definitions and the response format's schema reach the model masked (the
// schemas still valid JSON), the caller's untouched; system false leaves
// them, the operator's text, alone, as "block" does.
func TestChatRedactToolDefinitionsAndResponseFormat(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}},
		Tools: []runtime.ToolDef{
			{Name: "mail", Description: "writes to ann@example.com", Parameters: []byte(`{"type":"object","properties":{"to":{"type":"string","enum":["bob@example.com"]}}}`)},
			{Name: "noop", Parameters: []byte(`{"type":"object"}`)},
		},
		ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "contact",
			Schema: []byte(`{"type":"object","properties":{"phone":{"type":"string","default":"4111 1111 1111 1111"}}}`)}}
	before, err := json.Marshal(req)
	require.NoError(t, err)
	model := &requestModel{}
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	sent := model.seen[0]
	assert.Equal(t, "writes to [REDACTED:email]", sent.Tools[0].Description)
	assert.JSONEq(t, `{"type":"object","properties":{"to":{"type":"string","enum":["[REDACTED:email]"]}}}`, string(sent.Tools[0].Parameters))
	assert.Equal(t, req.Tools[1], sent.Tools[1])
	assert.JSONEq(t, `{"type":"object","properties":{"phone":{"type":"string","default":"[REDACTED:card]"}}}`, string(sent.ResponseFormat.Schema))
	after, err := json.Marshal(req)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the caller's request is untouched")

	model = &requestModel{}
	_, err = chatPipeline(t, `{"action":"redact","system":false}`, model).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	assert.Equal(t, req.Tools, model.seen[0].Tools)
	assert.Equal(t, req.ResponseFormat, model.seen[0].ResponseFormat)
}

// A region without a phone numbering plan is refused by Validate, which vet
// runs, not only when the layer is provisioned.
func TestValidateRegions(t *testing.T) {
	m := &pii.Middleware{Action: pii.ActionRedact, OnError: "closed", Regions: []string{"us", "UK"}}
	err := m.Validate()
	require.Error(t, err)
	assert.Equal(t, `regions[1] "UK" is not an ISO 3166-1 alpha-2 region code: write "GB"`, err.Error())

	m.Regions = []string{"ZZ"}
	require.ErrorContains(t, m.Validate(), `regions[0] "ZZ" is not an ISO 3166-1 alpha-2 region code with a phone numbering plan`)

	m.Regions = []string{"gb", "DE"}
	assert.NoError(t, m.Validate())
}

// toolsModel records the tools each call offers.
type toolsModel struct{ tools [][]runtime.ToolDef }

func (m *toolsModel) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.tools = append(m.tools, req.Tools)
	yield(runtime.Delta{Text: "ok"})
	return nil
}

// TestChatCustomToolGrammar: a custom tool's grammar is text the model
// reads (and may write back): "block" refuses one with personal data,
// "redact" masks it, leaving the tool offered.
func TestChatCustomToolGrammar(t *testing.T) {
	grammar := `start: "To: ann@example.com" LF body`
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}},
		Tools: []runtime.ToolDef{{Name: "mail", Custom: &runtime.CustomTool{Format: runtime.CustomGrammar, Syntax: "lark", Definition: grammar}}}}
	_, err := chatPipeline(t, `{}`, &toolsModel{}).Complete(context.Background(), req)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, "the definition of tool mail contains personal data (email)")

	m := &toolsModel{}
	_, err = chatPipeline(t, `{"action":"redact"}`, m).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, m.tools, 1)
	c := m.tools[0][0].Custom
	require.NotNil(t, c)
	assert.NotContains(t, c.Definition, "ann@example.com")
	assert.Contains(t, c.Definition, `start: "To: `)
	assert.Equal(t, "lark", c.Syntax)
	assert.Equal(t, grammar, req.Tools[0].Custom.Definition, "the caller's request is not modified")
}

// BenchmarkStreamedDump1MB streams a hex dump of text, 1 MB of it (xxd's layout, about
// 15,400 lines), through a pii layer a line a delta: the dump is held until it ends.
func BenchmarkStreamedDump1MB(b *testing.B) {
	var lines []string
	for line := range strings.Lines(textnormtest.ProseDump(1<<20) + "done\n") {
		lines = append(lines, line)
	}
	pl := chatPipeline(b, `{"action":"redact"}`, rt.NewModel(rt.Response{Deltas: lines}))
	b.ResetTimer()
	for range b.N {
		res, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
		require.NoError(b, err)
		require.True(b, strings.HasSuffix(res.Text, "done\n"))
	}
}

// BenchmarkStreamedRows116KB streams 4,000 lines of dates and numbers (116 KB), each ending
// in a digit group an item may run on from, through a "redact" layer in 8-byte deltas.
func BenchmarkStreamedRows116KB(b *testing.B) {
	text := strings.Repeat("2024-01-15 12345 row 7: 1234\n", 4000)
	var deltas []string
	for i := 0; i < len(text); i += 8 {
		deltas = append(deltas, text[i:min(len(text), i+8)])
	}
	pl := chatPipeline(b, `{"action":"redact"}`, rt.NewModel(rt.Response{Deltas: deltas}))
	s, err := pii.New(pii.Config{})
	require.NoError(b, err)
	want, _ := s.Redact(text)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
		require.NoError(b, err)
		require.Equal(b, want, res.Text)
	}
}
