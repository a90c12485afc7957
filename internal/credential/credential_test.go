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
