package compaction

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestImportanceKeepsWhatMatters(t *testing.T) {
	pinned := user("remember: order A1")
	pinned.Pinned = true
	in := []Message{
		sys("be brief"),
		user("first question"),                                 // first user turn: kept
		asst("old chatter"),                                    // plain, oldest: dropped after the unreferenced calls
		call("", "c1"), result("c1", "weather is sunny today"), // nothing refers to it: dropped first
		call("", "c2"), result("c2", "invoice total 1234 EUR"), // quoted later: kept
		pinned, // pinned: kept
		user("more chatter"),
		asst("the invoice total 1234 EUR is due"),
		user("latest"), // recent
	}
	// 11 messages of 10 tokens: a budget of 80 drops the unreferenced call
	// (two messages) first, then the oldest plain message.
	got := Importance(in, Options{MaxTokens: 80, KeepRecent: 1, Count: unitCounter})
	assert.Equal(t, []string{"be brief", "first question", "", "invoice total 1234 EUR", "remember: order A1",
		"more chatter", "the invoice total 1234 EUR is due", "latest"}, contents(got))
	assert.Equal(t, got, Importance(got, Options{MaxTokens: 80, KeepRecent: 1, Count: unitCounter}), "idempotent")

	// keep_recent drops the first user turn under pressure; importance does not.
	kr := Compact(in, Options{MaxTokens: 30, KeepRecent: 1, Count: unitCounter})
	assert.NotContains(t, contents(kr), "first question")
	imp := Importance(in, Options{MaxTokens: 30, KeepRecent: 1, Count: unitCounter})
	assert.Contains(t, contents(imp), "first question")
	assert.Contains(t, contents(imp), "remember: order A1")
	assert.Contains(t, contents(imp), "invoice total 1234 EUR")
	assert.NotContains(t, contents(imp), "weather is sunny today")
}

func TestImportanceByCallID(t *testing.T) {
	in := []Message{
		user("q"),
		call("", "lookup_7"), result("lookup_7", "ok"), // short result, but its id is named later
		call("", "c9"), result("c9", "ok"),
		asst("as lookup_7 showed"),
		user("latest"),
	}
	got := Importance(in, Options{MaxTokens: 50, KeepRecent: 1, Count: unitCounter})
	assert.Equal(t, []string{"q", "", "ok", "as lookup_7 showed", "latest"}, contents(got))
	assert.Equal(t, "lookup_7", got[2].ToolCallID)
}

func TestMaxMessagesAndKeepFirstUserTurn(t *testing.T) {
	in := []Message{sys("s"), user("u1"), asst("a1"), user("u2"), asst("a2"), user("u3")}
	got := Compact(in, Options{MaxMessages: 4, KeepRecent: 1})
	assert.Equal(t, []string{"s", "u2", "a2", "u3"}, contents(got), "no token budget: only the message bound")
	got = Compact(in, Options{MaxMessages: 4, KeepRecent: 1, KeepFirstUserTurn: true})
	assert.Equal(t, []string{"s", "u1", "a2", "u3"}, contents(got))
	pin := asst("a1")
	pin.Pinned = true
	got = Compact([]Message{sys("s"), user("u1"), pin, user("u2"), asst("a2"), user("u3")}, Options{MaxMessages: 3, KeepRecent: 1})
	assert.Equal(t, []string{"s", "u1", "a1", "u3"}, contents(got), "a pinned message is kept by every strategy, with the user message before it")
}
