package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// An upstream whose stream holds an event over the 16 MiB bound fails the
// call with a 502 that names the limit, for either API, and the upstream's
// key appears nowhere.
func TestUpstreamEventOverTheBoundIs502(t *testing.T) {
	huge := "data: " + strings.Repeat("x", 17<<20) + "\n\n"
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: huge}},
		[]reply{{body: "event: message_start\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":5}}}` + "\n\nevent: content_block_delta\n" + huge}})
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
		[]byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}]}`))
	assert.Equal(t, http.StatusBadGateway, code, resp)
	assert.Contains(t, resp, "16 MiB")
	code, _, resp2 := do(t, "POST", g.url+"/v1/messages", clientKey,
		[]byte(`{"model": "backup", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}`), "anthropic-version", "2023-06-01")
	assert.Equal(t, http.StatusBadGateway, code, resp2)
	assert.Contains(t, resp2, "16 MiB")
	g.noLeak(t, resp, resp2)
}
