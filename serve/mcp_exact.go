package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/agentc-dev/agentc/runtime"
)

// The MCP client decodes an upstream's tools/call result with every number
// of its structured content and _meta a float64, so an integer above 2^53
// (an account id of 9007199254740993) would be checked by the tool chain
// and relayed to the client as its neighbour. So each call carries a
// rawResult in its context: the session's transport keeps there the JSON
// text of the call's result as the upstream wrote it (a stdio connection
// from the message it reads, an HTTP one from the response body the SDK
// reads, the POST's or that of a stream resumed for it), and the proxy
// reads those two members from it again, numbers as runtime.DecodeArgs
// decodes them (exactResult).

// rawResult is the JSON text of one call's result, once its response has
// been read.
type rawResult struct {
	mu     sync.Mutex
	id     jsonrpc.ID // the call's request id, once written
	result json.RawMessage
	forget func() // drops the call from its stdio connection's table
}

type rawResultKey struct{}

// withRawResult returns ctx carrying a new rawResult.
func withRawResult(ctx context.Context) (context.Context, *rawResult) {
	r := &rawResult{}
	return context.WithValue(ctx, rawResultKey{}, r), r
}

func rawResultOf(ctx context.Context) *rawResult {
	r, _ := ctx.Value(rawResultKey{}).(*rawResult)
	return r
}

// setID records the id of the call written.
func (r *rawResult) setID(id jsonrpc.ID) {
	r.mu.Lock()
	r.id = id
	r.mu.Unlock()
}

// read keeps msg's result when msg is the first response to the call, the
// one the MCP client reads (it drops a later one, which answers no call
// pending).
func (r *rawResult) read(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || len(resp.Result) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.id.IsValid() && resp.ID == r.id && r.result == nil {
		r.result = bytes.Clone(resp.Result)
	}
}

// done drops the call from its connection's table and returns the result
// kept, nil when none was.
func (r *rawResult) done() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forget != nil {
		r.forget()
		r.forget = nil
	}
	return r.result
}

// exactResult replaces res's structured content and _meta by their reading
// from raw, the JSON text of the result the upstream wrote, numbers as
// runtime.DecodeArgs decodes them. Without raw, or where it does not read
// (never, for a result the SDK decoded from it), res is left as it is.
func exactResult(res *mcp.CallToolResult, raw json.RawMessage) {
	if res == nil || len(raw) == 0 {
		return
	}
	var w struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
		Meta              json.RawMessage `json:"_meta"`
	}
	// Read as the MCP client reads the result: its members by their exact
	// names (encoding/json would take StructuredContent or _META, the
	// last of them, for a member the client ignores).
	dec := fastjson.NewDecoder(bytes.NewReader(raw))
	dec.DontMatchCaseInsensitiveStructFields()
	if dec.Decode(&w) != nil {
		return
	}
	if len(w.StructuredContent) > 0 && string(w.StructuredContent) != "null" {
		var v any
		if runtime.DecodeArgs(w.StructuredContent, &v) == nil {
			res.StructuredContent = v
		}
	}
	if len(w.Meta) > 0 && string(w.Meta) != "null" {
		var m map[string]any
		if runtime.DecodeArgs(w.Meta, &m) == nil && m != nil {
			res.Meta = m
		}
	}
}

// methodCallTool is the method of a tool call.
const methodCallTool = "tools/call"

// watchCall notes the id of a tool call written on a stdio connection, so
// that the connection's reader keeps its result.
func (c *noteConn) watchCall(ctx context.Context, msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != methodCallTool {
		return
	}
	r := rawResultOf(ctx)
	if r == nil {
		return
	}
	r.setID(req.ID)
	c.mu.Lock()
	c.calls[req.ID] = r
	c.mu.Unlock()
	r.mu.Lock()
	if r.forget != nil {
		r.forget() // the call was sent before, on a session that ended
	}
	r.forget = func() {
		c.mu.Lock()
		delete(c.calls, req.ID)
		c.mu.Unlock()
	}
	r.mu.Unlock()
}

// readCall keeps the result of a watched call from a message read.
func (c *noteConn) readCall(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	c.mu.Lock()
	r := c.calls[resp.ID]
	delete(c.calls, resp.ID)
	c.mu.Unlock()
	if r != nil {
		r.read(msg)
	}
}

// watchBody has the response body of an HTTP request of a tool call (its
// POST, req, or a GET resuming its stream) keep the call's result as the
// SDK reads it.
func watchBody(r *http.Request, req *jsonrpc.Request, resp *http.Response, seen func(jsonrpc.Message)) {
	raw := rawResultOf(r.Context())
	if raw == nil || resp.StatusCode != http.StatusOK {
		return
	}
	switch {
	case r.Method == http.MethodGet:
	case req != nil && req.IsCall() && req.Method == methodCallTool:
		raw.setID(req.ID)
	default:
		return
	}
	ct := strings.ToLower(strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]))
	switch ct {
	case "application/json", "text/event-stream":
		resp.Body = &resultBody{ReadCloser: resp.Body, raw: raw, events: ct == "text/event-stream", seen: seen}
	}
}

// resultBody passes a response body through, reading the messages in it
// as the SDK reads them: the body whole (application/json), or the data of
// each event of an event stream that is unnamed or named "message" (the
// SDK skips the others). The response to the call has its result
// kept before the SDK has read the message's last byte. What it holds at a
// time is bounded as the SDK bounds a message (maxUpstreamMessageBytes);
// past that the message is not read.
type resultBody struct {
	io.ReadCloser
	raw    *rawResult
	events bool
	line   []byte // the event stream's line being read
	data   []byte // the message being read
	over   bool   // the message is over the bound
	other  bool   // the event is named, other than "message"
	// seen is told each message read (nil: none is).
	seen func(jsonrpc.Message)
}

func (b *resultBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.events {
		b.readEvents(p[:n])
	} else {
		b.add(&b.data, p[:n])
		if err == io.EOF {
			b.message()
		}
	}
	return n, err
}

// add appends p to buf as far as the bound.
func (b *resultBody) add(buf *[]byte, p []byte) {
	if b.over || len(*buf)+len(p) > maxUpstreamMessageBytes {
		b.over = true
		return
	}
	*buf = append(*buf, p...)
}

// readEvents reads the lines of an event stream: a "data:" line adds to
// the message, an "event:" line names it, a blank line ends it.
func (b *resultBody) readEvents(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.add(&b.line, p)
			return
		}
		b.add(&b.line, p[:i])
		p = p[i+1:]
		line := bytes.TrimSuffix(b.line, []byte("\r"))
		switch {
		case len(line) == 0:
			b.message()
		case bytes.HasPrefix(line, []byte("event:")):
			name := bytes.TrimSpace(line[len("event:"):])
			b.other = len(name) > 0 && string(name) != "message"
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimSpace(line[len("data:"):])
			if len(b.data) > 0 {
				b.add(&b.data, []byte("\n"))
			}
			b.add(&b.data, v)
		}
		b.line = b.line[:0]
	}
}

// message reads the message gathered and starts the next.
func (b *resultBody) message() {
	if !b.over && !b.other && len(b.data) > 0 {
		if msg, err := jsonrpc.DecodeMessage(b.data); err == nil {
			b.raw.read(msg)
			if b.seen != nil {
				b.seen(msg)
			}
		}
	}
	b.data, b.over, b.other = b.data[:0], false, false
}
