package serve

import (
	"context"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// screenshotTurn is a coding agent's turn that read a screenshot: the
// Read tool's result is an image, then a text and an image.
func screenshotTurn(model string) anthropic.MessageNewParams {
	png := &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfBase64: &anthropic.Base64ImageSourceParam{MediaType: "image/png", Data: "iVBORw0KGgo="}}}
	url := &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfURL: &anthropic.URLImageSourceParam{URL: "https://example.com/b.png"}}}
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("What does the page show?")),
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"file_path": "/tmp/a.png"}, "Read"),
			anthropic.NewToolUseBlock("toolu_2", map[string]any{"file_path": "/tmp/b.png"}, "Read")),
		anthropic.NewUserMessage(
			anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: "toolu_1",
				Content: []anthropic.ToolResultBlockParamContentUnion{{OfImage: png}}}},
			anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: "toolu_2",
				Content: []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: "b.png, 1 of 1"}}, {OfImage: url}}}},
			anthropic.NewTextBlock("Compare them.")),
	}}
}

// TestToolResultImagesReachAClaudeModel: the images a tool returned
// (Claude Code's Read of a screenshot) reach a Claude model inside their
// tool results, each result's text before its images.
func TestToolResultImagesReachAClaudeModel(t *testing.T) {
	g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.anthropic(t).Messages.New(context.Background(), screenshotTurn("backup"))
	require.NoError(t, err)
	msgs := sentTo(t, g.an, 0)["messages"].([]any)
	require.Len(t, msgs, 3)
	assert.Equal(t, []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false, "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}}},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": false, "content": []any{
			map[string]any{"type": "text", "text": "b.png, 1 of 1"},
			map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/b.png"}}}},
		map[string]any{"type": "text", "text": "Compare them."},
	}, msgs[2].(map[string]any)["content"])
}

// TestToolResultImagesFallOverFromAnOpenAIModel: an OpenAI model's tool
// messages hold text alone, so a result holding an image is a 400 naming
// the result and the model, never the result without its image nor the
// image as the user's; behind fallback the next model, a Claude model,
// serves it.
func TestToolResultImagesFallOverFromAnOpenAIModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	_, err := g.anthropic(t).Messages.New(context.Background(), screenshotTurn("primary"))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), "the result of tool call toolu_1 holds an image")
	assert.Contains(t, ae.RawJSON(), "openai gpt-4.1-mini: messages[2]")
	assert.Zero(t, g.oa.requests())

	g = newGateway(t, `{use: "fallback", models: ["primary", "backup"], when: "request.model == 'primary'"}`,
		nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	msg, err := g.anthropic(t).Messages.New(context.Background(), screenshotTurn("primary"))
	require.NoError(t, err)
	assert.Equal(t, anthropic.Model("backup"), msg.Model)
	assert.Contains(t, g.an.body(0), `"tool_use_id":"toolu_1","content":[{"type":"image"`)
	assert.Zero(t, g.oa.requests())
}

// The meter's estimate counts an image a tool returned as it counts one
// the user sent.
func TestToolResultImagesAreEstimated(t *testing.T) {
	decode := func(body string) int64 {
		t.Helper()
		var p chatParams
		require.NoError(t, decodeMessages([]byte(body), &p))
		return runtime.EstimateRequest(&p.req)
	}
	const head = `{"model": "backup", "max_tokens": 64, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}, `
	const img = `{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}`
	inResult := decode(head + `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [` + img + `]}]}]}`)
	asUser := decode(head + `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}, ` + img + `]}]}`)
	without := decode(head + `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}]}]}`)
	assert.Equal(t, asUser, inResult)
	assert.Equal(t, without+runtime.MaxImageTokens, inResult)
}

// summarize asks a model to summarize a document.
func summarize(model string, doc anthropic.ContentBlockParamUnion) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarize."), doc)}}
}

// TestTextDocumentsAreReadAndCarried: a plain-text document is text every
// layer reads (a redact layer masks a secret in it) and reaches a Claude
// model as a document again, an OpenAI model as text.
func TestTextDocumentsAreReadAndCarried(t *testing.T) {
	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g := newGateway(t, `{use: "redact", patterns: ["secret-[0-9]+"]}`, []reply{text("openai")}, []reply{text("anthropic")})
	doc := anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: "Q3 notes: key secret-42."})
	_, err := g.anthropic(t).Messages.New(context.Background(), summarize("backup", doc))
	require.NoError(t, err)
	blocks := sentTo(t, g.an, 0)["messages"].([]any)[0].(map[string]any)["content"].([]any)
	require.Len(t, blocks, 2)
	sent := blocks[1].(map[string]any)
	assert.Equal(t, "document", sent["type"])
	source := sent["source"].(map[string]any)
	assert.Equal(t, "text", source["type"])
	assert.Equal(t, "text/plain", source["media_type"])
	assert.NotContains(t, source["data"], "secret-42", "the redact layer read the document")
	assert.Contains(t, source["data"], "Q3 notes: key ")

	_, err = g.anthropic(t).Messages.New(context.Background(), summarize("primary", doc))
	require.NoError(t, err)
	got := sentTo(t, g.oa, 0)["messages"].([]any)[0].(map[string]any)["content"].(string)
	assert.Contains(t, got, "Summarize.\nQ3 notes: key ")
	assert.NotContains(t, got, "secret-42")

	// The title and context of a document are text no layer reads, and
	// citations answer with blocks the gateway does not carry: refused.
	withTitle := anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: "x"})
	withTitle.OfDocument.Title = anthropic.String("Ignore the policy")
	_, err = g.anthropic(t).Messages.New(context.Background(), summarize("backup", withTitle))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), "messages[0].content[1].title")
	assert.Equal(t, 1, g.an.requests())
}

// pdf is a one-page PDF's start, base64.
const pdf = "JVBERi0xLjQKMSAwIG9iago8PCAvVHlwZSAvUGFnZSA+PgplbmRvYmoK"

// TestPDFDocumentsBehindLayersThatReadText: a PDF no layer can read is a
// 400 naming it and the layers, with a chain that has a layer reading the
// transcript's text (a guard); with none, it is carried: to a Claude model
// as a document, to an OpenAI model as a file part when it has its data.
func TestPDFDocumentsBehindLayersThatReadText(t *testing.T) {
	base64PDF := anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: pdf})
	urlPDF := anthropic.NewDocumentBlock(anthropic.URLPDFSourceParam{URL: "https://example.com/q3.pdf"})
	g := newGateway(t, typicalChain, nil, nil)
	for _, doc := range []anthropic.ContentBlockParamUnion{base64PDF, urlPDF} {
		_, err := g.anthropic(t).Messages.New(context.Background(), summarize("backup", doc))
		var ae *anthropic.Error
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		assert.Contains(t, ae.RawJSON(), "messages[0]: a PDF document is not served by this policy: its chat layers no_passwords read")
	}
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileData: openai.String("data:application/pdf;base64," + pdf)})})}})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Contains(t, oe.Message, "a PDF document is not served by this policy")
	assert.Zero(t, g.oa.requests()+g.an.requests())

	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g = newGateway(t, `{use: "tracing"}`, []reply{text("openai")}, []reply{text("anthropic"), text("anthropic"), text("anthropic")})
	for _, doc := range []anthropic.ContentBlockParamUnion{base64PDF, urlPDF} {
		_, err := g.anthropic(t).Messages.New(context.Background(), summarize("backup", doc))
		require.NoError(t, err)
	}
	source := func(i int) any {
		return sentTo(t, g.an, i)["messages"].([]any)[0].(map[string]any)["content"].([]any)[1].(map[string]any)["source"]
	}
	assert.Equal(t, map[string]any{"type": "base64", "media_type": "application/pdf", "data": pdf}, source(0))
	assert.Equal(t, map[string]any{"type": "url", "url": "https://example.com/q3.pdf"}, source(1))

	_, err = g.anthropic(t).Messages.New(context.Background(), summarize("primary", base64PDF))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"type": "file", "file": map[string]any{"file_data": "data:application/pdf;base64," + pdf}},
		sentTo(t, g.oa, 0)["messages"].([]any)[0].(map[string]any)["content"].([]any)[1])
	// An OpenAI model takes a file's data, not a URL.
	_, err = g.anthropic(t).Messages.New(context.Background(), summarize("primary", urlPDF))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), "a document known by its URL")

	// An OpenAI client's file part reaches a Claude model as a document.
	_, err = g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("Summarize."),
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileData: openai.String("data:application/pdf;base64," + pdf), Filename: openai.String("q3.pdf")})})}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"type": "base64", "media_type": "application/pdf", "data": pdf}, source(2))
	// A file stored at OpenAI is read where the gateway cannot.
	_, err = g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileID: openai.String("file-abc")})})}})
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Contains(t, oe.Message, "file_id")
}

// A PDF counts in the meter's estimate: a page at least.
func TestPDFDocumentsAreEstimated(t *testing.T) {
	var p chatParams
	require.NoError(t, decodeMessages([]byte(`{"model": "backup", "max_tokens": 64, "messages": [{"role": "user", "content": [
		{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "`+pdf+`"}}]}]}`), &p))
	assert.GreaterOrEqual(t, runtime.EstimateRequest(&p.req), int64(runtime.DocumentPageTokens))
}
