package credential

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVar(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        bool
	}{
		{"GITHUB_TOKEN", "x", true},
		{"DB_PASSWORD", "x", true},
		{"OPENAI_API_KEY", "x", true},
		{"SSH_KEY", "x", true},
		{"NPM_AUTH", "x", true},
		{"KEY", "x", true},
		{"GH", "ghp_0123456789abcdefABCDEF0123456789", true},
		{"IDENTITY", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", true},
		{"LOG_LEVEL", "info", false},
		{"PROJECT_DIR", "/srv/project", false},
		{"KEYBOARD", "us", false},
		{"AUTHOR", "someone", false},
		{"HTTPS_PROXY", "http://proxy:3128", false},
		{"CERT", "-----BEGIN CERTIFICATE-----\nMIIE\n-----END CERTIFICATE-----", false},
		{"", "", false},
	} {
		assert.Equal(t, c.want, Var(c.name, c.value), "%s=%q", c.name, c.value)
	}
}

// One list of shapes serves vet (Value, Var: a credential written out in
// a policy) and the scrubber (Scrub, Redact: one quoted in a text): a
// value of each shape is a credential to both, written alone or quoted.
func TestOneListOfShapes(t *testing.T) {
	for _, v := range []string{
		"ghp_0123456789abcdefABCDEF0123456789",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
		"glpat-0123456789abcdefghij",
		"sk-proj-UPSTREAMSECRETKEY1234567890",
		"sk-ant-api03-SECRETSECRETSECRET00",
		"sk_live_0123456789abcdefABCD",
		"xoxb-0123456789-abcdefghij",
		"AKIAABCDEFGHIJKLMNOP",
		"AIzaSyA1234567890abcdefghijklmnopqrstuv",
		"AIzaSyA_234567890abcdefghijklmnopqrs-uv",
		"hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
		"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0123456789abcdef\n-----END RSA PRIVATE KEY-----",
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA0123456789\n-----END OPENSSH PRIVATE KEY-----\n",
	} {
		assert.True(t, Value().MatchString(v), "Value: %q", v)
		assert.True(t, Var("", v), "Var: %q", v)
		for _, in := range []string{v, "error: open /data/" + v + ": denied"} {
			got := Scrub(in)
			assert.Contains(t, got, "[redacted sha256 ", in)
			assert.NotContains(t, got, v[len(v)/2:], in)
			assert.NotContains(t, Redact(in), v[len(v)/2:], in)
		}
	}
	for _, v := range []string{"sk-short", "hf_short", "AIzaShort", "Bearer short", "-----BEGIN CERTIFICATE-----\nMIIE\n-----END CERTIFICATE-----", "AGENTC_SUPPORT_KEY"} {
		assert.False(t, Value().MatchString(v), "Value: %q", v)
		assert.Equal(t, v, Scrub(v))
	}
}
