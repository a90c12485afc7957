package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// reply is one scripted response of a loopback provider.
type reply struct {
	// status is the HTTP status (0: 200, a server-sent event stream).
	status int
	header map[string]string
	// body is an error body, or a transcript of events separated by blank
	// lines, each written and flushed on its own.
	body string
	// gate, when set, is awaited after holdAfter events (or the client
	// leaving, recorded on gone).
	gate      chan struct{}
	holdAfter int
}

// upstream is a loopback provider that replays wire-format transcripts,
// one scripted reply per request (the last one repeats when loop is set),
// and records the requests.
type upstream struct {
	*httptest.Server
	t       testing.TB
	mu      sync.Mutex
	script  []reply
	loop    bool
	bodies  []string
	headers []http.Header
	// gone receives one value per held reply whose client went away.
	gone chan struct{}
}

func newUpstream(t testing.TB, replies ...reply) *upstream {
	u := &upstream{t: t, script: replies, gone: make(chan struct{}, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

// requests returns the number of requests received.
func (u *upstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

func (u *upstream) body(i int) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[i]
}

func (u *upstream) header(i int) http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers[i]
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	n := len(u.bodies)
	u.bodies = append(u.bodies, string(b))
	u.headers = append(u.headers, r.Header.Clone())
	var rep reply
	ok := n < len(u.script)
	switch {
	case ok:
		rep = u.script[n]
	case u.loop && len(u.script) > 0:
		rep, ok = u.script[len(u.script)-1], true
	}
	u.mu.Unlock()
	if !ok {
		u.t.Errorf("upstream: unexpected request %d to %s", n+1, r.URL.Path)
		http.Error(w, "no reply scripted", http.StatusInternalServerError)
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	for i, ev := range events(rep.body) {
		if rep.gate != nil && i == rep.holdAfter {
			select {
			case <-rep.gate:
			case <-r.Context().Done():
				u.gone <- struct{}{}
				return
			case <-time.After(20 * time.Second):
				u.t.Errorf("upstream: a held reply was never released")
				return
			}
		}
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		fl.Flush()
	}
}

// events splits a transcript into its events, each with its blank line.
func events(transcript string) []string {
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

// transcript reads a provider's recorded wire exchange: provider is
// "openai" or "anthropic", name a file of its testdata.
func transcript(t testing.TB, provider, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "providers", provider, "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
