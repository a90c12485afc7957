package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// toolEntry returns the entry of tool name in the output of mcp-tools.
func toolEntry(t *testing.T, out, name string) string {
	t.Helper()
	i := strings.Index(out, "\t"+name+": {")
	if !assert.GreaterOrEqual(t, i, 0, "no entry %s in\n%s", name, out) {
		return ""
	}
	e := out[i:]
	return e[:strings.Index(e, "\n\t}")]
}

// TestMCPToolsWritesSideEffectingOverThePolicysDefault: for a tool the
// policy declares only for its args, side_effecting was left out because
// the loaded plan's false (the schema's default) differed from the
// server's true, and the tool stayed side_effecting: false. The default
// is not the policy's own value: the server's is written over it.
func TestMCPToolsWritesSideEffectingOverThePolicysDefault(t *testing.T) {
	url := namedToolsServer(t, "ping", "pong")
	out, _ := mcpToolsThenVet(t, fmt.Sprintf(`package gw

mcp: servers: one: {url: %q}
tools: ping: {args: {type: "object", properties: path: type: "string"}}
tools: pong: {side_effecting: false}
`, url))
	ping := toolEntry(t, out, "ping")
	assert.Contains(t, ping, "side_effecting: true")
	assert.NotContains(t, ping, "args:", "the policy declares its args")
	pong := toolEntry(t, out, "pong")
	assert.NotContains(t, pong, "side_effecting")
	assert.Contains(t, out, "// Left to the policy's declaration of this tool: side_effecting (the server's definition gives true).")
	assert.Equal(t, 1, strings.Count(out, "side_effecting (the server's"), "only pong's is left to the policy")
}
