package compaction_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

func call(id, name string) runtime.ToolUse {
	return runtime.ToolUse{ID: id, Name: name, Arguments: json.RawMessage(`{"q":"x"}`)}
}

// assertPaired asserts that every tool result in msgs answers a call an
// earlier assistant message of msgs requested, and every requested call
// has its result.
func assertPaired(t *testing.T, msgs []runtime.Message) {
	t.Helper()
	requested := map[string]bool{}
	answered := map[string]bool{}
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			requested[tc.ID] = true
		}
		if m.Role == "tool" {
			assert.True(t, requested[m.ToolCallID], "tool message %d answers %q, which no kept message requested", i, m.ToolCallID)
			answered[m.ToolCallID] = true
		}
		for _, p := range m.Parts {
			if p.Type == runtime.PartToolResult {
				assert.True(t, requested[p.ToolCallID], "message %d answers %q, which no kept message requested", i, p.ToolCallID)
				answered[p.ToolCallID] = true
			}
		}
	}
	for id := range requested {
		assert.True(t, answered[id], "call %q lost its result", id)
	}
}

func TestToolCallsStayWithTheirResultsByID(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "system", Content: "you are helpful"},
		{Role: "user", Content: long(0)},
		// OpenAI shape: parallel calls, results as tool messages.
		{Role: "assistant", ToolCalls: []runtime.ToolUse{call("call_a", "search"), call("call_b", "fetch")}},
		{Role: "tool", ToolCallID: "call_a", Content: long(1)},
		{Role: "tool", ToolCallID: "call_b", Content: long(2)},
		{Role: "assistant", Content: long(3)},
		{Role: "user", Content: long(4)},
		// Anthropic shape: results as tool_result parts of a user message.
		{Role: "assistant", Content: "checking", ToolCalls: []runtime.ToolUse{call("toolu_1", "search")}},
		{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartToolResult, ToolCallID: "toolu_1", Text: long(5)},
			{Type: runtime.PartText, Text: "and also this"},
		}},
		{Role: "tool", ToolCallID: "call_never_requested", Content: "orphan"},
		{Role: "assistant", Content: "done"},
	}
	orig := append([]runtime.Message(nil), msgs...)
	for _, keep := range []int{1, 2, 3, 5, 8} {
		for _, budget := range []int{60, 150, 300, 1000} {
			model := &recorder{text: "ok"}
			pl := build(t, `{"max_tokens":`+itoa(budget)+`,"keep_recent":`+itoa(keep)+`}`, map[string]runtime.ModelClient{"primary": model})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
			require.NoError(t, err)
			got := model.seen[0]
			assertPaired(t, got)
			assert.Equal(t, orig, msgs, "the caller's transcript is untouched")
			for _, m := range got {
				assert.NotEqual(t, "call_never_requested", m.ToolCallID, "the orphan is dropped")
			}
		}
	}

	// keep_recent 2 protects the user message carrying toolu_1's result:
	// its assistant message stays, parts and calls as they were, after the
	// user message that asked for it.
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":100,"keep_recent":2}`, map[string]runtime.ModelClient{"primary": model})
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, []runtime.Message{msgs[0], msgs[6], msgs[7], msgs[8], msgs[10]}, model.seen[0])
}

func TestSummaryDescribesToolCallsAndParts(t *testing.T) {
	summarizer := &recorder{text: "they searched"}
	model := &recorder{text: "ok"}
	pl := build(t, `{"strategy":"summarize","model":"backup","max_tokens":80,"keep_recent":1}`,
		map[string]runtime.ModelClient{"primary": model, "backup": summarizer})
	msgs := []runtime.Message{
		{Role: "user", Content: long(0)},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{call("call_a", "search")}},
		{Role: "tool", ToolCallID: "call_a", Content: "result text"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: long(1)}}},
	}
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, summarizer.seen, 1)
	input := summarizer.seen[0][1].Content
	assert.Contains(t, input, `[tool call search {"q":"x"}]`)
	assert.Contains(t, input, "tool: result text")
	got := model.seen[0]
	assert.Equal(t, "system", got[0].Role)
	assert.Equal(t, msgs[3], got[1], "the kept message keeps its parts")
}

func itoa(n int) string { return strconv.Itoa(n) }

// anthropicShape returns what Anthropic's API says of a request body it
// refuses for its shape ("" when it takes it): the first message must be
// the user's, no message may be empty, every tool_use block must be
// answered by a tool_result block in the next message, and every
// tool_result block must answer a tool_use block of the message before.
// Consecutive messages of one role are one turn, as the API merges them.
func anthropicShape(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err.Error()
	}
	type turn struct {
		role         string
		uses, answer []string
	}
	var turns []turn
	for i, m := range req.Messages {
		if len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d: all messages must have non-empty content", i)
		}
		if len(turns) == 0 || turns[len(turns)-1].role != m.Role {
			turns = append(turns, turn{role: m.Role})
		}
		t := &turns[len(turns)-1]
		for _, c := range m.Content {
			switch c.Type {
			case "tool_use":
				t.uses = append(t.uses, c.ID)
			case "tool_result":
				t.answer = append(t.answer, c.ToolUseID)
			}
		}
	}
	if len(turns) == 0 || turns[0].role != "user" {
		return `messages: first message must use the "user" role`
	}
	for i, t := range turns {
		for _, id := range t.uses {
			if i+1 >= len(turns) && i == len(turns)-1 {
				continue // the call being made
			}
			if !contains(turns[i+1].answer, id) {
				return fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
			}
		}
		for _, id := range t.answer {
			if i == 0 || !contains(turns[i-1].uses, id) {
				return fmt.Sprintf("messages.%d: unexpected tool_use_id found in tool_result blocks: %s", i, id)
			}
		}
	}
	return ""
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// wireTranscript builds a transcript as hosts send them: a system prompt,
// turns of user messages (now and then two in a row, or with an image), and
// tool-call rounds in either provider's shape: parallel calls answered by
// tool messages in any order (OpenAI's), or by tool_result parts of one
// user message (Anthropic's), the calls led by a signed thinking block or a
// redacted one. A run may end with a round of tool calls after one request.
// Now and then an assistant message is pinned, and the calls of an
// Anthropic-shaped round are split over two consecutive assistant messages
// (the API merges them into one turn), answered by one user message.
func wireTranscript(r *rand.Rand) []runtime.Message {
	seq := 0
	text := func(kind string) string {
		seq++
		return fmt.Sprintf("#%d %s %s", seq, kind, strings.Repeat("w", r.IntN(400)))
	}
	msgs := []runtime.Message{{Role: "system", Content: "you are a support agent"}}
	turns := 1 + r.IntN(6)
	for turn := range turns {
		u := runtime.Message{Role: "user", Content: text("user")}
		if r.IntN(5) == 0 {
			u.Parts = []runtime.ContentPart{{Type: runtime.PartImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}
		}
		msgs = append(msgs, u)
		if r.IntN(6) == 0 {
			msgs = append(msgs, runtime.Message{Role: "user", Content: text("user-again")})
		}
		for round := range r.IntN(4) {
			a := runtime.Message{Role: "assistant"}
			switch r.IntN(3) {
			case 0:
				a.Parts = []runtime.ContentPart{{Type: runtime.PartThinking, Text: text("thinking"), Signature: fmt.Sprintf("sig-%d", seq)}}
			case 1:
				a.Parts = []runtime.ContentPart{{Type: runtime.PartRedactedThinking, Signature: fmt.Sprintf("redacted-%d", seq)}}
			}
			n := 1 + r.IntN(3)
			for k := range n {
				a.ToolCalls = append(a.ToolCalls, runtime.ToolUse{ID: fmt.Sprintf("toolu_%d_%d_%d", turn, round, k), Name: "lookup",
					Arguments: json.RawMessage(`{"q":"` + text("q") + `"}`)})
			}
			if r.IntN(8) == 0 {
				a.Metadata = pinned
			}
			if r.IntN(2) == 0 {
				msgs = append(msgs, a)
				for _, k := range r.Perm(n) {
					msgs = append(msgs, runtime.Message{Role: "tool", ToolCallID: a.ToolCalls[k].ID, Content: text("result")})
				}
				continue
			}
			calls := a.ToolCalls
			if n > 1 && r.IntN(2) == 0 {
				k := 1 + r.IntN(n-1)
				a.ToolCalls = calls[:k]
				msgs = append(msgs, a, runtime.Message{Role: "assistant", ToolCalls: calls[k:]})
			} else {
				msgs = append(msgs, a)
			}
			res := runtime.Message{Role: "user"}
			for _, tc := range calls {
				res.Parts = append(res.Parts, runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: tc.ID, Text: text("result")})
			}
			msgs = append(msgs, res)
		}
		if turn < turns-1 || r.IntN(2) == 0 {
			a := runtime.Message{Role: "assistant", Content: text("answer")}
			if r.IntN(5) == 0 {
				a.Metadata = pinned
			}
			msgs = append(msgs, a)
		}
	}
	if msgs[len(msgs)-1].Role == "assistant" {
		msgs = append(msgs, runtime.Message{Role: "user", Content: text("user")})
	}
	return msgs
}

// Whatever compaction cuts, the transcript it sends is one Anthropic's API
// takes, and every message it keeps is sent as it was (a thinking block's
// text and signature byte for byte).
func TestCompactedTranscriptsAreShapedAsTheAPIWants(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"recorded"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	client, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: srv.URL})
	require.NoError(t, err)
	seen := &recorder{text: "ok"}
	rnd := rand.New(rand.NewPCG(7, 8))
	for iter := range wireIterations {
		msgs := wireTranscript(rnd)
		strategy := []string{"keep_recent", "importance", "summarize"}[rnd.IntN(3)]
		budget := 64 + rnd.IntN(1500)
		cfg := fmt.Sprintf(`{"strategy":%q,"max_tokens":%d,"keep_recent":%d,"keep_first_user_turn":%t%s}`, strategy,
			budget, 1+rnd.IntN(5), rnd.IntN(4) == 0, map[bool]string{true: `,"model":"small"`}[strategy == "summarize"])
		seen.seen = nil
		pl := build(t, cfg, map[string]runtime.ModelClient{"primary": seen, "small": &recorder{text: "they asked about orders"}})
		resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
		require.NoError(t, err)
		got := seen.seen[0]
		if c, ok := compaction.CompactedOf(resp, "compaction"); ok {
			assert.Equal(t, got, c.Messages)
			// Idempotent: the host continuing from it sends it as it is.
			again, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: got})
			require.NoError(t, err)
			_, ok = compaction.CompactedOf(again, "compaction")
			assert.False(t, ok, "iteration %d (%s): compacting the compacted transcript changed it", iter, cfg)
			assert.Equal(t, got, seen.seen[1])
		} else {
			assert.Equal(t, msgs, got)
		}
		if n := runtime.EstimateMessages(got); n > int64(budget) {
			// Over the budget only when nothing more may go: the same
			// transcript with the smallest budget is no shorter.
			small := build(t, strings.Replace(cfg, fmt.Sprintf(`"max_tokens":%d`, budget), `"max_tokens":64`, 1), map[string]runtime.ModelClient{"primary": seen, "small": &recorder{err: errors.New("down")}})
			_, err := small.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: got})
			require.NoError(t, err)
			assert.Equal(t, got, seen.seen[len(seen.seen)-1], "iteration %d (%s): over the budget with %d tokens, yet more could go", iter, cfg, n)
		}
		for _, m := range got {
			if m.Metadata[compaction.SummaryKey] != "true" {
				assert.True(t, slicesContain(msgs, m), "a kept message was changed: %+v", m)
			}
		}
		mu.Lock()
		bodies = nil
		mu.Unlock()
		if openAIShape(msgs) == "" {
			// Calls split over two assistant messages are Anthropic's
			// shape alone.
			assert.Empty(t, openAIShape(got), "iteration %d (%s): the compacted transcript", iter, cfg)
		}
		assert.Empty(t, madeAdjacent(msgs, got), "iteration %d (%s): the compacted transcript", iter, cfg)
		for _, sent := range [][]runtime.Message{msgs, got} {
			_ = client.Stream(context.Background(), &runtime.ChatRequest{Messages: sent}, func(runtime.Delta) bool { return true })
		}
		mu.Lock()
		require.Len(t, bodies, 2)
		require.Empty(t, anthropicShape(bodies[0]), "iteration %d: the API refuses the transcript as written", iter)
		assert.Empty(t, anthropicShape(bodies[1]), "iteration %d (%s): the API refuses the compacted transcript", iter, cfg)
		mu.Unlock()
		if t.Failed() {
			for i, m := range got {
				t.Logf("%d %s %.20q parts=%d calls=%d id=%s", i, m.Role, m.Content, len(m.Parts), len(m.ToolCalls), m.ToolCallID)
			}
			return
		}
	}
}

const wireIterations = 300

// openAIShape returns what OpenAI's API says of a transcript it refuses
// for its tool messages ("" when it takes it): a tool result must answer a
// call of the assistant message before it (past the other results), and an
// assistant message's calls must all be answered before the next message.
func openAIShape(msgs []runtime.Message) string {
	var open []string // calls of the last assistant message not answered yet
	calls := map[string]bool{}
	for i, m := range msgs {
		results := m.ToolResults()
		if m.Role != "tool" {
			results = nil
			for _, p := range m.Parts {
				if p.Type == runtime.PartToolResult {
					results = append(results, p.ToolCallID)
				}
			}
		} else {
			results = []string{m.ToolCallID}
		}
		if len(results) == 0 && len(open) > 0 && m.Role != "system" {
			return fmt.Sprintf("messages.[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id': %v", i, open)
		}
		for _, id := range results {
			if !calls[id] {
				return fmt.Sprintf("messages.[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls': %s", i, id)
			}
			open = slices.DeleteFunc(open, func(x string) bool { return x == id })
		}
		if m.Role == "assistant" {
			open, calls = nil, map[string]bool{}
			for _, tc := range m.ToolCalls {
				open = append(open, tc.ID)
				calls[tc.ID] = true
			}
		}
	}
	return ""
}

// pinned is the metadata of a pinned message.
var pinned = map[string]string{compaction.PinKey: "true"}

// madeAdjacent returns what is wrong when the cut made two assistant
// messages adjacent (system messages aside) that were not in the input: the
// model reads an answer without the question it answers, and a server
// whose chat template wants the roles to alternate refuses the transcript.
func madeAdjacent(in, out []runtime.Message) string {
	prev := -1
	for i, m := range out {
		if m.Role == "system" {
			continue
		}
		if prev >= 0 && m.Role == "assistant" && out[prev].Role == "assistant" && !adjacentIn(in, out[prev], m) {
			return fmt.Sprintf("messages.[%d] and [%d]: consecutive assistant messages the cut made", prev, i)
		}
		prev = i
	}
	return ""
}

// adjacentIn reports whether a is followed in msgs by b, system messages
// aside.
func adjacentIn(msgs []runtime.Message, a, b runtime.Message) bool {
	for i := range msgs {
		if !reflect.DeepEqual(msgs[i], a) {
			continue
		}
		for _, m := range msgs[i+1:] {
			if m.Role != "system" {
				return reflect.DeepEqual(m, b)
			}
		}
	}
	return false
}

func slicesContain(msgs []runtime.Message, m runtime.Message) bool {
	for i := range msgs {
		if reflect.DeepEqual(msgs[i], m) {
			return true
		}
	}
	return false
}
