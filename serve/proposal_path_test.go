package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProposedPathIsCheckedResolvedInsideFileCheck: a tool_policy pattern
// on a path_arg sits inside file_check, where vet has it read the real
// path. A proposed call spelling .env "<root>/x/../.env/." was admitted,
// the pattern reading the spelling, and relayed to the client, which
// opens .env. It is refused; a call admitted is relayed as the model
// wrote it, not as file_check resolved it.
func TestProposedPathIsCheckedResolvedInsideFileCheck(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, ".env"), []byte("SECRET=1"), 0o644))
	decls := fmt.Sprintf(`
tools: read_report: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [
	{use: "file_check", roots: [%q]},
	{use: "tool_policy", name: "no_env", arg_patterns: [{arg: "path", pattern: "\\.env$"}]},
]`, root)
	q := func(path string) string { b, _ := json.Marshal(map[string]string{"path": path}); return string(b) }
	env, notes := q(filepath.Join(root, "x", "..", ".env")+"/."), q(filepath.Join(root, "x", "..", "notes.txt"))
	g := newGatewayWith(t, decls, typicalChain, []reply{{body: oaToolCallSSE("read_report", env)}, {body: oaToolCallSSE("read_report", notes)}}, nil)
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("read_report")}}

	_, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	var oerr *openai.Error
	require.True(t, errors.As(err, &oerr), "%v", err)
	assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
	assert.Contains(t, oerr.RawJSON(), `"layer":"no_env"`)

	c, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, c.Choices[0].Message.ToolCalls, 1)
	assert.JSONEq(t, notes, c.Choices[0].Message.ToolCalls[0].Function.Arguments)
}
