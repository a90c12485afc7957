package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// A chat predicate reads the messages, their parts, their tool calls and
// the tools offered as it always did, whatever the evaluations before it
// read: the activations and the lists of messages are reused from one
// evaluation to the next.
func TestEvalChatReadsMessagesAsBefore(t *testing.T) {
	long := &runtime.ChatCall{Request: runtime.ChatRequest{Model: "m",
		Messages: []runtime.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "intro", Name: "ann", Parts: []runtime.ContentPart{
				{Type: runtime.PartText, Text: "the password is x"}, {Type: "image"}, {Type: runtime.PartText, Text: "thanks"}}},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{
				{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris","n":null}`)},
				{ID: "c2", Name: "lookup", Arguments: json.RawMessage(`[1]`)}}},
			{Role: "tool", ToolCallID: "c1", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, Text: "sunny"}}},
		},
		Tools: []runtime.ToolDef{{Name: "get_weather", Description: "weather"}}}}
	short := &runtime.ChatCall{Request: runtime.ChatRequest{Model: "m", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}}
	none := &runtime.ChatCall{Request: runtime.ChatRequest{Model: "m"}}
	for _, tc := range []struct {
		src               string
		long, short, none any // a bool, or "error"
	}{
		{"messages.exists(m, m.content.contains('password'))", true, false, false},
		{"size(messages) == 4", true, false, false},
		{"size(request.messages) == 1", false, true, false},
		{"messages[1].content == 'introthe password is x\\nthanks'", true, "error", "error"},
		{"messages[0].role == 'system'", true, false, "error"},
		{"messages[4].role == 'user'", "error", "error", "error"},
		{"messages[-1].role == 'user'", "error", "error", "error"},
		{"messages[1].name == 'ann' && !has(messages[0].name) && messages[0].name == ''", true, "error", "error"},
		{"messages.all(m, m.tool_call_id == '' || m.role == 'tool')", true, true, true},
		{"messages[3].content == 'sunny' && messages[3].tool_call_id == 'c1'", true, "error", "error"},
		{"messages.exists(m, has(m.tool_calls) && m.tool_calls.exists(c, c.name == 'get_weather' && c.args.location == 'Paris'))", true, false, false},
		{"messages.exists(m, m.tool_calls.exists(c, has(c.args.n)))", "error", false, false},
		{"messages[2].tool_calls[1].args.x == 1", "error", "error", "error"},
		{"messages[2].tool_calls.map(c, c.id) == ['c1', 'c2']", true, "error", "error"},
		{"messages.filter(m, m.role == 'user').size() == 1", true, true, false},
		{"messages[0] in messages && messages == request.messages", true, true, "error"},
		{"messages + messages == request.messages + request.messages", true, true, true},
		{"messages[0] == messages[1]", false, "error", "error"},
		{"request.tools.exists(t, t.name == 'get_weather' && t.description == 'weather')", true, false, false},
		{"size(request.tools) == 0", false, true, true},
		{"type(messages[0]) == agentc.message", true, true, "error"},
	} {
		p, err := runtime.CompileChatPredicate(tc.src)
		require.NoError(t, err, tc.src)
		// Each call twice, in an order where a long transcript comes before
		// a shorter one and none.
		for _, c := range []struct {
			call *runtime.ChatCall
			want any
		}{{long, tc.long}, {short, tc.short}, {none, tc.none}, {long, tc.long}, {none, tc.none}, {short, tc.short}} {
			v, err := p.EvalChat(context.Background(), c.call, nil)
			if c.want == "error" {
				assert.Error(t, err, "%s over %d messages", tc.src, len(c.call.Request.Messages))
				continue
			}
			if assert.NoError(t, err, tc.src) {
				assert.Equal(t, c.want, v, "%s over %d messages", tc.src, len(c.call.Request.Messages))
			}
		}
	}
}

// BenchmarkEvalChat is the gateway's typical guard, a cost-tracked
// predicate over the messages, and a fallback's condition on the model.
func BenchmarkEvalChat(b *testing.B) {
	call := &runtime.ChatCall{Request: runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{
		{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "Where is my order A1234?"}}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, src := range []string{"messages.exists(m, m.content.contains('password'))", "request.model == 'primary'"} {
		p, err := runtime.CompileChatPredicate(src)
		require.NoError(b, err)
		b.Run(src, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.EvalChat(ctx, call, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A message's content, as a predicate reads it, holds the text an image
// part carries in place of an image (a data: URL or data of a text media
// type), as pii, security and content_filter read it, in the parts'
// order; an image's own bytes and a URL hold none.
func TestEvalChatContentReadsTheTextAnImagePartHolds(t *testing.T) {
	call := &runtime.ChatCall{Request: runtime.ChatRequest{Model: "m", Messages: []runtime.Message{
		{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartText, Text: "see"},
			{Type: runtime.PartImage, ImageURL: "data:text/plain,FORBIDDEN%20WORD"},
			{Type: runtime.PartImage, ImageURL: "data:image/png;base64,iVBORw0KGgo="},
			{Type: runtime.PartImage, ImageURL: "https://example.com/x.png?q=word"},
			{Type: runtime.PartImage, MediaType: "text/plain", Data: []byte("second")},
		}},
		{Role: "tool", ToolCallID: "c1", Parts: []runtime.ContentPart{
			{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "result"},
			{Type: runtime.PartImage, ToolCallID: "c1", ImageURL: "data:text/plain;base64,c2NyZWVu"},
		}},
	}}}
	for src, want := range map[string]bool{
		"messages[0].content == 'see\\nFORBIDDEN WORD\\nsecond'": true,
		"messages[1].content == 'result\\nscreen'":               true,
		"messages.exists(m, m.content.contains('word'))":         false,
	} {
		p, err := runtime.CompileChatPredicate(src)
		require.NoError(t, err, src)
		got, err := p.EvalChat(context.Background(), call, nil)
		require.NoError(t, err, src)
		assert.Equal(t, want, got, src)
	}
}

// A guard's m.content reads a message's text parts as the model reads
// them: adjacent plain texts run together (a Claude model reads separate
// text blocks so, a prompt-cache breakpoint between them or not, and
// OpenAI's API content parts), so "wire" and " transfer" split across
// them do not evade a deny on "wire transfer", and "wire" and "transfer"
// do not trigger one on "wire\ntransfer", which no model reads; where an
// image, a thinking block or a tool call stands between two texts, and
// between the texts of a tool message (one result, joined by line
// breaks), a line break does.
func TestEvalChatContentRunsTextPartsTogether(t *testing.T) {
	cc := &runtime.CacheControl{Type: "ephemeral"}
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	split := func(role string, a, b runtime.ContentPart) runtime.Message {
		return runtime.Message{Role: role, Parts: []runtime.ContentPart{a, b}}
	}
	breakpoint := text("wire")
	breakpoint.CacheControl = cc
	tests := map[string]struct {
		m    runtime.Message
		want string
	}{
		"user text parts":             {split("user", text("wire"), text("transfer")), "wiretransfer"},
		"a cache breakpoint":          {split("user", breakpoint, text("transfer")), "wiretransfer"},
		"assistant text parts":        {split("assistant", text("wire"), text("transfer")), "wiretransfer"},
		"system text parts":           {split("system", text("wire"), text("transfer")), "wiretransfer"},
		"content and a part":          {runtime.Message{Role: "user", Content: "wire", Parts: []runtime.ContentPart{text("transfer")}}, "wiretransfer"},
		"an image between":            {runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("wire"), {Type: runtime.PartImage, ImageURL: "https://example.com/a.png"}, text("transfer")}}, "wire\ntransfer"},
		"a thinking block between":    {runtime.Message{Role: "assistant", Parts: []runtime.ContentPart{text("wire"), {Type: runtime.PartThinking, Text: "t", Signature: "s"}, text("transfer")}}, "wire\ntransfer"},
		"a tool call between":         {runtime.Message{Role: "assistant", Parts: []runtime.ContentPart{text("wire"), text("transfer")}, ToolCalls: []runtime.ToolUse{{ID: "c", Name: "f", PartsAfter: 1}}}, "wire\ntransfer"},
		"a document and a text":       {split("user", runtime.ContentPart{Type: runtime.PartText, Document: true, Text: "wire"}, text("transfer")), "wire\ntransfer"},
		"a tool message's text parts": {runtime.Message{Role: "tool", ToolCallID: "c", Parts: []runtime.ContentPart{text("wire"), text("transfer")}}, "wire\ntransfer"},
	}
	together, _ := runtime.CompileChatPredicate("messages.exists(m, m.content.contains('wiretransfer'))")
	apart, _ := runtime.CompileChatPredicate("messages.exists(m, m.content.contains('wire\\ntransfer'))")
	for name, tt := range tests {
		call := &runtime.ChatCall{Request: runtime.ChatRequest{Model: "m", Messages: []runtime.Message{tt.m}}}
		got, err := together.EvalChat(context.Background(), call, nil)
		require.NoError(t, err, name)
		assert.Equal(t, tt.want == "wiretransfer", got, "%s: read run together", name)
		got, err = apart.EvalChat(context.Background(), call, nil)
		require.NoError(t, err, name)
		assert.Equal(t, tt.want == "wire\ntransfer", got, "%s: read apart", name)
	}
}

// TurnContents gives the last message of a turn (runtime.SentTurnEnd) the
// turn's texts run together, the others their own, and nil where every
// turn reads as its one message does, so that EvalChatTurns evaluates once.
func TestTurnContents(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "system", Content: "be"}, {Role: "system", Content: " brief"},
		{Role: "user", Content: "send a wire"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "c1", Content: "wire"}, {Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: " transfer"}}},
		{Role: "assistant", Content: "done"},
	}
	assert.Equal(t, []string{"be", "be brief", "send a wire", "", "wire", "wire transfer", "done"}, runtime.TurnContents(msgs))
	assert.Nil(t, runtime.TurnContents([]runtime.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello"}, {Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "a"}, {Type: runtime.PartText, Text: "b"}}}}))
	// A tool_result block and the text after it, in one message, run together.
	assert.Equal(t, []string{"wire transfer"}, runtime.TurnContents([]runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
		{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "wire"}, {Type: runtime.PartText, Text: " transfer"}}}}))

	// The texts read are at most twice those sent, however many messages a turn holds.
	many := make([]runtime.Message, 1000)
	for i := range many {
		many[i] = runtime.Message{Role: "tool", ToolCallID: "c", Content: "0123456789"}
	}
	total := 0
	for _, c := range runtime.TurnContents(many) {
		total += len(c)
	}
	assert.Equal(t, 2*10*len(many)-10, total)

	p, err := runtime.CompileChatPredicate("request.messages.exists(m, m.content.contains('wire transfer'))")
	require.NoError(t, err)
	asSent, whole, err := p.EvalChatTurns(context.Background(), &runtime.ChatCall{Request: runtime.ChatRequest{Messages: msgs}}, nil)
	require.NoError(t, err)
	assert.False(t, asSent)
	assert.True(t, whole)
}

// TurnContents reads the boundaries a message's own content reads
// (predicateContent): where an image, a thinking block, a tool call or a
// document stands between two texts of a turn, in one message or across
// two, a line break does, as it does in m.content, and a tool message's
// text parts are one result, joined by line breaks; only texts the model
// reads as adjacent run together.
func TestTurnContentsKeepsBoundaries(t *testing.T) {
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	image := runtime.ContentPart{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"}
	thinking := runtime.ContentPart{Type: runtime.PartThinking, Text: "t", Signature: "s"}
	call := runtime.ToolUse{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{}`)}
	// One message: read as its content reads, so no second reading.
	for name, m := range map[string]runtime.Message{
		"an image between":   {Role: "user", Parts: []runtime.ContentPart{text("wire"), image, text("transfer")}},
		"a thinking between": {Role: "assistant", Parts: []runtime.ContentPart{text("wire"), thinking, text("transfer")}},
		"a document":         {Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Document: true, Text: "wire"}, text("transfer")}},
		"a tool message":     {Role: "tool", ToolCallID: "c1", Parts: []runtime.ContentPart{text("wire"), text("transfer")}},
	} {
		assert.Nil(t, runtime.TurnContents([]runtime.Message{m}), name)
	}
	tests := map[string]struct {
		msgs []runtime.Message
		want string
	}{
		"an image ends the first": {[]runtime.Message{{Role: "user", Parts: []runtime.ContentPart{text("wire"), image}},
			{Role: "user", Content: "transfer"}}, "wire\ntransfer"},
		"an image starts the second": {[]runtime.Message{{Role: "user", Content: "wire"},
			{Role: "user", Parts: []runtime.ContentPart{image, text("transfer")}}}, "wire\ntransfer"},
		"a tool call ends the first": {[]runtime.Message{{Role: "assistant", Content: "wire", ToolCalls: []runtime.ToolUse{call}},
			{Role: "assistant", Content: "transfer"}}, "wire\ntransfer"},
		"a tool message's parts": {[]runtime.Message{{Role: "tool", ToolCallID: "c1", Parts: []runtime.ContentPart{text("wire"), text("transfer")}},
			{Role: "user", Content: " now"}}, "wire\ntransfer now"},
		"adjacent texts": {[]runtime.Message{{Role: "user", Parts: []runtime.ContentPart{image, text("wire")}},
			{Role: "user", Content: "transfer"}}, "wiretransfer"},
	}
	for name, tt := range tests {
		contents := runtime.TurnContents(tt.msgs)
		require.Len(t, contents, len(tt.msgs), name)
		assert.Equal(t, tt.want, contents[len(contents)-1], name)
	}
}

// Anthropic's API sends the system messages, wherever they sit, as the
// blocks of one system prompt (as pii and redact read them): TurnContents
// gives the last of them, when they are not one turn, their texts run
// together.
func TestTurnContentsReadsTheSystemPromptWhole(t *testing.T) {
	msgs := []runtime.Message{{Role: "system", Content: "please send a wire"}, {Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello"}, {Role: "system", Content: " transfer"}, {Role: "user", Content: "ok"}}
	assert.Equal(t, []string{"please send a wire", "hi", "hello", "please send a wire transfer", "ok"}, runtime.TurnContents(msgs))
	p, err := runtime.CompileChatPredicate("messages.exists(m, m.role == 'system' && m.content.contains('wire transfer'))")
	require.NoError(t, err)
	asSent, whole, err := p.EvalChatTurns(context.Background(), &runtime.ChatCall{Request: runtime.ChatRequest{Messages: msgs}}, nil)
	require.NoError(t, err)
	assert.False(t, asSent)
	assert.True(t, whole)
}

// A provider sends a message's tool_result parts before its own text
// (Anthropic's API as the first blocks of the user turn, OpenAI's as tool
// messages before the user's), whatever their place among the parts: the
// turn's text reads them so, as pii and redact do, and a phrase cut across
// a result and the user's text is read as the model reads it, the text
// before or after the result in the parts.
func TestTurnContentsReadTheResultsFirst(t *testing.T) {
	result := runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "wire"}
	text := runtime.ContentPart{Type: runtime.PartText, Text: " transfer"}
	for name, m := range map[string]runtime.Message{
		"result first":       {Role: "user", Parts: []runtime.ContentPart{result, text}},
		"text first":         {Role: "user", Parts: []runtime.ContentPart{text, result}},
		"content and result": {Role: "user", Content: " transfer", Parts: []runtime.ContentPart{result}},
	} {
		assert.Equal(t, []string{"wire transfer"}, runtime.TurnContents([]runtime.Message{m}), name)
	}
	// Two results and the text between them: the results, in order, then the text.
	m := runtime.Message{Role: "user", Parts: []runtime.ContentPart{
		{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "send a "}, text,
		{Type: runtime.PartToolResult, ToolCallID: "c2", Text: "wire"}}}
	assert.Equal(t, []string{"send a wire transfer"}, runtime.TurnContents([]runtime.Message{m}))
	// An image of a result is read with it, a boundary after its text.
	m = runtime.Message{Role: "user", Parts: []runtime.ContentPart{text, result,
		{Type: runtime.PartImage, ToolCallID: "c1", ImageURL: "https://example.com/a.png"}}}
	assert.Equal(t, []string{"wire\n transfer"}, runtime.TurnContents([]runtime.Message{m}))

	p, err := runtime.CompileChatPredicate("messages.exists(m, m.content.contains('wire transfer'))")
	require.NoError(t, err)
	asSent, whole, err := p.EvalChatTurns(context.Background(), &runtime.ChatCall{Request: runtime.ChatRequest{Messages: []runtime.Message{
		{Role: "user", Parts: []runtime.ContentPart{text, result}}}}}, nil)
	require.NoError(t, err)
	assert.False(t, asSent)
	assert.True(t, whole)
}

// A conversation reads the same to a guard whichever route brought it:
// Anthropic's (a user message holding tool_result blocks beside the
// user's text) and OpenAI's (tool messages, then the user's). An empty
// text block beside the results (a prompt-cache breakpoint's, which the
// provider leaves out) read as a user message of no text, which held the
// turn's text in the whole reading; a turn whose one message, split into
// tool and user messages, read its text as the whole message did was
// not read whole at all; and a tool message ending in an image ran its
// text on into the user's where the tool_result's image stands between
// them.
func TestGuardsReadToolResultsBesideTextAlikeOnEveryRoute(t *testing.T) {
	call := runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)}}}
	result := runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "a", Text: "wire"}
	held := runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:text/plain,xx"}
	photo := runtime.ContentPart{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"}
	text := runtime.ContentPart{Type: runtime.PartText, Text: " transfer"}
	of := func(p runtime.ContentPart) runtime.ContentPart { p.ToolCallID = "a"; return p }
	for _, c := range []struct {
		name             string
		anthropic        runtime.Message
		openai           []runtime.Message
		asSent, turnRead string
	}{{
		name:      "a result and an empty text with a breakpoint",
		anthropic: runtime.Message{Role: "user", Parts: []runtime.ContentPart{result, {Type: runtime.PartText, CacheControl: &runtime.CacheControl{}}}},
		openai:    []runtime.Message{{Role: "tool", ToolCallID: "a", Content: "wire"}},
		asSent:    "tool(a)wire", turnRead: "tool(a)wire",
	}, {
		name:      "a result, the text its image holds, the user's text",
		anthropic: runtime.Message{Role: "user", Parts: []runtime.ContentPart{result, of(held), text}},
		openai:    []runtime.Message{{Role: "tool", ToolCallID: "a", Content: "wire", Parts: []runtime.ContentPart{held}}, {Role: "user", Content: " transfer"}},
		asSent:    "tool(a)wire\nxx|user() transfer", turnRead: "tool(a)wire\nxx|user()wire\nxx\n transfer",
	}, {
		name:      "a result, its image, the user's text",
		anthropic: runtime.Message{Role: "user", Parts: []runtime.ContentPart{result, of(photo), text}},
		openai:    []runtime.Message{{Role: "tool", ToolCallID: "a", Content: "wire", Parts: []runtime.ContentPart{photo}}, {Role: "user", Content: " transfer"}},
		asSent:    "tool(a)wire|user() transfer", turnRead: "tool(a)wire|user()wire\n transfer",
	}, {
		name:      "a result and the user's text",
		anthropic: runtime.Message{Role: "user", Parts: []runtime.ContentPart{result, text}},
		openai:    []runtime.Message{{Role: "tool", ToolCallID: "a", Content: "wire"}, {Role: "user", Content: " transfer"}},
		asSent:    "tool(a)wire|user() transfer", turnRead: "tool(a)wire|user()wire transfer",
	}} {
		// view holds when the messages read are want's, each
		// ROLE(TOOL_CALL_ID)CONTENT, after the user's and the call's.
		view := func(want string) *runtime.Predicate {
			msgs := strings.Split("user()go|assistant()|"+want, "|")
			expr := fmt.Sprintf("size(messages) == %d", len(msgs))
			for i, m := range msgs {
				role, rest, _ := strings.Cut(m, "(")
				id, content, _ := strings.Cut(rest, ")")
				expr += fmt.Sprintf(" && messages[%d].role == %s && messages[%d].tool_call_id == %s && messages[%d].content == %s",
					i, strconv.Quote(role), i, strconv.Quote(id), i, strconv.Quote(content))
			}
			p, err := runtime.CompileChatPredicate(expr)
			require.NoError(t, err)
			return p
		}
		for route, msgs := range map[string][]runtime.Message{
			"anthropic": {{Role: "user", Content: "go"}, call, c.anthropic},
			"openai":    append([]runtime.Message{{Role: "user", Content: "go"}, call}, c.openai...),
		} {
			call := &runtime.ChatCall{Request: runtime.ChatRequest{Messages: msgs}}
			asSent, _, err := view(c.asSent).EvalChatTurns(context.Background(), call, nil)
			require.NoError(t, err)
			assert.True(t, asSent, "%s, %s: as sent", c.name, route)
			_, whole, err := view(c.turnRead).EvalChatTurns(context.Background(), call, nil)
			require.NoError(t, err)
			assert.True(t, whole, "%s, %s: the turn whole", c.name, route)
		}
	}
}

// A turn of tool results that reads whole as it reads sent (the results
// alone, or with an empty text a prompt-cache breakpoint marks) needs no
// second reading: every request of an Anthropic tool loop ends in one, and
// its guards were evaluated twice over the same view, where the OpenAI
// route's tool messages are evaluated once.
func TestTurnContentsOfResultsReadAsSentIsNil(t *testing.T) {
	call := runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)}}}
	result := runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "a", Text: "wire"}
	for name, m := range map[string]runtime.Message{
		"a result":                   {Role: "user", Parts: []runtime.ContentPart{result}},
		"a result and an empty text": {Role: "user", Parts: []runtime.ContentPart{result, {Type: runtime.PartText, CacheControl: &runtime.CacheControl{}}}},
	} {
		msgs := []runtime.Message{{Role: "user", Content: "go"}, call, m, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "more"}, call, m}
		assert.Nil(t, runtime.TurnContents(msgs), name)
	}
	// Where the whole reading differs, the results read before hold their own.
	msgs := []runtime.Message{{Role: "user", Content: "go"}, call, {Role: "user", Parts: []runtime.ContentPart{result}}, call,
		{Role: "user", Parts: []runtime.ContentPart{result, {Type: runtime.PartText, Text: " transfer"}}}}
	assert.Equal(t, []string{"go", "", "wire", "", "wire transfer"}, runtime.TurnContents(msgs))
}

// BenchmarkEvalChatTurnsToolLoop is a guard over a request of a tool loop
// on each route: Anthropic's results in a user message, OpenAI's tool
// messages.
func BenchmarkEvalChatTurnsToolLoop(b *testing.B) {
	call := runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)}}}
	p, err := runtime.CompileChatPredicate("messages.exists(m, m.content.contains('password'))")
	require.NoError(b, err)
	for route, last := range map[string]runtime.Message{
		"anthropic": {Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "a", Text: "sunny in Lyon"}}},
		"openai":    {Role: "tool", ToolCallID: "a", Content: "sunny in Lyon"},
	} {
		c := &runtime.ChatCall{Request: runtime.ChatRequest{Messages: []runtime.Message{
			{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "Weather in Lyon?"}, call, last}}}
		b.Run(route, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.EvalChatTurns(context.Background(), c, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
