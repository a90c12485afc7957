package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestMCPArgumentsReachTheUpstreamAsWritten: the arguments of a tools/call
// were sent to the upstream encoded again from their decoded values, so
// 500.0 reached it as 500, 1e2 as 100 and 1.50 as 1.5 (an upstream that
// tells an integer from a float, or checks a signature over the body, saw
// another text than the client sent). They are sent as the client wrote
// them when the chain passes them unchanged; arguments a layer rewrites
// (file_check's resolved path) are sent as rewritten, and an integer
// beyond 2^53 keeps every digit either way.
func TestMCPArgumentsReachTheUpstreamAsWritten(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	record := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		sent = append(sent, string(req.Params.Arguments))
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object"}`)}, record)
	srv.AddTool(&mcp.Tool{Name: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}, record)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	root := t.TempDir()
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: bank: url: %q
tools: read: {side_effecting: false, path_arg: "path", args: {type: "object", properties: path: type: "string"}}
chains: tool: [{use: "file_check", roots: [%q], tools: ["read"]}]
`, ts.URL, root))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, sent)
		return sent[len(sent)-1]
	}

	for _, args := range []string{
		`{"amount":500.0}`, `{"amount":1e2}`, `{"amount":1.50}`, `{"amount":-0.0}`,
		`{"account_id":9007199254740993,"amount":12.30,"memo":"x"}`,
		`{"nested":{"n":[1.0,2E+1,3.000]}}`,
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay", Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
		assert.Equal(t, args, last(), "the upstream receives the arguments as the client wrote them")
	}

	// Text the chain reads as U+FFFD is sent as the chain read it.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay", Arguments: json.RawMessage(`{"memo":"\ud800x","amount":1.0}`)})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.NotContains(t, last(), `\ud800`)

	// file_check hands the upstream the path resolved within its root.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: json.RawMessage(fmt.Sprintf(`{"path":%q,"n":9007199254740995,"x":1.0}`, root+"/sub/../a.txt"))})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	got := last()
	assert.NotContains(t, got, "/sub/../", "the path file_check resolved is sent")
	assert.Contains(t, got, "9007199254740995", "an integer beyond 2^53 keeps its digits")
}

// rawArgsBench is the arguments of a call of n members, each a string, a
// number written with a fraction and a nested object.
func rawArgsBench(n int) json.RawMessage {
	b := []byte("{")
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"k%d":{"memo":"payment %d of the order","amount":%d.50,"tags":["a","b"]}`, i, i, i)
	}
	return append(b, '}')
}

// BenchmarkSentArgs measures what the proxy spends, per call whose chain
// passed its arguments unchanged, telling that it did (withRawArgs's copy
// and sentArgs).
func BenchmarkSentArgs(b *testing.B) {
	for _, n := range []int{4, 256} {
		text := rawArgsBench(n)
		b.Run(fmt.Sprintf("%dB", len(text)), func(b *testing.B) {
			var args map[string]any
			require.NoError(b, runtime.DecodeArgs(text, &args))
			c := &runtime.ToolCall{Name: "pay", Args: args}
			b.ReportAllocs()
			for b.Loop() {
				ctx := withRawArgs(context.Background(), "pay", text, args)
				if _, ok := sentArgs(ctx, c, args).(json.RawMessage); !ok {
					b.Fatal("the arguments are not sent as written")
				}
			}
		})
	}
}

// TestSentArgsWithoutDecodingAgain: the chain's arguments are told
// unchanged without the text decoded again: the map decoded from it, or a
// map a layer handed on equal to it, sends the text as written; a map a
// layer rewrote sends the map, and so does the call of another tool.
func TestSentArgsWithoutDecodingAgain(t *testing.T) {
	text := json.RawMessage(`{"amount":500.0,"memo":"x"}`)
	var args map[string]any
	require.NoError(t, runtime.DecodeArgs(text, &args))
	ctx := withRawArgs(context.Background(), "pay", text, args)
	c := &runtime.ToolCall{Name: "pay"}
	assert.Equal(t, text, sentArgs(ctx, c, args), "the map decoded")
	same := map[string]any{"amount": args["amount"], "memo": "x"}
	assert.Equal(t, text, sentArgs(ctx, c, same), "a map equal to it")
	changed := map[string]any{"amount": args["amount"], "memo": "y"}
	assert.Equal(t, changed, sentArgs(ctx, c, changed), "a map a layer rewrote")
	assert.Equal(t, args, sentArgs(ctx, &runtime.ToolCall{Name: "other"}, args), "another tool's call")
	none := withRawArgs(context.Background(), "pay", json.RawMessage("null"), nil)
	assert.Equal(t, map[string]any{}, sentArgs(none, c, map[string]any{}), "no arguments")
}

// TestSentArgsEditedInPlace: a layer that writes into the arguments it was
// handed (a host's layer that does not keep them read-only), at the top or
// within a nested object or list, has the upstream sent the arguments as
// it left them, not the client's text: the text is sent only for
// arguments equal to the ones it decodes to.
func TestSentArgsEditedInPlace(t *testing.T) {
	text := json.RawMessage(`{"amount":500.0,"memo":"x","to":{"iban":"DE1"},"tags":["a"]}`)
	c := &runtime.ToolCall{Name: "pay"}
	for name, edit := range map[string]func(map[string]any){
		"top":    func(a map[string]any) { a["memo"] = "[REDACTED]" },
		"added":  func(a map[string]any) { a["extra"] = true },
		"nested": func(a map[string]any) { a["to"].(map[string]any)["iban"] = "[REDACTED]" },
		"list":   func(a map[string]any) { a["tags"].([]any)[0] = "[REDACTED]" },
	} {
		var args map[string]any
		require.NoError(t, runtime.DecodeArgs(text, &args))
		ctx := withRawArgs(context.Background(), "pay", text, args)
		edit(args)
		assert.Equal(t, args, sentArgs(ctx, c, args), name)
		shallow := maps.Clone(args)
		assert.Equal(t, shallow, sentArgs(ctx, c, shallow), "%s, handed on in a new map", name)
	}
}
