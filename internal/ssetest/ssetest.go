// Package ssetest replays provider transcripts from a loopback HTTP server,
// for the provider clients' and the gateway's tests and benchmarks: byte-exact server-sent
// event streams read from testdata, error responses with their headers, a
// connection dropped mid-stream, a stream held open until the client goes
// away, and a stream held at an event until the test releases it.
package ssetest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Reply is one scripted response.
type Reply struct {
	// Status is the HTTP status (0: 200).
	Status int
	// Header holds response headers (retry-after...). A 200 reply is sent
	// as text/event-stream unless it sets Content-Type.
	Header map[string]string
	// Body is the raw body. A 200 body is a transcript of events separated
	// by blank lines; each event is written and flushed on its own.
	Body string
	// DropAfter, when > 0, aborts the connection after that many events,
	// without ending the response.
	DropAfter int
	// HoldOpen keeps the response open after the last event until the
	// client goes away (recorded by Server.Gone).
	HoldOpen bool
	// Gate, when set, is awaited after HoldAfter events before the rest is
	// sent; a client that goes away meanwhile is recorded by Server.Gone.
	Gate      chan struct{}
	HoldAfter int
}

// Server serves its replies in order, one per request, and records the
// requests.
type Server struct {
	*httptest.Server
	t       testing.TB
	mu      sync.Mutex
	replies []Reply
	bodies  [][]byte
	headers []http.Header
	times   []time.Time
	// Gone receives one value when a HoldOpen reply sees its client leave.
	Gone  chan struct{}
	conns atomic.Int64
	open  atomic.Int64
}

// Conns returns the number of connections the server accepted.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Open returns the number of connections accepted and not yet closed (an
// idle keep-alive connection counts).
func (s *Server) Open() int { return int(s.open.Load()) }

// New starts a loopback server that serves replies; it closes at the end of
// the test. A request beyond the replies fails the test.
func New(t testing.TB, replies ...Reply) *Server {
	s := &Server{t: t, replies: replies, Gone: make(chan struct{}, len(replies)+1)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
			s.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// Bodies returns the request bodies received, in order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// Headers returns the request headers received, in order.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// Times returns when each request arrived.
func (s *Server) Times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

// Requests returns the number of requests received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.times = append(s.times, time.Now())
	var rep Reply
	ok := n < len(s.replies)
	if ok {
		rep = s.replies[n]
	}
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("ssetest: unexpected request %d to %s", n+1, r.URL.Path)
		http.Error(w, "no reply scripted", http.StatusInternalServerError)
		return
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	if status != http.StatusOK {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	w.WriteHeader(status)
	fl := w.(http.Flusher)
	fl.Flush()
	for i, ev := range Events(rep.Body) {
		if rep.DropAfter > 0 && i == rep.DropAfter {
			panic(http.ErrAbortHandler) // the connection closes mid-response
		}
		if rep.Gate != nil && i == rep.HoldAfter {
			select {
			case <-rep.Gate:
			case <-r.Context().Done():
				s.Gone <- struct{}{}
				return
			case <-time.After(20 * time.Second):
				s.t.Errorf("ssetest: a held reply was never released")
				return
			}
		}
		if _, err := io.WriteString(w, ev); err != nil {
			if rep.HoldOpen { // the client left before the last event
				s.Gone <- struct{}{}
			}
			return
		}
		fl.Flush()
	}
	if rep.HoldOpen {
		select {
		case <-r.Context().Done():
			s.Gone <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}
}

// Events splits a transcript into its events, each with its terminating
// blank line.
func Events(transcript string) []string {
	var out []string
	for len(transcript) > 0 {
		i := strings.Index(transcript, "\n\n")
		if i < 0 {
			out = append(out, transcript)
			break
		}
		out = append(out, transcript[:i+2])
		transcript = transcript[i+2:]
	}
	return out
}

// File returns the content of a testdata file.
func File(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("ssetest: %v", err)
	}
	return string(b)
}

// Transcript returns the content of a testdata transcript, checking that it
// ends with the blank line that ends its last event.
func Transcript(t testing.TB, name string) string {
	t.Helper()
	b := []byte(File(t, name))
	if !bytes.HasSuffix(b, []byte("\n\n")) {
		t.Fatalf("ssetest: %s does not end with a blank line", name)
	}
	return string(b)
}

// EventData returns the data of every `data:` line of the testdata
// transcripts (testdata/*.sse): a fuzz target's seeds.
func EventData(t testing.TB) [][]byte {
	t.Helper()
	names, err := filepath.Glob("testdata/*.sse")
	if err != nil {
		t.Fatalf("ssetest: %v", err)
	}
	var out [][]byte
	for _, name := range names {
		for line := range strings.Lines(File(t, filepath.Base(name))) {
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				out = append(out, []byte(data))
			}
		}
	}
	return out
}
