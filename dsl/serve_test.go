package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeKeysAndMCPServers(t *testing.T) {
	const hash = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	tests := []struct {
		name  string
		src   string
		wants []string // "line:col rule"
	}{
		{"clean", `keys: {a: {sha256: "` + hash + `"}, b: {env: "B_KEY", tenant: "team"}}
mcp: servers: {fs: {command: ["mcp-server-filesystem", "/srv"], prefix: "fs."}, web: url: "http://127.0.0.1:9/mcp"}`, nil},
		{"key without secret", `keys: a: {tenant: "t"}`, []string{"3:7 schema/missing-field"}},
		{"key with both", `keys: a: {sha256: "` + hash + `", env: "A"}`, []string{"3:92 schema/invalid-value"}},
		{"plain key in sha256", `keys: a: {sha256: "sk-live-0123"}`, []string{"3:19 schema/invalid-value"}},
		{"plain key in env", `keys: a: {env: "sk-live-0123"}`, []string{"3:16 schema/invalid-value"}},
		{"server without transport", `mcp: servers: fs: {prefix: "x"}`, []string{"3:19 schema/missing-field"}},
		{"server with both", `mcp: servers: fs: {command: ["x"], url: "http://127.0.0.1:1/"}`, []string{"3:41 schema/invalid-value"}},
		{"empty command", `mcp: servers: fs: {command: []}`, []string{"3:29 schema/invalid-value"}},
		{"unknown server field", `mcp: servers: fs: {command: ["x"], args: ["y"]}`, []string{"3:36 schema/unknown-field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags, got := loadSnippet(t, tt.src)
			assert.Equal(t, tt.wants, got, "%v", diags)
			if tt.wants == nil {
				require.NotNil(t, p)
				assert.Equal(t, hash, p.Keys["a"].SHA256)
				assert.Equal(t, "a", p.Keys["a"].Tenant, "the tenant defaults to the key's name")
				assert.Equal(t, "team", p.Keys["b"].Tenant)
				assert.Equal(t, []string{"mcp-server-filesystem", "/srv"}, p.MCPServers["fs"].Command)
				assert.Equal(t, "http://127.0.0.1:9/mcp", p.MCPServers["web"].URL)
			}
		})
	}
}
