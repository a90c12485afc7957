package explain_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/explain"
)

// toolLayers explains the policy src and returns its tool chain's layers.
func toolLayers(t *testing.T, src string) []*explain.Layer {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	for _, st := range build(t, dir).Stages {
		if st.Name == "tool" {
			return st.Layers
		}
	}
	t.Fatal("no tool chain")
	return nil
}

// TestLayerCheckingNothingIsSaid: explain listed an unscoped file_check
// with its roots, and an egress with scan_args false, in front of tools
// none of which declares path_arg (url_arg), as if they checked the calls:
// they check nothing. It now says so, and, with MCP servers, that serve
// refuses to load such a layer in front of their tools. A layer that has a
// tool to check says nothing of it.
func TestLayerCheckingNothingIsSaid(t *testing.T) {
	layers := toolLayers(t, `package p
mcp: servers: fs: command: ["mcp-server-filesystem", "/srv"]
tools: lookup: {side_effecting: false, args: {type: "object", properties: q: type: "string"}}
chains: tool: [
	{use: "file_check", roots: ["/srv/docs"]},
	{use: "egress", allow: ["example.com"], scan_args: false},
	{use: "egress", name: "scan", allow: ["example.com"]},
]
`)
	require.Len(t, layers, 3)
	assert.Contains(t, layers[0].Scope, "checks nothing: no declared tool has path_arg, so every call passes it unchecked; agentc serve refuses to load it in front of the tools of mcp servers none of which is declared with path_arg")
	assert.Contains(t, layers[1].Scope, "checks nothing: no declared tool has url_arg, so every call passes it unchecked; agentc serve refuses to load it in front of the tools of mcp servers none of which is declared with url_arg")
	assert.Empty(t, layers[2].Scope, "with scan_args, egress checks every URL of a call")

	layers = toolLayers(t, `package p
tools: read: {side_effecting: false, path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [{use: "file_check", roots: ["/srv/docs"]}]
`)
	assert.Empty(t, layers[0].Scope)

	layers = toolLayers(t, `package p
tools: lookup: {side_effecting: false}
chains: tool: [{use: "file_check", roots: ["/srv/docs"]}]
`)
	assert.Equal(t, []string{"checks nothing: no declared tool has path_arg, so every call passes it unchecked"}, layers[0].Scope)
}
