package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream call whose context ends (its client cancelled it, went away,
// or the shutdown cut it) is answered at once by the SDK, which sends the
// upstream its notifications/cancelled in the background. A session closed
// in between refuses that notification: the upstream never hears of the
// cancellation and the call goes on running there (at a shutdown cut, the
// upstream session closes right after the calls are cut). So each call
// carries a cancelNote in its context; the session's transport marks it
// sent once it has written the call's cancellation, and closing a session
// first waits for the cancellations its calls owe (cancelWait at most).

// cancelWait bounds the wait for a call's cancellation to be written before
// its session is closed. The SDK gives up writing one after 5 s.
const cancelWait = 5 * time.Second

// methodCancelled is the method of a cancellation.
const methodCancelled = "notifications/cancelled"

// cancelNote is the notifications/cancelled an upstream call may owe.
type cancelNote struct {
	once sync.Once
	sent chan struct{}
}

type cancelNoteKey struct{}

// noting returns ctx carrying a new note.
func noting(ctx context.Context) (context.Context, *cancelNote) {
	n := &cancelNote{sent: make(chan struct{})}
	return context.WithValue(ctx, cancelNoteKey{}, n), n
}

// written marks the note of ctx sent (or given up: the write returned).
func written(ctx context.Context) {
	if n, ok := ctx.Value(cancelNoteKey{}).(*cancelNote); ok {
		n.once.Do(func() { close(n.sent) })
	}
}

// owesCancel reports whether a call that returned err on ctx left the SDK
// sending its cancellation: its context ended, and its session was not
// closing (the SDK then sends nothing).
func owesCancel(ctx context.Context, err error) bool {
	return ctx.Err() != nil && err != nil && !errors.Is(err, mcp.ErrConnectionClosed) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// owe notes that n is being sent on cs: closing cs, the current session
// of c, waits for it.
func (c *upstreamConn) owe(cs *mcp.ClientSession, n *cancelNote) {
	c.u.mu.Lock()
	defer c.u.mu.Unlock()
	if c.shut || c.cs != cs {
		return
	}
	ended := c.ended
	c.cancels.Add(1)
	go func() {
		defer c.cancels.Done()
		t := time.NewTimer(cancelWait)
		defer t.Stop()
		select {
		case <-n.sent:
		case <-ended:
		case <-t.C:
		}
	}()
}

// noteConn marks a call's note when its cancellation has been written on a
// stdio session, and keeps the result of a tool call as read (rawResult).
// (A streamable HTTP session is marked by noteTransport: its connection
// must not be wrapped, the SDK reads methods of its own on it.)
type noteConn struct {
	mcp.Connection
	mu    sync.Mutex
	calls map[jsonrpc.ID]*rawResult // the tool calls written, by request id
	// seen is told each message read, as it is read (nil: none is).
	seen func(jsonrpc.Message)
}

func (c *noteConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.watchCall(ctx, msg)
	err := c.Connection.Write(ctx, msg)
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == methodCancelled {
		written(ctx)
	}
	return err
}

func (c *noteConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.readCall(msg)
		if c.seen != nil {
			c.seen(msg)
		}
	}
	return msg, err
}

// noteCommand is a command transport whose connection marks the notes,
// and tells seen each message read.
type noteCommand struct {
	*mcp.CommandTransport
	seen func(jsonrpc.Message)
}

func (t noteCommand) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &noteConn{Connection: c, calls: map[jsonrpc.ID]*rawResult{}, seen: t.seen}, nil
}

// noteTransport marks a call's note when the POST of its cancellation to a
// streamable HTTP server has returned, and has the response bodies of a
// tool call keep its result as read, telling seen each message read there
// (watchBody).
type noteTransport struct {
	base http.RoundTripper
	seen func(jsonrpc.Message)
}

func (t noteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, ok := r.Context().Value(cancelNoteKey{}).(*cancelNote); !ok {
		return t.base.RoundTrip(r)
	}
	var msg jsonrpc.Message
	if r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(body)
			_ = body.Close()
			msg, _ = jsonrpc.DecodeMessage(b)
		}
	}
	req, _ := msg.(*jsonrpc.Request)
	resp, err := t.base.RoundTrip(r)
	if req != nil && req.Method == methodCancelled {
		written(r.Context())
	}
	if err == nil {
		watchBody(r, req, resp, t.seen)
	}
	return resp, err
}
