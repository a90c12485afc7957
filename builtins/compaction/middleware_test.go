package compaction_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// recorder is a model that records the transcripts it receives and answers
// with text (or fails with err).
type recorder struct {
	mu   sync.Mutex
	seen [][]runtime.Message
	text string
	err  error
}

func (m *recorder) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.mu.Lock()
	m.seen = append(m.seen, append([]runtime.Message(nil), req.Messages...))
	m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	yield(runtime.Delta{Text: m.text})
	return nil
}

func long(i int) string { return fmt.Sprintf("message %d ", i) + strings.Repeat("word ", 40) }

// transcript: system, then rounds of user / assistant (with a tool result
// without id after the assistant every third round).
func transcript(rounds int) []runtime.Message {
	msgs := []runtime.Message{{Role: "system", Content: "you are helpful"}}
	for i := range rounds {
		msgs = append(msgs, runtime.Message{Role: "user", Content: long(i)}, runtime.Message{Role: "assistant", Content: long(i)})
		if i%3 == 0 {
			msgs = append(msgs, runtime.Message{Role: "tool", Content: long(i), ToolCallID: fmt.Sprintf("call-%d", i)})
		}
	}
	return msgs
}

func build(t *testing.T, cfg string, models map[string]runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("compaction", cfg)}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: models})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

// checkUnits asserts that every tool message follows an assistant message
// (its call is never orphaned).
func checkUnits(t *testing.T, msgs []runtime.Message) {
	t.Helper()
	seenAssistant := false
	for i, m := range msgs {
		switch m.Role {
		case "assistant":
			seenAssistant = true
		case "tool":
			assert.True(t, seenAssistant, "tool message %d has no assistant before it", i)
			assert.NotEqual(t, "user", msgs[i-1].Role, "tool message %d was separated from its call", i)
		}
	}
}

func TestKeepRecent(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":300,"keep_recent":3}`, map[string]runtime.ModelClient{"primary": model})
	msgs := transcript(12)
	orig := append([]runtime.Message(nil), msgs...)
	require.Greater(t, runtime.EstimateMessages(msgs), int64(300))

	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, orig, msgs, "the caller's transcript is untouched")
	require.Len(t, model.seen, 1)
	got := model.seen[0]
	assert.LessOrEqual(t, runtime.EstimateMessages(got), int64(300))
	assert.Equal(t, "system", got[0].Role, "system messages are kept")
	assert.Equal(t, orig[len(orig)-1], got[len(got)-1], "the most recent message is kept")
	checkUnits(t, got)

	// Idempotent: compacting the compacted transcript changes nothing.
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: got})
	require.NoError(t, err)
	assert.Equal(t, got, model.seen[1])
}

func TestWithinBudgetPassesThrough(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{}`, map[string]runtime.ModelClient{"primary": model})
	msgs := transcript(2)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, msgs, model.seen[0])
}

func TestToolMessagesWithoutIDsStayWithTheirCall(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":120,"keep_recent":1}`, map[string]runtime.ModelClient{"primary": model})
	msgs := []runtime.Message{
		{Role: "tool", Content: "orphan before any call"},
		{Role: "user", Content: long(1)},
		{Role: "assistant", Content: "calling"},
		{Role: "tool", Content: long(2)},
		{Role: "tool", Content: "second result"},
	}
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0]
	assert.Equal(t, []runtime.Message{msgs[1], msgs[2], msgs[3], msgs[4]}, got,
		"the protected tool result keeps its assistant and sibling, and the user message before them; the orphan goes")
}

func TestSummarize(t *testing.T) {
	model := &recorder{text: "ok"}
	summarizer := &recorder{text: "the user asked about refunds"}
	pl := build(t, `{"strategy":"summarize","model":"small","max_tokens":300,"keep_recent":3}`,
		map[string]runtime.ModelClient{"primary": model, "small": summarizer})
	msgs := transcript(12)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, summarizer.seen, 1, "the summary model is called once")
	assert.Contains(t, summarizer.seen[0][1].Content, "message 0")
	got := model.seen[0]
	assert.LessOrEqual(t, runtime.EstimateMessages(got), int64(300))
	var summaries int
	for _, m := range got {
		if m.Name == compaction.SummaryName {
			summaries++
			assert.Equal(t, compaction.SummaryPrefix+"the user asked about refunds", m.Content)
		}
	}
	assert.Equal(t, 1, summaries)
	checkUnits(t, got)

	// Idempotent: the output is within budget, so no second summary.
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: got})
	require.NoError(t, err)
	assert.Equal(t, got, model.seen[1])
	assert.Len(t, summarizer.seen, 1)
}

// A summary call that fails, answers nothing, or writes a summary that does
// not fit (a summary model that runs on, or repeats what it was given) falls
// back to keep_recent: the transcript stays within its budget.
func TestSummaryFailureFallsBackToKeepRecent(t *testing.T) {
	for name, summarizer := range map[string]*recorder{
		"error": {err: errors.New("down")},
		"empty": {text: " \n "},
		"huge":  {text: strings.Repeat("and then ", 20000)},
	} {
		t.Run(name, func(t *testing.T) {
			model := &recorder{text: "ok"}
			pl := build(t, `{"strategy":"summarize","model":"small","max_tokens":300,"keep_recent":3}`,
				map[string]runtime.ModelClient{"primary": model, "small": summarizer})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(12)})
			require.NoError(t, err)
			assert.LessOrEqual(t, runtime.EstimateMessages(model.seen[0]), int64(300))
			for _, m := range model.seen[0] {
				assert.NotEqual(t, compaction.SummaryName, m.Name)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []string{`{"strategy":"summarize"}`, `{"strategy":"summarize","model":"nope"}`,
		`{"strategy":"drop"}`, `{"max_tokens":0}`, `{"keep_recent":0}`, `{"x":1}`} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("compaction", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}

func TestImportanceLayerKeepsPinnedAndFirstUserTurn(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"strategy":"importance","max_tokens":200,"keep_recent":2}`, map[string]runtime.ModelClient{"primary": model})
	msgs := transcript(10)
	msgs[6].Metadata = map[string]string{compaction.PinKey: "true"}
	pinned, first := msgs[6].Content, msgs[1].Content
	require.Greater(t, runtime.EstimateMessages(msgs), int64(200))
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	seen := model.seen[0]
	assert.Less(t, len(seen), len(msgs))
	var texts []string
	for _, m := range seen {
		texts = append(texts, m.Content)
	}
	assert.Equal(t, "system", seen[0].Role)
	assert.Contains(t, texts, first, "the first user turn is kept")
	assert.Contains(t, texts, pinned, "the pinned message is kept")
	assert.Equal(t, msgs[len(msgs)-1].Content, texts[len(texts)-1])
	checkUnits(t, seen)

	kr := &recorder{text: "ok"}
	plain := build(t, `{"max_tokens":200,"keep_recent":2}`, map[string]runtime.ModelClient{"primary": kr})
	msgs[6].Metadata = nil
	_, err = plain.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	for _, m := range kr.seen[0] {
		assert.NotEqual(t, first, m.Content, "keep_recent drops the first user turn under the same budget")
	}
}

func TestMaxMessagesValidates(t *testing.T) {
	known, err := runtime.ValidateConfig("compaction", []byte(`{"strategy":"rank"}`))
	assert.True(t, known)
	assert.ErrorContains(t, err, `"keep_recent", "summarize" or "importance"`)

	// A plan written by hand is held to the bound vet holds a policy to: the
	// keep_recent messages are always kept, so a lower max_messages could
	// never hold.
	_, err = runtime.ValidateConfig("compaction", []byte(`{"max_messages":2,"keep_recent":6}`))
	assert.ErrorContains(t, err, "max_messages 2 is below keep_recent 6")
	_, err = runtime.ValidateConfig("compaction", []byte(`{"max_messages":6,"keep_recent":6}`))
	assert.NoError(t, err)
}

func TestCompactedTranscriptIsHandedBack(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":300,"keep_recent":3}`, map[string]runtime.ModelClient{"primary": model})
	msgs := transcript(12)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got, ok := compaction.CompactedOf(resp, "compaction")
	require.True(t, ok)
	assert.Equal(t, model.seen[0], got.Messages, "the host gets the transcript the model was sent")
	assert.Equal(t, len(msgs)-len(got.Messages), got.Dropped)
	assert.Positive(t, got.Dropped)

	// Continuing from it compacts nothing more: no annotation.
	again, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: got.Messages})
	require.NoError(t, err)
	_, ok = compaction.CompactedOf(again, "compaction")
	assert.False(t, ok)
	assert.Equal(t, got.Messages, model.seen[1])
}

func TestHandedBackSummaryIsPaidOnce(t *testing.T) {
	model := &recorder{text: "ok"}
	summarizer := &recorder{text: "the user asked about refunds"}
	pl := build(t, `{"strategy":"summarize","model":"small","max_tokens":300,"keep_recent":3}`,
		map[string]runtime.ModelClient{"primary": model, "small": summarizer})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(12)})
	require.NoError(t, err)
	got, ok := compaction.CompactedOf(resp, "compaction")
	require.True(t, ok)
	require.Len(t, summarizer.seen, 1)
	next := append(got.Messages, runtime.Message{Role: "user", Content: "and then?"})
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: next})
	require.NoError(t, err)
	assert.Len(t, summarizer.seen, 1, "continuing from the handed-back transcript writes no new summary")
	assert.Equal(t, compaction.SummaryName, model.seen[1][1].Name)
}

// An agent turn's assistant message with thinking (RunAgent's shape: the
// signed blocks as parts, the calls in place among them) is kept whole
// with its results: an Anthropic model refuses a tool-use continuation
// whose last assistant turn lost a signed block or its order.
func TestCompactionKeepsTheLastTurnsThinking(t *testing.T) {
	for _, strategy := range []string{`"keep_recent"`, `"importance"`} {
		model := &recorder{text: "ok"}
		pl := build(t, `{"strategy":`+strategy+`,"max_tokens":200,"keep_recent":1}`, map[string]runtime.ModelClient{"primary": model})
		turn := runtime.Message{Role: "assistant",
			Parts: []runtime.ContentPart{
				{Type: runtime.PartThinking, Text: long(90), Signature: "sig-A"},
				{Type: runtime.PartRedactedThinking, Signature: "opaque=="},
				{Type: runtime.PartText, Text: "And Lyon."},
			},
			ToolCalls: []runtime.ToolUse{
				{ID: "c1", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris"}`), PartsAfter: 2},
				{ID: "c2", Name: "weather", Arguments: json.RawMessage(`{"city":"Lyon"}`)},
			},
		}
		msgs := append(transcript(6), runtime.Message{Role: "user", Content: "Paris and Lyon?"}, turn,
			runtime.Message{Role: "tool", ToolCallID: "c1", Content: "sunny"},
			runtime.Message{Role: "tool", ToolCallID: "c2", Content: "rain"})
		_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
		require.NoError(t, err)
		got := model.seen[0]
		require.Less(t, len(got), len(msgs), strategy)
		require.GreaterOrEqual(t, len(got), 3, strategy)
		assert.Equal(t, msgs[len(msgs)-3:], got[len(got)-3:], strategy)
	}
}
