package compaction

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unitCounter makes every message cost 10 tokens, so budgets read as message counts.
func unitCounter(Message) int { return 10 }

func sys(c string) Message  { return Message{Role: RoleSystem, Content: c} }
func user(c string) Message { return Message{Role: RoleUser, Content: c} }
func asst(c string) Message { return Message{Role: RoleAssistant, Content: c} }
func call(c string, ids ...string) Message {
	m := Message{Role: RoleAssistant, Content: c}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: "search", Args: `{"q":"x"}`})
	}
	return m
}
func result(id, c string) Message { return Message{Role: RoleTool, ToolCallID: id, Content: c} }

func contents(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

// keepCase is a case of KeepRecent: the contents it keeps of in.
type keepCase struct {
	name       string
	in         []Message
	maxTokens  int
	keepRecent int
	want       []string
}

func TestKeepRecent(t *testing.T) {
	tests := []keepCase{
		{
			name:      "under budget unchanged",
			in:        []Message{sys("s"), user("u1"), asst("a1")},
			maxTokens: 30, keepRecent: 1,
			want: []string{"s", "u1", "a1"},
		},
		{
			name:      "drops oldest while over",
			in:        []Message{sys("s"), user("u1"), asst("a1"), user("u2"), asst("a2"), user("u3")},
			maxTokens: 40, keepRecent: 2,
			want: []string{"s", "u2", "a2", "u3"},
		},
		{
			name:      "recent messages kept even over budget",
			in:        []Message{sys("s"), user("u1"), asst("a1"), user("u2")},
			maxTokens: 10, keepRecent: 2,
			// u1 stays too: a1 is kept, and a conversation opens with the user.
			want: []string{"s", "u1", "a1", "u2"},
		},
		{
			name:      "system messages anywhere are kept",
			in:        []Message{sys("s1"), user("u1"), sys("s2"), asst("a1"), user("u2")},
			maxTokens: 30, keepRecent: 1,
			want: []string{"s1", "s2", "u2"},
		},
		{
			name:      "tool unit dropped whole",
			in:        []Message{sys("s"), user("u1"), call("c1", "t1", "t2"), result("t1", "r1"), result("t2", "r2"), asst("a1"), user("u2")},
			maxTokens: 40, keepRecent: 2,
			want: []string{"s", "u1", "a1", "u2"},
		},
		{
			name:      "tool unit kept whole when a result is recent",
			in:        []Message{sys("s"), user("u1"), call("c1", "t1", "t2"), result("t1", "r1"), result("t2", "r2")},
			maxTokens: 10, keepRecent: 1,
			want: []string{"s", "u1", "c1", "r1", "r2"},
		},
		{
			name:      "orphan results are dropped",
			in:        []Message{sys("s"), result("ghost", "r0"), user("u1"), result("", "r1")},
			maxTokens: 100, keepRecent: 5,
			want: []string{"s", "u1"},
		},
		{
			name:      "reused call ids bind to the nearest call",
			in:        []Message{user("u1"), call("c1", "t"), result("t", "r1"), user("u2"), call("c2", "t"), result("t", "r2")},
			maxTokens: 30, keepRecent: 2,
			want: []string{"u2", "c2", "r2"},
		},
		{
			name:      "pending call without result",
			in:        []Message{user("u1"), asst("a1"), user("u2"), call("c1", "t1")},
			maxTokens: 20, keepRecent: 1,
			want: []string{"u2", "c1"},
		},
		{
			name:      "no budget",
			in:        []Message{user("u1"), asst("a1"), user("u2")},
			maxTokens: 0, keepRecent: 0,
			want: []string{"u1", "a1", "u2"},
		},
		{
			name:      "keep zero recent",
			in:        []Message{sys("s"), user("u1"), asst("a1")},
			maxTokens: 15, keepRecent: 0,
			want: []string{"s"},
		},
		{
			name: "empty", in: nil, maxTokens: 10, keepRecent: 2, want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := KeepRecent(tt.in, tt.maxTokens, tt.keepRecent, unitCounter)
			assert.Equal(t, tt.want, contents(got))
			assert.Equal(t, got, KeepRecent(got, tt.maxTokens, tt.keepRecent, unitCounter), "idempotent")
		})
	}
}

func TestKeepRecentDoesNotMutateOrAlias(t *testing.T) {
	in := []Message{user("u1"), call("c1", "t1"), result("t1", "r1"), user("u2")}
	before := deepCopy(in)
	out := KeepRecent(in, 1000, 1, nil)
	assert.Equal(t, before, in)
	require.Len(t, out, 4)
	out[1].ToolCalls[0].Name = "changed"
	out[0].Content = "changed"
	assert.Equal(t, before, in, "the result shares no memory with the input")
}

func TestEstimateTokens(t *testing.T) {
	assert.Equal(t, MessageOverhead, EstimateTokens(Message{Role: RoleUser}))
	assert.Equal(t, MessageOverhead+1, EstimateTokens(user("abc")))
	assert.Equal(t, MessageOverhead+2, EstimateTokens(user("abcde")))
	m := call("", "id1")
	m.ToolCalls[0] = ToolCall{ID: "id1", Name: "fetch", Args: `{"url":"x"}`} // 3+5+11 = 19 bytes
	assert.Equal(t, MessageOverhead+ToolCallOverhead+5, EstimateTokens(m))
	assert.Equal(t, 1000/BytesPerToken+MessageOverhead, EstimateTokens(user(strings.Repeat("x", 1000))))
}

// fakeSummarizer records its calls and returns a summary naming the messages it saw.
type fakeSummarizer struct {
	calls  int
	inputs [][]Message
	err    error
	text   string
}

func (f *fakeSummarizer) summarize(ctx context.Context, msgs []Message) (string, error) {
	f.calls++
	f.inputs = append(f.inputs, msgs)
	if f.err != nil {
		return "", f.err
	}
	if f.text != "" {
		return f.text, nil
	}
	return fmt.Sprintf("%d messages", len(msgs)), nil
}

func TestSummarize(t *testing.T) {
	in := []Message{sys("s"), user("u1"), call("c1", "t1"), result("t1", "r1"), asst("a1"), user("u2"), asst("a2"), user("u3")}
	f := &fakeSummarizer{}
	out, err := Summarize(context.Background(), in, 50, 2, unitCounter, f.summarize)
	require.NoError(t, err)
	assert.Equal(t, []string{"s", SummaryPrefix + "4 messages", "u2", "a2", "u3"}, contents(out))
	assert.True(t, IsSummary(out[1]))
	assert.Equal(t, RoleSystem, out[1].Role)
	require.Equal(t, 1, f.calls)
	assert.Equal(t, []string{"u1", "c1", "r1", "a1"}, contents(f.inputs[0]))

	// Idempotent: a second run neither calls the summarizer nor changes anything.
	again, err := Summarize(context.Background(), out, 50, 2, unitCounter, f.summarize)
	require.NoError(t, err)
	assert.Equal(t, out, again)
	assert.Equal(t, 1, f.calls)

	// New messages push it over again: the earlier summary is folded into the new one.
	grown := append(append([]Message{}, out...), asst("a3"), user("u4"))
	next, err := Summarize(context.Background(), grown, 50, 2, unitCounter, f.summarize)
	require.NoError(t, err)
	assert.Equal(t, []string{"s", SummaryPrefix + "3 messages", "u3", "a3", "u4"}, contents(next))
	assert.Equal(t, []string{SummaryPrefix + "4 messages", "u2", "a2"}, contents(f.inputs[1]))
}

func TestSummarizeDropsMoreWhenSummaryDoesNotFit(t *testing.T) {
	in := []Message{user("u1"), asst("a1"), user("u2"), asst("a2"), user("u3")}
	// Each message costs 10; a summary costs 5 plus one per byte of its text, so the room
	// reserved up front (an empty summary, 5) is too small for the real one (25).
	count := func(m Message) int {
		if IsSummary(m) {
			return 5 + len(m.Content) - len(SummaryPrefix)
		}
		return 10
	}
	f := &fakeSummarizer{text: "twenty-byte summary."}
	out, err := Summarize(context.Background(), in, 45, 1, count, f.summarize)
	require.NoError(t, err)
	assert.Equal(t, []string{SummaryPrefix + f.text, "u3"}, contents(out))
	require.Equal(t, 2, f.calls, "re-summarized after dropping more")
	assert.Equal(t, []string{"u1", "a1"}, contents(f.inputs[0]))
	assert.Equal(t, []string{"u1", "a1", "u2", "a2"}, contents(f.inputs[1]))

	again, err := Summarize(context.Background(), out, 45, 1, count, f.summarize)
	require.NoError(t, err)
	assert.Equal(t, out, again)
	assert.Equal(t, 2, f.calls)
}

func TestSummarizeErrors(t *testing.T) {
	in := []Message{user("u1"), asst("a1"), user("u2")}
	boom := errors.New("model down")
	_, err := Summarize(context.Background(), in, 15, 1, unitCounter, (&fakeSummarizer{err: boom}).summarize)
	assert.ErrorIs(t, err, boom)

	_, err = Summarize(context.Background(), in, 15, 1, unitCounter, (&fakeSummarizer{text: "  \n"}).summarize)
	assert.ErrorIs(t, err, ErrEmptySummary)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Summarize(ctx, in, 15, 1, unitCounter, (&fakeSummarizer{}).summarize)
	assert.ErrorIs(t, err, context.Canceled)

	_, err = Summarize(context.Background(), in, 15, 1, unitCounter, nil)
	assert.Error(t, err)

	// Nothing to drop: the summarizer is not needed, so a cancelled context does not matter.
	out, err := Summarize(ctx, in, 1000, 1, unitCounter, (&fakeSummarizer{err: boom}).summarize)
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

// --- property tests over random transcripts ---

// randomTranscript builds a plausible transcript: optional system prompt, turns of user
// messages, assistant replies and tool-call rounds (results in any order, sometimes missing at
// the end, call ids sometimes reused), a few stray system messages and orphaned results.
func randomTranscript(r *rand.Rand) []Message {
	var msgs []Message
	seq := 0
	text := func(kind string) string {
		seq++
		return fmt.Sprintf("#%d %s %s", seq, kind, strings.Repeat("w", r.IntN(300)))
	}
	if r.IntN(4) != 0 {
		msgs = append(msgs, Message{Role: RoleSystem, Content: text("system")})
	}
	turns := r.IntN(12)
	for turn := 0; turn < turns; turn++ {
		msgs = append(msgs, Message{Role: RoleUser, Content: text("user")})
		if r.IntN(10) == 0 {
			msgs = append(msgs, Message{Role: RoleSystem, Content: text("system-note")})
		}
		if r.IntN(12) == 0 {
			msgs = append(msgs, Message{Role: RoleTool, ToolCallID: fmt.Sprintf("ghost%d", seq), Content: text("orphan")})
		}
		for rounds := r.IntN(3); rounds > 0; rounds-- {
			n := 1 + r.IntN(3)
			m := Message{Role: RoleAssistant, Content: text("calling")}
			for k := 0; k < n; k++ {
				id := fmt.Sprintf("call_%d_%d", turn, k)
				if r.IntN(5) == 0 {
					id = fmt.Sprintf("call_%d", k) // reused across turns
				}
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: "tool", Args: `{"n":` + fmt.Sprint(k) + `}`})
			}
			msgs = append(msgs, m)
			order := r.Perm(n)
			last := turn == turns-1 && rounds == 1
			for _, k := range order {
				if last && r.IntN(3) == 0 {
					continue // pending result
				}
				msgs = append(msgs, Message{Role: RoleTool, ToolCallID: m.ToolCalls[k].ID, Content: text("result")})
			}
		}
		if r.IntN(3) != 0 {
			msgs = append(msgs, Message{Role: RoleAssistant, Content: text("answer")})
		}
	}
	return msgs
}

// checkWellFormed asserts the pairing invariants of a compacted transcript against its input.
func checkWellFormed(t *testing.T, in, out []Message, keepRecent int) {
	t.Helper()
	// Output messages (other than a new summary) appear in the input, in the same order.
	pos := 0
	for _, m := range out {
		if IsSummary(m) && !containsContent(in, m.Content) {
			continue
		}
		for pos < len(in) && in[pos].Content != m.Content {
			pos++
		}
		require.Less(t, pos, len(in), "message %q is not from the input, or out of order", m.Content)
		pos++
	}
	// Every tool result has its call earlier in the output (nearest declaration), and every
	// kept call keeps all the results the input had for it.
	declared := map[string]int{} // id -> index in out
	for i, m := range out {
		switch {
		case m.Role == RoleTool:
			_, ok := declared[m.ToolCallID]
			assert.True(t, ok, "orphaned tool result %q", m.Content)
		case m.Role == RoleAssistant:
			for _, tc := range m.ToolCalls {
				declared[tc.ID] = i
			}
		}
	}
	inResults := resultsByCall(in)
	outResults := resultsByCall(out)
	for callContent, results := range inResults {
		if containsContent(out, callContent) {
			assert.Equal(t, results, outResults[callContent], "call %q lost results", callContent)
		}
	}
	// System messages (other than summaries) all survive.
	for _, m := range in {
		if m.Role == RoleSystem && !IsSummary(m) {
			assert.True(t, containsContent(out, m.Content), "system message %q dropped", m.Content)
		}
	}
	// A conversation the user opened still opens with a user message (Anthropic's API
	// refuses one that opens with the assistant).
	linked := linkedConversation(in)
	if len(linked) > 0 && linked[0].Role == RoleUser {
		for _, m := range out {
			if m.Role != RoleSystem {
				assert.Equal(t, RoleUser, m.Role, "the compacted conversation opens with %q", m.Content)
				break
			}
		}
	}
	// The keepRecent most recent linked messages survive.
	for _, m := range linked[max(0, len(linked)-keepRecent):] {
		assert.True(t, containsContent(out, m.Content), "recent message %q dropped", m.Content)
	}
}

// resultsByCall maps each assistant call message (by content) to the contents of the tool
// messages answering it, binding each result to the nearest earlier declaration.
func resultsByCall(msgs []Message) map[string][]string {
	owner := map[string]string{}
	out := map[string][]string{}
	for _, m := range msgs {
		if m.Role == RoleAssistant {
			for _, tc := range m.ToolCalls {
				owner[tc.ID] = m.Content
			}
			if len(m.ToolCalls) > 0 {
				out[m.Content] = []string{}
			}
		}
		if m.Role == RoleTool {
			if c, ok := owner[m.ToolCallID]; ok {
				out[c] = append(out[c], m.Content)
			}
		}
	}
	return out
}

// linkedConversation returns the non-system messages that are not orphans.
func linkedConversation(msgs []Message) []Message {
	declared := map[string]bool{}
	var out []Message
	for _, m := range msgs {
		switch m.Role {
		case RoleSystem:
			continue
		case RoleTool:
			if !declared[m.ToolCallID] {
				continue
			}
		}
		for _, tc := range m.ToolCalls {
			declared[tc.ID] = true
		}
		out = append(out, m)
	}
	return out
}

func containsContent(msgs []Message, c string) bool {
	for _, m := range msgs {
		if m.Content == c {
			return true
		}
	}
	return false
}

func total(msgs []Message, count TokenCounter) int {
	n := 0
	for _, m := range msgs {
		n += count(m)
	}
	return n
}

func deepCopy(msgs []Message) []Message {
	if msgs == nil {
		return nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = clone(m)
	}
	return out
}

func TestKeepRecentProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		in := randomTranscript(r)
		maxTokens := r.IntN(1200)
		keepRecent := r.IntN(6)
		before := deepCopy(in)

		out := KeepRecent(in, maxTokens, keepRecent, nil)

		require.Equal(t, before, in, "input modified")
		checkWellFormed(t, in, out, keepRecent)
		assert.Equal(t, out, KeepRecent(out, maxTokens, keepRecent, nil), "not idempotent")
		if maxTokens > 0 && total(out, EstimateTokens) > maxTokens {
			// Over budget only when nothing droppable is left: every linked message is recent
			// or shares a unit with a recent one, which KeepRecent with a zero budget shows.
			assert.Equal(t, out, KeepRecent(in, 1, keepRecent, nil), "stopped dropping while over budget")
		}
		if maxTokens <= 0 || total(linkedWithSystem(in), EstimateTokens) <= maxTokens {
			assert.Equal(t, linkedWithSystem(in), out, "dropped while under budget")
		}
		if t.Failed() {
			t.Logf("iteration %d: max %d keep %d", iter, maxTokens, keepRecent)
			return
		}
	}
}

func linkedWithSystem(msgs []Message) []Message {
	linked := linkedConversation(msgs)
	out := []Message{}
	j := 0
	for _, m := range msgs {
		if m.Role == RoleSystem {
			out = append(out, m)
			continue
		}
		if j < len(linked) && linked[j].Content == m.Content {
			out = append(out, m)
			j++
		}
	}
	return out
}

func totalTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += EstimateTokens(m)
	}
	return n
}

func TestSummarizeProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tooLong := 0
	defer func() { assert.Less(t, tooLong, 500, "most summaries fit") }()
	for iter := 0; iter < 1000; iter++ {
		in := randomTranscript(r)
		maxTokens := 1 + r.IntN(1200)
		keepRecent := r.IntN(6)
		before := deepCopy(in)
		f := &fakeSummarizer{text: strings.Repeat("s", r.IntN(200)) + "."}

		out, err := Summarize(context.Background(), in, maxTokens, keepRecent, nil, f.summarize)
		require.Equal(t, before, in, "input modified")
		if errors.Is(err, ErrSummaryTooLong) {
			// The summary would break a budget the transcript fits without it, or
			// costs more than what it replaces.
			tooLong++
			continue
		}
		require.NoError(t, err)
		checkWellFormed(t, in, out, keepRecent)
		if total := totalTokens(out); total > maxTokens && f.calls > 0 {
			assert.Greater(t, totalTokens(KeepRecent(in, maxTokens, keepRecent, nil)), maxTokens,
				"a summary is kept over the budget only when the transcript is over it without one")
		}

		summaries := 0
		for _, m := range out {
			if IsSummary(m) {
				summaries++
			}
		}
		assert.LessOrEqual(t, summaries, 1)
		assert.Equal(t, summaries == 1, f.calls > 0)

		calls := f.calls
		again, err := Summarize(context.Background(), out, maxTokens, keepRecent, nil, f.summarize)
		require.NoError(t, err)
		assert.Equal(t, out, again, "not idempotent")
		assert.Equal(t, calls, f.calls, "second run called the summarizer")
		assert.Equal(t, out, KeepRecent(out, maxTokens, keepRecent, nil), "KeepRecent changes a summarized transcript")
		if t.Failed() {
			t.Logf("iteration %d: max %d keep %d", iter, maxTokens, keepRecent)
			return
		}
	}
}

func BenchmarkKeepRecent(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var in []Message
	for len(in) < 200 {
		in = append(in, randomTranscript(r)...)
	}
	b.ReportAllocs()
	for b.Loop() {
		KeepRecent(in, 4000, 8, nil)
	}
}

func TestToolMessageAnsweringByPartStaysWithItsCall(t *testing.T) {
	byPart := Message{Role: RoleTool, Content: "r1", ToolResultIDs: []string{"t1"}}
	in := []Message{user("u1"), call("c1", "t1"), byPart, asst("a1"), user("u2")}
	assert.Equal(t, []string{"u1", "c1", "r1", "a1", "u2"}, contents(KeepRecent(in, 0, 1, unitCounter)), "no orphan")
	assert.Equal(t, []string{"u2"}, contents(KeepRecent(in, 20, 1, unitCounter)), "dropped with its call")
	assert.Equal(t, []string{"u1", "c1", "r1", "a1", "u2"}, contents(KeepRecent(in, 20, 3, unitCounter)), "kept with its call")
}

// Anthropic's API merges consecutive assistant messages into one turn, so a
// client may split the calls of one turn over two of them and answer both
// in one user message: the three go or stay together, never a result
// without its call.
func TestCallsSplitOverTwoMessagesStayWithTheirResults(t *testing.T) {
	res := Message{Role: RoleUser, Content: "r", ToolResultIDs: []string{"t1", "t2"}}
	in := []Message{sys("s"), user("u1"), call("c1", "t1"), call("c2", "t2"), res, asst("a1"), user("u2")}
	assert.Equal(t, []string{"s", "u1", "c1", "c2", "r", "a1", "u2"}, contents(KeepRecent(in, 40, 3, unitCounter)),
		"the result is recent: both calls stay")
	assert.Equal(t, []string{"s", "u1", "a1", "u2"}, contents(KeepRecent(in, 40, 2, unitCounter)), "all three go")
	byTool := []Message{sys("s"), user("u1"), call("c1", "t1"), call("c2", "t2"),
		{Role: RoleTool, ToolCallID: "t2", Content: "r", ToolResultIDs: []string{"t2", "t1"}}, asst("a1"), user("u2")}
	assert.Equal(t, []string{"s", "u1", "c1", "c2", "r", "a1", "u2"}, contents(KeepRecent(byTool, 40, 3, unitCounter)),
		"a tool message answering both by parts")
}

// Anthropic's API refuses a transcript whose first message after the system
// prompt is not the user's ("messages: first message must use the "user"
// role"). Dropping the oldest messages must not leave an assistant message
// first: the cut moves on past it, or, when it must be kept, the user
// message that asked for it is kept with it.
func TestTheCutLeavesTheUserFirst(t *testing.T) {
	tests := []keepCase{
		{
			name:      "an unprotected answer goes with its question",
			in:        []Message{sys("s"), user("u1"), asst("a1"), user("u2"), asst("a2"), user("u3")},
			maxTokens: 50, keepRecent: 1,
			want: []string{"s", "u2", "a2", "u3"},
		},
		{
			name: "a run of tool calls after one request keeps the request",
			in: []Message{sys("s"), user("u1"), call("c1", "t1"), result("t1", "r1"), call("c2", "t2"), result("t2", "r2"),
				call("c3", "t3", "t4"), result("t3", "r3"), result("t4", "r4")},
			maxTokens: 60, keepRecent: 2,
			want: []string{"s", "u1", "c3", "r3", "r4"},
		},
		{
			name: "a pinned answer keeps its question, and an answer the cut leaves after it goes with its own",
			in: []Message{sys("s"), user("u1"), {Role: RoleAssistant, Content: "a1", Pinned: true}, user("u2"), asst("a2"),
				user("u3"), asst("a3"), user("u4")},
			maxTokens: 50, keepRecent: 1,
			want: []string{"s", "u1", "a1", "u4"},
		},
		{
			name: "a recent answer after a pinned one keeps its question",
			in: []Message{sys("s"), user("u1"), {Role: RoleAssistant, Content: "a1", Pinned: true}, user("u2"), asst("a2"),
				user("u3"), asst("a3"), user("u4")},
			maxTokens: 50, keepRecent: 2,
			want: []string{"s", "u1", "a1", "u3", "a3", "u4"},
		},
		{
			name:      "a conversation the assistant opened is left so",
			in:        []Message{sys("s"), {Role: RoleAssistant, Content: "a0", Pinned: true}, user("u1"), asst("a1"), user("u2")},
			maxTokens: 30, keepRecent: 1,
			want: []string{"s", "a0", "u2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := KeepRecent(tt.in, tt.maxTokens, tt.keepRecent, unitCounter)
			assert.Equal(t, tt.want, contents(got))
			assert.Equal(t, got, KeepRecent(got, tt.maxTokens, tt.keepRecent, unitCounter), "idempotent")
			f := &fakeSummarizer{text: "sum"}
			sum, err := Summarize(context.Background(), tt.in, tt.maxTokens+10, tt.keepRecent, unitCounter, f.summarize)
			if len(got)*10 > tt.maxTokens {
				// What must stay is over the budget: no room for a summary.
				require.ErrorIs(t, err, ErrSummaryTooLong)
				return
			}
			require.NoError(t, err)
			for _, m := range sum {
				if m.Role != RoleSystem {
					assert.Equal(t, tt.want[1][:1], m.Content[:1], "the summarized conversation opens as the compacted one")
					break
				}
			}
		})
	}
}
