package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renameMethod sends every request of method from as method to instead,
// as a client speaking an extension the server lacks would.
type renameMethod struct {
	bearer
	from, to string
}

func (m renameMethod) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		b = bytes.Replace(b, []byte(`"method":"`+m.from+`"`), []byte(`"method":"`+m.to+`"`), 1)
		r = r.Clone(r.Context())
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	return m.bearer.RoundTrip(r)
}

// TestMCPClientMethods sends what MCP clients send besides tools: each is
// answered, the unsupported ones with JSON-RPC errors, and the session
// goes on.
func TestMCPClientMethods(t *testing.T) {
	upstream, _ := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream)))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	caps := cs.InitializeResult().Capabilities
	require.NotNil(t, caps.Tools)
	assert.True(t, caps.Tools.ListChanged)
	assert.Nil(t, caps.Completions, "no completions are offered")
	require.NoError(t, cs.Ping(ctx, nil))
	res, err := cs.ListResources(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, res.Resources)
	prompts, err := cs.ListPrompts(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, prompts.Prompts)
	require.NoError(t, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}))
	_, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "x"}, Argument: mcp.CompleteParamsArgument{Name: "a", Value: "b"}})
	assert.ErrorContains(t, err, "method not found")
	_, err = cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "not-a-cursor"})
	assert.ErrorContains(t, err, "invalid params")
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, tools.Tools, 2)
	assert.Empty(t, tools.NextCursor)

	// A method the server does not know is a JSON-RPC "method not found"
	// to its id, and the session goes on.
	h := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream",
		"Mcp-Session-Id", cs.ID(), "Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion}
	code, hdr, body := do(t, "POST", s.url+"/mcp", "agent-key", []byte(`{"jsonrpc":"2.0","id":"q-7","method":"vendor/frobnicate","params":{}}`), h...)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	var rpc struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	assert.NoError(t, json.Unmarshal([]byte(body), &rpc), body)
	assert.Equal(t, "q-7", rpc.ID)
	assert.Equal(t, -32601, rpc.Error.Code)
	assert.Contains(t, rpc.Error.Message, `"vendor/frobnicate"`)
	require.NoError(t, cs.Ping(ctx, nil))

	// The go-sdk client gets the error for its call and keeps its
	// session: a refusal that is not JSON-RPC would have it close the
	// connection, failing every call after.
	client := mcp.NewClient(&mcp.Implementation{Name: "ext-client", Version: "1"}, nil)
	ext, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: renameMethod{bearer: bearer{key: "agent-key"}, from: "ping", to: "vendor/ping"}}}, nil)
	require.NoError(t, err)
	defer ext.Close()
	err = ext.Ping(ctx, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "method not found")
	call, err := ext.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err, "the session survives the unknown method")
	assert.False(t, call.IsError)

	// A notification of an unknown method is refused without an answer
	// to an id, and refused requests without a session stay HTTP refusals.
	code, _, body = do(t, "POST", s.url+"/mcp", "agent-key", []byte(`{"jsonrpc":"2.0","method":"notifications/vendor"}`), h...)
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.True(t, strings.Contains(body, `"code":"bad_request"`), body)
}
