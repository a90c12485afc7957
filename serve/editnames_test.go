package serve

import (
	"testing"
)

// TestContextEditToolNamesAreExact: exclude_tools and clear_tool_inputs
// name offered tools exactly, as the API matches them: a name the
// request offers in another case (Claude Code's "Bash" as "bash") was
// refused as a tool not offered, leaving the client to find the spelling;
// the 400 names the tool offered. A null among the names was refused as
// an empty name; it is not a list of names.
func TestContextEditToolNamesAreExact(t *testing.T) {
	g := newGatewayWith(t, claudeCodeDecl, `{use: "tracing"}`, nil, nil)
	tools := `"tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]`
	for _, tt := range []struct{ param, want string }{
		{`"exclude_tools": ["bash"]`, `context_management.edits[0].exclude_tools[0]: "bash" is not a tool the request offers: tool names are read exactly, and the request offers "Bash"`},
		{`"clear_tool_inputs": ["Bash", "BASH"]`, `context_management.edits[0].clear_tool_inputs[1]: "BASH" is not a tool the request offers: tool names are read exactly, and the request offers "Bash"`},
		{`"exclude_tools": [null]`, `context_management.edits[0].exclude_tools: want a list of tool names`},
		{`"exclude_tools": ["Read"]`, `context_management.edits[0].exclude_tools[0]: "Read" is not a tool the request offers; name tools from tools`},
	} {
		for _, route := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			code, _, resp := do(t, "POST", g.url+route, clientKey, []byte(`{"model": "backup", "max_tokens": 64, `+tools+
				`, "context_management": {"edits": [{"type": "clear_tool_uses_20250919", `+tt.param+`}]}, "messages": [{"role": "user", "content": "hi"}]}`),
				"anthropic-version", "2023-06-01")
			requireInvalidRequest(t, code, resp, tt.want)
		}
	}
}
