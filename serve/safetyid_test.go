package serve

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyReadsTheSafetyIdentifier: safety_identifier, the end user's id
// OpenAI's API names in place of user, was forwarded (to a Claude model as
// metadata.user_id) but not read by the policy, whose
// request.params.metadata.user_id held user or nothing: a guard on the end
// user let a banned user through, and with both sent it read one id while
// Anthropic's API received the other. The policy reads the id the
// provider is sent: safety_identifier when there is one, else user.
func TestPolicyReadsTheSafetyIdentifier(t *testing.T) {
	const deny = `{use: "guard", name: "banned", deny: "request.params.metadata.?user_id.orValue('') == 'banned-user'", message: "no"}`
	cases := map[string]string{
		"/v1/chat/completions safety_identifier": `{"model": "primary", "safety_identifier": "banned-user", "messages": [{"role": "user", "content": "hi"}]}`,
		"/v1/chat/completions claude":            `{"model": "backup", "safety_identifier": "banned-user", "messages": [{"role": "user", "content": "hi"}]}`,
		"/v1/chat/completions both":              `{"model": "backup", "user": "alice", "safety_identifier": "banned-user", "messages": [{"role": "user", "content": "hi"}]}`,
		"/v1/responses safety_identifier":        `{"model": "primary", "safety_identifier": "banned-user", "input": "hi"}`,
		"/v1/responses both":                     `{"model": "backup", "user": "alice", "safety_identifier": "banned-user", "input": "hi"}`,
	}
	g := newGateway(t, deny, nil, nil)
	for what, body := range cases {
		code, resp := postRoute(t, g, what, body)
		assert.Equal(t, http.StatusForbidden, code, "%s: %s", what, resp)
	}
	assert.Zero(t, g.an.requests())
	assert.Zero(t, g.oa.requests())

	// The user banned, the safety identifier another: the provider is
	// sent the latter, and so the guard reads it.
	g = newGateway(t, deny, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, resp := postRoute(t, g, "/v1/chat/completions", `{"model": "backup", "user": "banned-user", "safety_identifier": "carol", "messages": [{"role": "user", "content": "hi"}]}`)
	require.Equal(t, http.StatusOK, code, resp)
	assert.Equal(t, map[string]any{"user_id": "carol"}, sentTo(t, g.an, 0)["metadata"])
}
