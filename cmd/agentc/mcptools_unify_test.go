package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMCPToolsOutputUnifiesWithThePolicysDeclarations: a tool without
// annotations was written side_effecting: true even where the policy
// declares it side_effecting: false, so vet failed on the conflict. A
// field the policy declares for the tool is left to the policy.
func TestMCPToolsOutputUnifiesWithThePolicysDeclarations(t *testing.T) {
	url := namedToolsServer(t, "ping", "write")
	out, _ := mcpToolsThenVet(t, fmt.Sprintf(`package gw

mcp: servers: one: {url: %q}
tools: ping: {side_effecting: false, path_arg: "path"}
tools: write: {retry_safe: false}
`, url))
	ping := out[strings.Index(out, "\tping: {"):]
	ping = ping[:strings.Index(ping, "\n\t}")]
	assert.NotContains(t, ping, "side_effecting")
	assert.NotContains(t, ping, "path_arg")
	assert.Contains(t, ping, "args:")
	assert.Contains(t, out, "// Left to the policy's declaration of this tool: path_arg (the server's definition gives \"path\"), side_effecting (the server's definition gives true).")
	write := out[strings.Index(out, "\twrite: {"):]
	assert.Regexp(t, `side_effecting: +true`, write, "write takes the schema's default side_effecting, not a value of its own")
	assert.Regexp(t, `path_arg: +"path"`, write, "write declares no path_arg")
}
