package redact_test

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/runtime"
)

// A private key cut across two paged tool results: the second page's body, without the BEGIN
// line, is still key material. Its lines up to an END line of a private key are masked, and
// so is a body that starts where a key's DER encoding starts; a certificate's or a public
// key's body is left as it is, as their PEM blocks are.
func TestPrivateKeyBodyWithoutHeader(t *testing.T) {
	for _, name := range privateKeys {
		block := testKeys()[name]
		lines := strings.Split(block, "\n")
		pages := map[string]string{
			"after the BEGIN line":    strings.Join(lines[1:], "\n"),
			"body without END line":   strings.Join(lines[1:len(lines)-1], "\n"),
			"after the first line":    strings.Join(lines[2:], "\n"),
			"body on one line":        strings.Join(lines[1:len(lines)-1], ""),
			"body in a JSON document": fmt.Sprintf(`{"page":2,"text":%q}`, strings.Join(lines[1:], "\n")),
		}
		if len(lines) < 4 {
			delete(pages, "after the first line") // the body is one line
		}
		for pname, page := range pages {
			t.Run(name+"/"+pname, func(t *testing.T) {
				got := sendThrough(t, []runtime.Message{{Role: "tool", ToolCallID: "c2", Content: page}})[0].Content
				assertNoKeyBody(t, got, block)
				assert.Contains(t, got, "[REDACTED:private-key]")
			})
		}
	}
	for _, name := range []string{"certificate", "public key"} {
		block := testKeys()[name]
		lines := strings.Split(block, "\n")
		for pname, page := range map[string]string{
			"whole":                block,
			"after the BEGIN line": strings.Join(lines[1:], "\n"),
			"body on one line":     strings.Join(lines[1:len(lines)-1], ""),
		} {
			t.Run(name+"/"+pname, func(t *testing.T) {
				got := sendThrough(t, []runtime.Message{{Role: "tool", ToolCallID: "c2", Content: page}})[0].Content
				assert.Equal(t, page, got, "public material is left as it is")
			})
		}
	}
}

// An OpenSSH private key's body is masked too; random base64 that begins as a DER body
// would ("M") is not, nor is a key body when the default rules are off.
func TestPrivateKeyBodyShapes(t *testing.T) {
	r, err := redact.New(redact.Config{})
	require.NoError(t, err)
	rnd := rand.New(rand.NewPCG(3, 4))
	bytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	ssh := base64.StdEncoding.EncodeToString(append([]byte("openssh-key-v1\x00"), bytes(300)...))
	got, n := r.Redact("page 2:\n" + ssh[:70] + "\n" + ssh[70:140] + "\n" + ssh[140:] + "\n")
	assert.Equal(t, "page 2:\n[REDACTED:private-key]\n", got)
	assert.Equal(t, 1, n)

	for range 2000 {
		b := bytes(120)
		b[0] = 0x30 // base64 starting with "M"
		text := base64.StdEncoding.EncodeToString(b)
		_, n := r.Redact(text)
		require.Zero(t, n, text)
	}

	off, err := redact.New(redact.Config{DisableDefaults: true, Patterns: []redact.Pattern{{ID: "x", Regex: "nothing"}}})
	require.NoError(t, err)
	body := strings.Join(bodyLines(testKeys()["rsa"]), "\n")
	got, n = off.Redact(body)
	assert.Equal(t, body, got)
	assert.Zero(t, n)
}
