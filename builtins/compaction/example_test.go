package compaction_test

import (
	"fmt"

	"github.com/agentc-dev/agentc/builtins/compaction"
)

func ExampleKeepRecent() {
	msgs := []compaction.Message{
		{Role: "system", Content: "You are a support agent."},
		{Role: "user", Content: "Where is order A1?"},
		{Role: "assistant", ToolCalls: []compaction.ToolCall{{ID: "c1", Name: "lookup", Args: `{"id":"A1"}`}}},
		{Role: "tool", ToolCallID: "c1", Content: `{"status":"shipped"}`},
		{Role: "assistant", Content: "It shipped yesterday."},
		{Role: "user", Content: "Thanks! And order B2?"},
	}
	// Every message costs 10 tokens here; keep the last 2 within 40 tokens.
	out := compaction.KeepRecent(msgs, 40, 2, func(compaction.Message) int { return 10 })
	for _, m := range out {
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	// Output:
	// system: You are a support agent.
	// user: Where is order A1?
	// assistant: It shipped yesterday.
	// user: Thanks! And order B2?
}
