package serve

import (
	"context"
	"net/http"
	"sync"
)

// liveSessions follows the MCP sessions' requests for the shutdown. A
// session's standalone event stream (its GET) carries no call and never
// ends by itself: a graceful shutdown that waited for it would always run
// to the end of its grace period and cut the connections. So the shutdown
// ends each session's stream once no POST of that session is in flight
// (at once for an idle session): a call in flight keeps its session's
// stream, which the client reads while it waits for the answer, until the
// call is answered.
type liveSessions struct {
	mu       sync.Mutex
	sessions map[string]*liveSession
	ending   bool
}

type liveSession struct {
	posts   int
	streams map[*http.Request]context.CancelFunc
}

// begin registers r and returns it, a GET bound to a context the shutdown
// cancels, and the func to call when r ends.
func (l *liveSessions) begin(r *http.Request) (*http.Request, func()) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" || (r.Method != http.MethodGet && r.Method != http.MethodPost) {
		return r, func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions == nil {
		l.sessions = map[string]*liveSession{}
	}
	ls := l.sessions[id]
	if ls == nil {
		ls = &liveSession{streams: map[*http.Request]context.CancelFunc{}}
		l.sessions[id] = ls
	}
	if r.Method == http.MethodPost {
		ls.posts++
		return r, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			ls.posts--
			l.settle(id, ls)
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	r = r.WithContext(ctx)
	ls.streams[r] = cancel
	l.settle(id, ls)
	return r, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(ls.streams, r)
		cancel()
		l.settle(id, ls)
	}
}

// end starts the shutdown: every session's stream ends once its session
// has no POST in flight.
func (l *liveSessions) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ending = true
	for id, ls := range l.sessions {
		l.settle(id, ls)
	}
}

// settle ends ls's streams when the server is shutting down and no POST
// of it is in flight, and forgets a session with nothing open. l.mu is
// held.
func (l *liveSessions) settle(id string, ls *liveSession) {
	if l.ending && ls.posts == 0 {
		for _, cancel := range ls.streams {
			cancel()
		}
	}
	if ls.posts == 0 && len(ls.streams) == 0 {
		delete(l.sessions, id)
	}
}
