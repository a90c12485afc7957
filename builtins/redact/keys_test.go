package redact_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/runtime"
)

// testKeys are real keys in PEM, generated once: an RSA key (PKCS #1), an EC key (SEC 1), an
// Ed25519 key (PKCS #8), and a certificate and a public key, which are not secrets.
var testKeys = sync.OnceValue(func() map[string]string {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		panic(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	edDER, err := x509.MarshalPKCS8PrivateKey(edKey)
	if err != nil {
		panic(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "example.com"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0)}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		panic(err)
	}
	enc := func(typ string, der []byte) string {
		return strings.TrimSuffix(string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})), "\n")
	}
	return map[string]string{
		"rsa":         enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)),
		"ec":          enc("EC PRIVATE KEY", ecDER),
		"ed25519":     enc("PRIVATE KEY", edDER),
		"certificate": enc("CERTIFICATE", certDER),
		"public key":  enc("PUBLIC KEY", pubDER),
	}
})

// privateKeys are the names of testKeys that are secrets.
var privateKeys = []string{"rsa", "ec", "ed25519"}

// bodyLines returns the lines of a PEM block between its BEGIN and END lines.
func bodyLines(block string) []string {
	lines := strings.Split(block, "\n")
	return lines[1 : len(lines)-1]
}

// assertNoKeyBody checks that no line of the key's body is in got, nor a piece of one.
func assertNoKeyBody(t *testing.T, got, block string) {
	t.Helper()
	for _, line := range bodyLines(block) {
		assert.NotContains(t, got, line[:min(len(line), 12)])
	}
}

// A private key sent as an array of lines (a tool's result, a tool call's arguments) is
// masked in every element it runs over, not only in the element of its BEGIN line.
func TestPrivateKeyAsArrayOfLines(t *testing.T) {
	for _, name := range privateKeys {
		block := testKeys()[name]
		lines := strings.Split(block, "\n")
		anyLines := make([]any, len(lines))
		for i, l := range lines {
			anyLines[i] = l
		}
		t.Run(name+"/tool result", func(t *testing.T) {
			for _, v := range []any{anyLines, lines} {
				got := toolResultThrough(t, map[string]any{"lines": v, "path": "id_rsa"})
				assertNoKeyBody(t, got, block)
				assert.Contains(t, got, `"path":"id_rsa"`)
				assert.Contains(t, got, "[REDACTED:private-key]")
			}
		})
		t.Run(name+"/tool call arguments sent back", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"lines": lines, "mode": "0600"})
			require.NoError(t, err)
			got := sendThrough(t, []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "write", Arguments: args}}}})
			out := string(got[0].ToolCalls[0].Arguments)
			assertNoKeyBody(t, out, block)
			assert.Contains(t, out, `"mode":"0600"`)
			assert.True(t, json.Valid(got[0].ToolCalls[0].Arguments))
		})
		t.Run(name+"/model tool call", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"lines": lines})
			require.NoError(t, err)
			_, calls := streamThrough(t, []runtime.Delta{
				{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "write", Arguments: string(args)}}},
				{FinishReason: runtime.FinishToolCalls}})
			assertNoKeyBody(t, calls, block)
			assert.Contains(t, calls, "[REDACTED:private-key]")
		})
	}
	t.Run("elements of other values and other arrays are read apart", func(t *testing.T) {
		r, err := redact.New(redact.Config{})
		require.NoError(t, err)
		v := map[string]any{"a": []any{"password=", 7, "hunter22x"}, "b": []any{"token="}, "c": []any{"Zq81mNb0Xc"}}
		got, n := r.RedactValue(v)
		assert.Zero(t, n)
		assert.Equal(t, v, got)
	})
}
