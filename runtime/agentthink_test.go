package runtime_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func think(index int, text, sig string) runtime.Delta {
	return runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: index, Text: text, Signature: sig}}
}

func callFragment(index int, id, name, args string) runtime.Delta {
	return runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: index, ID: id, Name: name, Arguments: args}}}
}

// blockOrder lists a message's blocks as Message.Blocks yields them: a
// part's type (and text or signature), or a call's id.
func blockOrder(m *runtime.Message) []string {
	var out []string
	for j, k := range m.Blocks() {
		if k >= 0 {
			out = append(out, "call "+m.ToolCalls[k].ID)
			continue
		}
		p := m.Parts[j]
		switch p.Type {
		case runtime.PartText:
			out = append(out, "text "+p.Text)
		default:
			out = append(out, p.Type+" "+p.Signature)
		}
	}
	return out
}

func weatherAgent(t *testing.T, model runtime.ModelClient) *runtime.Pipeline {
	weather := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		return "sunny in " + c.Args["city"].(string), nil
	}
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"weather": {}}
	return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"weather": weather}})
}

// The assistant message a step sends back carries the model's thinking
// blocks, signatures intact, its text and its tool calls in the order they
// streamed, interleaved thinking between the calls: an Anthropic model with
// thinking refuses a tool-use continuation without them.
func TestRunAgentSendsThinkingBackInPlace(t *testing.T) {
	redacted := runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: 2, Redacted: true, Signature: "opaque=="}}
	step1 := []runtime.Delta{
		think(0, "The user wants", ""), think(0, " two cities.", ""), think(0, "", "sig-A"),
		{Text: "Looking "}, {Text: "up Paris."},
		callFragment(0, "c1", "weather", `{"city":`), callFragment(0, "", "", `"Paris"}`),
		think(1, "Now Tokyo.", ""), think(1, "", "sig-B"),
		redacted,
		// One delta of thinking, text and a call: in that order.
		{Thinking: &runtime.ThinkingDelta{Index: 3, Text: "Last.", Signature: "sig-D"}, Text: "And Tokyo.",
			ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "c2", Name: "weather", Arguments: `{"city":"Tokyo"}`}}},
		{FinishReason: runtime.FinishToolCalls},
	}
	model := rt.NewModel(rt.Response{Stream: step1}, rt.Response{Deltas: []string{"Sunny both."}})
	res, err := weatherAgent(t, model).RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "Paris and Tokyo?"})
	require.NoError(t, err)
	assert.Equal(t, "Sunny both.", res.Output)
	assert.Equal(t, "Looking up Paris.\nAnd Tokyo.", res.Messages[1].Text(), "two text parts")

	want := []string{
		"thinking sig-A", "text Looking up Paris.", "call c1",
		"thinking sig-B", "redacted_thinking opaque==",
		"thinking sig-D", "text And Tokyo.", "call c2",
	}
	reqs := model.Requests()
	require.Len(t, reqs, 2)
	sent := reqs[1].Messages[1]
	assert.Equal(t, "assistant", sent.Role)
	assert.Equal(t, want, blockOrder(&sent))
	assert.Empty(t, sent.Content, "the text is in its parts, after the thinking")
	require.Len(t, sent.Parts, 6)
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartThinking, Text: "The user wants two cities.", Signature: "sig-A"}, sent.Parts[0])
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartRedactedThinking, Signature: "opaque=="}, sent.Parts[3])
	assert.JSONEq(t, `{"city":"Paris"}`, string(sent.ToolCalls[0].Arguments))
	assert.Equal(t, want, blockOrder(&res.Messages[1]), "the transcript keeps them too")

	// The transcript a checkpoint saves (JSON) keeps the order and the
	// signatures.
	b, err := json.Marshal(res.Messages)
	require.NoError(t, err)
	var back []runtime.Message
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, res.Messages, back)
}

// An answer without thinking keeps its text as Content, the calls after
// it, as before.
func TestRunAgentWithoutThinkingKeepsContent(t *testing.T) {
	model := rt.NewModel(
		rt.Response{Stream: []runtime.Delta{{Text: "Checking."}, callFragment(0, "c1", "weather", `{"city":"Paris"}`), {Text: " More."}}},
		rt.Response{Deltas: []string{"Sunny."}})
	res, err := weatherAgent(t, model).RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "Paris?"})
	require.NoError(t, err)
	m := res.Messages[1]
	assert.Equal(t, "Checking. More.", m.Content)
	assert.Empty(t, m.Parts)
	assert.Equal(t, []runtime.ToolUse{use("c1", "weather", `{"city":"Paris"}`)}, m.ToolCalls)
}

// A turn resumed from a saved transcript whose last assistant message holds
// thinking and a call without a result sends that message back unchanged.
func TestRunAgentResumedKeepsThinking(t *testing.T) {
	cut := runtime.Message{Role: "assistant",
		Parts: []runtime.ContentPart{
			{Type: runtime.PartThinking, Text: "Paris.", Signature: "sig-A"},
			{Type: runtime.PartThinking, Text: "Then.", Signature: "sig-B"},
		},
		ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris"}`), PartsAfter: 1}},
	}
	b, err := json.Marshal([]runtime.Message{{Role: "user", Content: "Paris?"}, cut})
	require.NoError(t, err)
	var saved []runtime.Message
	require.NoError(t, json.Unmarshal(b, &saved))

	model := rt.NewModel(rt.Response{Deltas: []string{"Sunny."}})
	res, err := weatherAgent(t, model).RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: saved})
	require.NoError(t, err)
	assert.Equal(t, "Sunny.", res.Output)
	reqs := model.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, cut, reqs[0].Messages[1])
	assert.Equal(t, []string{"thinking sig-A", "call c1", "thinking sig-B"}, blockOrder(&reqs[0].Messages[1]))
}

// Through the Anthropic provider: a step answered with interleaved
// thinking (a recorded stream) is continued with a request whose assistant
// message holds each thinking block, its signature, before the tool_use it
// preceded.
func TestRunAgentAnthropicThinkingContinuation(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: anthropicSSE(t, "interleaved_thinking.sse")}, ssetest.Reply{Body: anthropicSSE(t, "text.sse")})
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", BaseURL: s.URL})
	require.NoError(t, err)
	weather := func(_ context.Context, c *runtime.ToolCall) (any, error) { return "sunny", nil }
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": c},
		Tools: map[string]runtime.ToolFunc{"get_weather": weather}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "Weather in Paris and Lyon?",
		Params: runtime.ChatRequest{MaxTokens: 2048, Thinking: &runtime.Thinking{Type: "enabled", BudgetTokens: 1024}}})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Steps)

	bodies := s.Bodies()
	require.Len(t, bodies, 2)
	var body struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(bodies[1], &body))
	require.Len(t, body.Messages, 3)
	assert.Equal(t, "assistant", body.Messages[1].Role)
	var blocks []string
	for _, raw := range body.Messages[1].Content {
		blocks = append(blocks, string(raw))
	}
	assert.Equal(t, []string{
		`{"type":"thinking","thinking":"The user wants the weather in Paris and in Lyon. Weather first.","signature":"EuYBCkQYAiJAQ7nM2kP4sV9hT1cX0bZ8rW3yL6fJ5dA2gE9uK7oN1pR4tS8vY0wB3xC6zD9eF2hG5jI8lM1nO4qP7rU0sA=="}`,
		`{"type":"tool_use","id":"toolu_01Wx7bQe3RkL9mNpVt2yZc4F","name":"get_weather","input":{"location":"Paris"}}`,
		`{"type":"thinking","thinking":"Paris is asked for; Lyon next, in the same unit.","signature":"EpMCCkYIBRgCKkDx4Lr9QmT2vN8cH5kP1sW7yJ3bG6fA0dE9uZ2oX4iR8tV1nM5qC7wL3hK6jS0gY9pB2eF4aU8zD1mI5rO=="}`,
		`{"type":"text","text":"And Lyon."}`,
		`{"type":"tool_use","id":"toolu_01Kd4sHn8TfG2jRwXq6vBm9P","name":"get_weather","input":{"location":"Lyon"}}`,
	}, blocks)
}

// anthropicSSE is a recorded stream of the Anthropic provider's testdata.
func anthropicSSE(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../providers/anthropic/testdata/" + name)
	require.NoError(t, err)
	return string(b)
}

// A thinking fragment's index far beyond the blocks seen is refused, not
// grown to: a model client (or a scenario) that sends index 1e9 would
// otherwise have the builder allocate a billion blocks. An index a few
// blocks ahead (blocks left out between) is still taken.
func TestThinkingBuilderRefusesAnIndexFarBeyondTheBlocks(t *testing.T) {
	var b runtime.ThinkingBuilder
	d := think(0, "first", "sig-0")
	require.NoError(t, b.Add(&d))
	d = think(1+runtime.MaxThinkingIndexSkip, "skipped some", "sig-x")
	require.NoError(t, b.Add(&d), "the most blocks one fragment may skip")
	assert.Len(t, b.Blocks(), 2+runtime.MaxThinkingIndexSkip)

	d = think(1e9, "far", "")
	err := b.Add(&d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "thinking fragment index 1000000000")
	assert.Contains(t, err.Error(), "18 blocks seen")
	assert.Len(t, b.Blocks(), 2+runtime.MaxThinkingIndexSkip, "nothing grown")

	// Through a call and a turn: the call fails with that error.
	model := func() *rt.Model {
		return rt.NewModel(rt.Response{Stream: []runtime.Delta{think(0, "a", ""), think(1e9, "b", ""), {Text: "never read"}}})
	}
	pl := weatherAgent(t, model())
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "thinking fragment index 1000000000")

	s := weatherAgent(t, model()).Chat(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	var last error
	for _, err := range s.All() {
		last = err
	}
	require.Error(t, last)
	assert.Contains(t, last.Error(), "thinking fragment index 1000000000")

	_, err = weatherAgent(t, model()).RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "thinking fragment index 1000000000")
}
