package serve

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// floodUpstream streams an OpenAI answer that never ends, 1 KiB a chunk:
// text, or (tools) the arguments of one tool call. It counts the bytes it
// wrote and signals on cancelled each request whose client went away.
type floodUpstream struct {
	*httptest.Server
	sent      atomic.Int64
	cancelled chan struct{}
}

func newFloodUpstream(t *testing.T, tools bool) *floodUpstream {
	u := &floodUpstream{cancelled: make(chan struct{}, 8)}
	piece := strings.Repeat("a", 1024)
	chunk := func(delta string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { u.cancelled <- struct{}{} }()
		w.Header().Set("Content-Type", "text/event-stream")
		first, next := chunk(`{"role":"assistant","content":"`+piece+`"}`), chunk(`{"content":"`+piece+`"}`)
		if tools {
			first = chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\""}}]}`)
			next = chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"` + piece + `"}}]}`)
		}
		ev := first
		// At most 256 MiB, so that a gateway that reads on without
		// bound fails the test instead of running forever.
		for u.sent.Load() < 256<<20 {
			n, err := fmt.Fprint(w, ev)
			u.sent.Add(int64(n))
			if err != nil || r.Context().Err() != nil {
				return
			}
			w.(http.Flusher).Flush()
			ev = next
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// TestAnAnswerPastMaxAnswerBytesFails: nothing bounded what a model's answer
// may total (an upstream that streams without end, each event under the
// event bound, grew the gateway's memory by the size of the answer: 200
// MB of text took 900 MB for a non-streamed client, 100 MB of tool-call
// arguments as much for a streamed one, which are held until the call is
// checked). Past settings.max_answer_bytes the call fails as an upstream
// failure, in each API's format (an error event in a stream under way),
// and the upstream's request is cancelled.
func TestAnAnswerPastMaxAnswerBytesFails(t *testing.T) {
	const bound = 64 << 10
	for _, tt := range []struct {
		name, path string
		body       []byte
		tools      bool
		status     int
		want       []string
	}{
		{"openai text", "/v1/chat/completions", chatBody("primary", "hi", false), false, 502, []string{`"server_error"`, "max_answer_bytes"}},
		{"openai text streamed", "/v1/chat/completions", chatBody("primary", "hi", true), false, 200, []string{`"error"`, "max_answer_bytes"}},
		{"openai tool call streamed", "/v1/chat/completions", chatBody("primary", "weather?", true), true, 502, []string{`"server_error"`, "max_answer_bytes"}},
		{"anthropic text", "/v1/messages", messagesBody("primary", "hi", false), false, 502, []string{`"api_error"`, "max_answer_bytes"}},
		{"anthropic tool call", "/v1/messages", messagesBody("primary", "weather?", true), true, 502, []string{`"api_error"`, "max_answer_bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := newFloodUpstream(t, tt.tools)
			t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
			t.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
			dir := writePolicy(t, fmt.Sprintf(gatewayPolicy, up.URL, up.URL, sha(clientKey),
				weatherDecl+fmt.Sprintf("\nsettings: max_answer_bytes: %d", bound), `{use: "meter", budget: usd: 100},`))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
			body := tt.body
			if tt.tools {
				body = []byte(strings.Replace(string(body), `"messages"`, `"tools":`+floodTool(tt.path)+`,"messages"`, 1))
			}
			code, _, resp := do(t, "POST", s.url+tt.path, clientKey, body, "anthropic-version", "2023-06-01")
			assert.Equal(t, tt.status, code, "%s", resp)
			for _, w := range tt.want {
				assert.Contains(t, resp, w)
			}
			assert.NotContains(t, resp, "[DONE]")
			assert.NotContains(t, resp, "message_stop")
			select {
			case <-up.cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream's request was not cancelled")
			}
			assert.Less(t, up.sent.Load(), int64(16<<20), "the gateway stopped reading near the bound")
			assert.Eventually(t, func() bool { return strings.Contains(s.logs.String(), "max_answer_bytes") }, 5*time.Second, 10*time.Millisecond)
		})
	}
}

// floodTool is the get_weather tool in the format of the route at path.
func floodTool(path string) string {
	params := `{"type":"object","required":["location"],"properties":{"location":{"type":"string"}}}`
	if path == "/v1/messages" {
		return `[{"name":"get_weather","input_schema":` + params + `}]`
	}
	return `[{"type":"function","function":{"name":"get_weather","parameters":` + params + `}}]`
}
