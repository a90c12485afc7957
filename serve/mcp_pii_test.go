package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fsPIIPolicy serves the filesystem server's reads through a pii layer of the tool chain.
const fsPIIPolicy = `package gw

mcp: servers: fs: {command: [%q, %q], prefix: "fs_"}
tools: {
	fs_read_text_file: {side_effecting: false, path_arg: "path"}
	fs_read_media_file: {side_effecting: false, path_arg: "path"}
}
chains: tool: [
	{use: "file_check", roots: [%q]},
	{use: "pii", action: %q},
]
`

// TestMCPFilesystemResultsHoldingPersonalData: a file holding a card number, read through
// the real filesystem server, never reaches the client with the number in it: with pii's
// "redact" in the tool chain the text and structured content of a text file, and the data of
// an image whose text chunk holds it, come masked; with "block" the call is an error result
// naming the layer.
func TestMCPFilesystemResultsHoldingPersonalData(t *testing.T) {
	bin := fsBinary(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	png = append(png, make([]byte, 13)...)
	png = append(png, "tEXtComment\x00card 4111 1111 1111 1111 here\x00"...)
	for i := range 256 {
		png = append(png, byte(i))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "card.png"), png, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "cust.txt"), []byte("Ann, card 4111 1111 1111 1111, exp 12/27\n"), 0o644))
	ctx := context.Background()
	for _, action := range []string{"redact", "block"} {
		t.Run(action, func(t *testing.T) {
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(fsPIIPolicy, bin, root, root, action)))})
			cs := connectProxy(t, s.url, "", nil)
			for _, call := range []struct{ tool, file string }{{"fs_read_text_file", "cust.txt"}, {"fs_read_media_file", "card.png"}} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.tool, Arguments: map[string]any{"path": filepath.Join(root, call.file)}})
				require.NoError(t, err)
				raw, err := json.Marshal(res)
				require.NoError(t, err)
				for _, c := range res.Content {
					if img, ok := c.(*mcp.ImageContent); ok {
						assert.NotContains(t, string(img.Data), "4111", "%s %s: image data", action, call.file)
					}
				}
				assert.NotContains(t, string(raw), "4111 1111 1111 1111", "%s %s", action, call.file)
				assert.NotContains(t, string(raw), "4111111111111111", "%s %s", action, call.file)
				if action == "block" {
					assert.True(t, res.IsError, "%s: %s", call.file, raw)
					assert.Contains(t, string(raw), "pii", call.file)
					assert.Contains(t, string(raw), "personal data", call.file)
				} else {
					assert.False(t, res.IsError, "%s: %s", call.file, raw)
					assert.Contains(t, string(raw), "REDACTED:card", call.file)
				}
			}
		})
	}
}
