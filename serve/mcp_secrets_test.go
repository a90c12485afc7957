package serve

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSecretsMultilineValue: each line of a credential of several lines,
// of minSecretLine bytes or more, is scrubbed on its own from errors and
// results, where a tool or an upstream quotes one line of it; a shorter
// line is not, and the whole value is scrubbed whole.
func TestSecretsMultilineValue(t *testing.T) {
	var s secrets
	s.add("-----BEGIN PRIVATE KEY-----\r\nMIIEvQIBADANBgkq\r\nAB==\r\n-----END PRIVATE KEY-----")
	assert.Equal(t, "key [redacted] end", s.scrub("key -----BEGIN PRIVATE KEY-----\r\nMIIEvQIBADANBgkq\r\nAB==\r\n-----END PRIVATE KEY----- end"))
	assert.Equal(t, "bad line [redacted] at 2", s.scrub("bad line MIIEvQIBADANBgkq at 2"))
	assert.Equal(t, "AB== is short", s.scrub("AB== is short"))
	assert.Equal(t, map[string]any{"k": "[redacted]"}, s.value(map[string]any{"k": "MIIEvQIBADANBgkq"}))
	assert.EqualError(t, s.err(errors.New("parse MIIEvQIBADANBgkq")), "parse [redacted]")
}

// TestSecretsCut: a text cut at a bound in the middle of a credential
// keeps none of it.
func TestSecretsCut(t *testing.T) {
	var s secrets
	s.add("passed-token-value")
	assert.Equal(t, "login with ", s.cut("login with passed-tok"))
	assert.Equal(t, "[redacted] and ", s.cut("passed-token-value and p"))
	assert.Equal(t, "login with x", s.cut("login with x"))
}
