package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// burstTranscript is a stream of n text events in a provider's wire
// format (with its opening and closing events), and the text they spell.
func burstTranscript(provider string, n int) (events []string, text string) {
	var words strings.Builder
	for i := range n {
		w := fmt.Sprintf("w%d ", i)
		words.WriteString(w)
		if provider == "openai" {
			events = append(events, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"`+w+`"},"finish_reason":null}]}`+"\n\n")
		} else {
			events = append(events, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+w+`"}}`+"\n\n")
		}
	}
	if provider == "openai" {
		events = append(events,
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`+"\n\n",
			"data: [DONE]\n\n")
		return events, words.String()
	}
	events = append([]string{
		"event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n",
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n",
	}, events...)
	events = append(events,
		"event: content_block_stop\n"+`data: {"type":"content_block_stop","index":0}`+"\n\n",
		"event: message_delta\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`+"\n\n",
		"event: message_stop\n"+`data: {"type":"message_stop"}`+"\n\n")
	return events, words.String()
}

// flushCounter counts the flushes of a response.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (f flushCounter) FlushError() error {
	f.n.Add(1)
	return http.NewResponseController(f.ResponseWriter).Flush()
}

func (f flushCounter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// coalesceGateway serves typicalChain in front of one loopback upstream
// that answers with handler, counting the flushes of the gateway's
// responses on flushes.
func coalesceGateway(t *testing.T, handler http.HandlerFunc) (url string, flushes *atomic.Int64) {
	t.Helper()
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	t.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	up := httptest.NewServer(handler)
	t.Cleanup(up.Close)
	dir := writePolicy(t, fmt.Sprintf(gatewayPolicy, up.URL, up.URL, sha(clientKey), weatherDecl, typicalChain))
	srv, err := New(context.Background(), Options{Source: cueSource(dir), WatchInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	flushes = &atomic.Int64{}
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(flushCounter{w, flushes}, r)
	}))
	t.Cleanup(gw.Close)
	return gw.URL, flushes
}

// coalesceCases are the two routes, each over its provider's wire format.
var coalesceCases = []struct {
	provider, route, model string
	body                   func(model, text string, stream bool) []byte
}{
	{"openai", "/v1/chat/completions", "primary", chatBody},
	{"anthropic", "/v1/messages", "backup", messagesBody},
}

// TestStreamBurstIsRelayedInFewWrites: events the upstream sent in one
// write reach the client in a few flushes, not one per event.
func TestStreamBurstIsRelayedInFewWrites(t *testing.T) {
	const n = 60
	for _, tc := range coalesceCases {
		t.Run(tc.provider, func(t *testing.T) {
			events, text := burstTranscript(tc.provider, n)
			url, flushes := coalesceGateway(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte(strings.Join(events, "")))
			})
			code, _, body := do(t, "POST", url+tc.route, clientKey, tc.body(tc.model, "Hello", true))
			require.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, text, streamedText(body), "every event is relayed, in order")
			t.Logf("%d events, %d flushes", n, flushes.Load())
			assert.Less(t, flushes.Load(), int64(n/5), "a burst of %d events is flushed in few writes, not one per event", n)
		})
	}
}

// TestStreamEventBeforeAPauseIsNotHeld: the events that arrived before the
// upstream pauses reach the client while it pauses.
func TestStreamEventBeforeAPauseIsNotHeld(t *testing.T) {
	for _, tc := range coalesceCases {
		t.Run(tc.provider, func(t *testing.T) {
			events, _ := burstTranscript(tc.provider, 6)
			head := 3
			if tc.provider == "anthropic" {
				head = 5 // message_start, content_block_start and three deltas
			}
			resume := make(chan struct{})
			url, _ := coalesceGateway(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte(strings.Join(events[:head], "")))
				http.NewResponseController(w).Flush()
				select {
				case <-resume:
				case <-r.Context().Done():
					return
				}
				_, _ = w.Write([]byte(strings.Join(events[head:], "")))
			})
			// The client runs apart, so that a gateway holding the events
			// (its response headers included) fails the test instead of
			// blocking it.
			seen := make(chan string, 1)
			go func() {
				var got strings.Builder
				defer func() { seen <- got.String() }()
				req, err := http.NewRequest("POST", url+tc.route, bytes.NewReader(tc.body(tc.model, "Hello", true)))
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+clientKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				r := bufio.NewReader(resp.Body)
				for {
					line, err := r.ReadString('\n')
					got.WriteString(line)
					if err != nil || strings.Contains(line, "w2 ") {
						return
					}
				}
			}()
			select {
			case got := <-seen:
				assert.Contains(t, got, "w2 ", "the third text event arrived before the upstream resumed")
			case <-time.After(10 * time.Second):
				t.Error("the events sent before the upstream paused did not reach the client while it paused")
				close(resume)
				<-seen
				return
			}
			close(resume)
		})
	}
}

// streamedText joins the texts of a streamed response in either format.
func streamedText(body string) string {
	var out strings.Builder
	for _, line := range strings.Split(body, "\n") {
		for _, key := range []string{`"content":"`, `"text_delta","text":"`} {
			if i := strings.Index(line, key); i >= 0 {
				rest := line[i+len(key):]
				out.WriteString(rest[:strings.IndexByte(rest, '"')])
			}
		}
	}
	return out.String()
}
