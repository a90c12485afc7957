package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// What a client writes reaches the access log as a value of one line,
// whichever slog format the gateway writes: a newline, a carriage return
// or a terminal escape in a path, a model name, a run id or a key cannot
// forge a line or recolour a terminal; and the log holds neither the key
// presented nor the prompt.
func TestAccessLogHoldsClientTextOnOneLine(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			logs := &rt.LogBuffer{}
			var h slog.Handler = slog.NewTextHandler(logs, nil)
			if format == "json" {
				h = slog.NewJSONHandler(logs, nil)
			}
			g := newGateway(t, `{use: "pii", action: "block"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil,
				func(o *Options) { o.Logger = slog.New(h) })
			forged := "\n" + `time=2026-01-01T00:00:00Z level=INFO msg=request status=200 tenant=admin` + "\r\x1b[2K\x1b[31m"
			sent := 0
			send := func(method, path, key string, body []byte, header ...string) string {
				t.Helper()
				// Written by hand: a client is not bound to what net/http
				// would send.
				conn, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
				require.NoError(t, err)
				defer conn.Close()
				var req bytes.Buffer
				fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, len(body))
				if key != "" {
					fmt.Fprintf(&req, "Authorization: Bearer %s\r\n", key)
				}
				for i := 0; i+1 < len(header); i += 2 {
					fmt.Fprintf(&req, "%s: %s\r\n", header[i], header[i+1])
				}
				req.WriteString("\r\n")
				req.Write(body)
				_, err = conn.Write(req.Bytes())
				require.NoError(t, err)
				var b [4096]byte
				n, _ := conn.Read(b[:])
				require.True(t, bytes.HasPrefix(b[:n], []byte("HTTP/1.1 ")), "%q", b[:n])
				sent++
				return string(b[:n])
			}
			// A header holding a control character is refused by net/http
			// before any route: no line is written for it.
			refused := func(resp string) {
				t.Helper()
				assert.True(t, strings.HasPrefix(resp, "HTTP/1.1 400 Bad Request"), resp)
				sent--
			}
			model, _ := json.Marshal("primary" + forged)
			send("POST", "/v1/chat/completions%0Atime=x%20level=INFO%0D%1B%5B31m", clientKey, chatBody("primary", "hi", false))
			send("POST", "/v1/chat/completions", clientKey, []byte(`{"model":`+string(model)+`,"messages":[{"role":"user","content":"hi"}]}`))
			refused(send("POST", "/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, "run\x1b[31m"))
			refused(send("POST", "/v1/chat/completions", "sk-presented-\x1b[31m-secret", chatBody("primary", "hi", false)))
			refused(send("POST", "/v1/chat/completions", clientKey, chatBody("primary", "hi", false), "User-Agent", "agent\x1b[31m"))
			send("POST", "/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, `a"b=c\`)
			send("POST", "/v1/chat/completions", "sk-presented-secret", chatBody("primary", "hi", false))
			send("POST", "/v1/chat/completions", clientKey, chatBody("primary", "write to jane.roe@example.com", false))

			out := logs.String()
			var lines []string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if strings.Contains(l, "msg=request") || strings.Contains(l, `"msg":"request"`) {
					lines = append(lines, l)
				}
			}
			assert.Len(t, lines, sent, "one line per request:\n%s", out)
			assert.NotContains(t, out, "\x1b", "no terminal escape reaches the log")
			assert.NotContains(t, out, "\r")
			assert.NotContains(t, out, "\ntime=x", "no line forged")
			assert.NotContains(t, out, "\ntime=2026-01-01", "no line forged")
			assert.NotContains(t, out, "sk-presented", "a presented key is not logged")
			assert.NotContains(t, out, clientKey)
			assert.NotContains(t, out, "jane.roe", "nor the prompt")
			if format == "json" {
				for _, l := range lines {
					var rec map[string]any
					require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
				}
			}
		})
	}
}
