package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowsersOfOtherSitesAreRefused: under a policy without keys, a web
// page the operator visited could have its browser post a chat request to
// the gateway on 127.0.0.1 as text or a form (a request a browser sends
// without asking), served on the operator's providers. It is refused with
// a 403; SDK clients, which send neither Sec-Fetch-Site nor Origin, are
// served.
func TestBrowsersOfOtherSitesAreRefused(t *testing.T) {
	g := newRebindGateway(t, false)
	s, calls := g.served, g.calls
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	send := func(host string, header ...string) (int, string) {
		req, err := http.NewRequest("POST", s.url+"/v1/chat/completions", strings.NewReader(chat))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := send("", "Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, `"code":"cross_origin"`)
	code, body = send("", "Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Zero(t, calls.Load(), "no refused request reached the model")

	code, body = send("")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = send("localhost:8080", "Sec-Fetch-Site", "same-origin", "Origin", "http://localhost:8080")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = send("", "anthropic-version", "2023-06-01", "Sec-Fetch-Site", "none")
	assert.Equal(t, http.StatusOK, code, body)
	code, _, body = do(t, "GET", s.url+"/v1/models", "", nil, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusOK, code, "a GET changes nothing: %s", body)
	assert.EqualValues(t, 3, calls.Load())
}
