package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

// reply is one scripted response of a loopback provider (ssetest.Reply).
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
// one scripted reply per request, and records the requests.
type upstream struct {
	*ssetest.Server
	// gone receives one value per held reply whose client went away.
	gone chan struct{}
}

func newUpstream(t testing.TB, replies ...reply) *upstream {
	rs := make([]ssetest.Reply, len(replies))
	for i, r := range replies {
		rs[i] = ssetest.Reply{Status: r.status, Header: r.header, Body: r.body, Gate: r.gate, HoldAfter: r.holdAfter}
	}
	s := ssetest.New(t, rs...)
	return &upstream{Server: s, gone: s.Gone}
}

// requests returns the number of requests received.
func (u *upstream) requests() int { return u.Requests() }

func (u *upstream) body(i int) string { return string(u.Bodies()[i]) }

func (u *upstream) header(i int) http.Header { return u.Headers()[i] }

// events splits a transcript into its events, each with its blank line.
func events(transcript string) []string { return ssetest.Events(transcript) }

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
