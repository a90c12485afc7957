package redact

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
)

// FuzzRedact: no secret a rule finds survives Redact (a match in the output is never one of
// the input's), and Redact is stable (redacting its output changes nothing).
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"key " + openAIKey + " and " + awsKeyID, "password=hunter22x; token: abc123",
		"Authorization: Bearer abcdefghijklmnopqrstu", "https://user:pa55word@example.com/x",
		pemBlock, "-----BEGIN PRIVATE KEY-----\nMIIE", jwt + " " + githubToken + " " + slackToken,
		"aws_secret_access_key=" + awsSecret, "sk-\ufe0f" + openAIKey[3:], "AKIA\u034f" + awsKeyID[4:],
		"Bearer\u00a0abcdef0123456789abcdef", "sk\u2011" + openAIKey[3:], "next=%2Fcb%3Faccess_token%3DAbc123%26s%3D1",
		"&#115;k-" + openAIKey[3:], "password&equals;hunter22x&amp;", `\u0073k-` + openAIKey[3:],
		`{"aws_secret_access_key":"wJalrXUtnFEMI\/K7MDENG\/bPxRfiCYEXAMPLEKEY"}`, `{\"password\":\"hunter22x\"}`,
		`{\\\"password\\\":\\\"hunter22x\\\"}`, `\\u0073k-` + openAIKey[3:], "sk%252D" + openAIKey[3:],
		textnormtest.Dump("key "+openAIKey+"\n", 2, ": ", true), textnormtest.Dump("id "+awsKeyID, 1, "  ", true),
		`["x","password=","hunter22x"]`, "0x41, 0x4b, 0x49, 0x41,\n  0x49, 0x4f, 0x53, 0x46, 0x4f, 0x44, 0x4e, 0x4e, 0x37, 0x45, 0x58, 0x41,\n  0x4d, 0x50, 0x4c, 0x45",
		"%zz &#; \\u00 \\", "[REDACTED:openai-key]", "",
	} {
		f.Add(s)
	}
	r, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			return
		}
		found := r.find(text)
		out, n := r.Redact(text)
		if n != len(found) {
			t.Fatalf("found %d secrets in %q but redacted %d", len(found), text, n)
		}
		secrets := map[string]bool{}
		for _, sp := range found {
			secrets[text[sp.start:sp.end]] = true
		}
		for _, sp := range r.find(out) {
			if v := out[sp.start:sp.end]; secrets[v] || strings.Contains(v, "[REDACTED:") {
				t.Fatalf("%s %q survives Redact: %q -> %q", r.rules[sp.rule].id, v, text, out)
			}
		}
		if again, n2 := r.Redact(out); n2 != 0 || again != out {
			t.Fatalf("redacting the redacted text changed it: %q -> %q (%d)", out, again, n2)
		}
	})
}
