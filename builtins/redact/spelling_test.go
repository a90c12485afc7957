package redact

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRedactOtherSpellings: a secret written with other characters than the plain ASCII ones,
// or wrapped in the escapes of a URL, a web page or a JSON document, is masked whole, and the
// text around it is kept as it was.
func TestRedactOtherSpellings(t *testing.T) {
	r := newRedactor(t, Config{})
	for _, tt := range []struct{ name, in, want string }{
		// invisible characters that are not format characters
		{"variation selector in a key", "key sk-\ufe0f" + openAIKey[3:] + " end", "key [REDACTED:openai-key] end"},
		{"combining grapheme joiner in a key", "id AKIA\u034f" + awsKeyID[4:] + ".", "id [REDACTED:aws-access-key-id]."},
		// other spaces and dashes
		{"no-break space after bearer", "Authorization: Bearer\u00a0abcdef0123456789abcdef", "Authorization: Bearer\u00a0[REDACTED:bearer-token]"},
		{"narrow no-break space after basic", "authorization:\u202fbasic dXNlcjpwYXNzd29yZA==", "authorization:\u202fbasic [REDACTED:basic-auth]"},
		{"non-breaking hyphen in a key", "sk\u2011" + openAIKey[3:], "[REDACTED:openai-key]"},
		// escapes a tool result may carry
		{"percent-encoded assignment", "next=%2Fcb%3Faccess_token%3DAbc123xyz789%26state%3D1", "next=%2Fcb%3Faccess_token%3D[REDACTED:password-assignment]%26state%3D1"},
		{"percent-encoded dash in a key", "k=sk%2D" + openAIKey[3:] + "&x=1", "k=[REDACTED:openai-key]&x=1"},
		{"html reference in a key", "<td>&#115;k-" + openAIKey[3:] + "</td>", "<td>[REDACTED:openai-key]</td>"},
		{"html entity before the value", "password&equals;hunter22x&amp;", "password&equals;[REDACTED:password-assignment]&amp;"},
		{"json unicode escape in a key", `{"k":"\u0073k-` + openAIKey[3:] + `"}`, `{"k":"[REDACTED:openai-key]"}`},
		{"json escaped slashes", `{"aws_secret_access_key":"wJalrXUtnFEMI\/K7MDENG\/bPxRfiCYEXAMPLEKEY"}`, `{"aws_secret_access_key":"[REDACTED:aws-secret-access-key]"}`},
		{"json escaped quotes", `log: {\"password\":\"hunter22x\",\"user\":\"bob\"}`, `log: {\"password\":\"[REDACTED:password-assignment]\",\"user\":\"bob\"}`},
		// escapes escaped again
		{"json quoted in a json string", `{"log":"{\\\"password\\\":\\\"hunter22x\\\"}"}`, `{"log":"{\\\"password\\\":\\\"[REDACTED:password-assignment]\\\"}"}`},
		{"json unicode escape escaped", `{"k":"\\u0073k-` + openAIKey[3:] + `"}`, `{"k":"[REDACTED:openai-key]"}`},
		{"percent-encoded twice", "next=%252Fcb%253Faccess_token%253DAbc123xyz789", "next=%252Fcb%253Faccess_token%253D[REDACTED:password-assignment]"},
		// the plain forms are masked as before
		{"plain key", "key " + openAIKey + " end", "key [REDACTED:openai-key] end"},
		{"escapes without a secret", "a%20b &amp; c\\u0041 \\/ %zz &#;", "a%20b &amp; c\\u0041 \\/ %zz &#;"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, n := r.Redact(tt.in)
			assert.Equal(t, tt.want, got)
			if tt.want != tt.in {
				assert.Positive(t, n)
				again, n2 := r.Redact(got)
				assert.Equal(t, got, again, "redacting the redacted text changes nothing")
				assert.Zero(t, n2)
			}
		})
	}
}
