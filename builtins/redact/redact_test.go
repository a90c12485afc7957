package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
)

// Secrets are assembled at run time so that no complete credential-shaped literal sits in
// the source.
var (
	openAIKey    = "sk-" + "proj-" + strings.Repeat("Ab3dE", 8)
	anthropicKey = "sk-" + "ant-api03-" + strings.Repeat("xY7_z", 10)
	awsKeyID     = "AKIA" + "IOSFODNN7EXAMPLE"
	awsSecret    = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
	githubToken  = "ghp" + "_" + strings.Repeat("a1B2c", 8)[:36]
	githubPAT    = "github" + "_pat_" + strings.Repeat("11ABCDEFG", 4)
	slackToken   = "xox" + "b-1234567890-abcdefghij"
	googleKey    = "AIza" + strings.Repeat("Sy0_-", 7)
	stripeKey    = "sk" + "_live_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1)
	jwt          = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pemBlock     = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcdef==\n-----END RSA PRIVATE KEY-----"
)

func newRedactor(t testing.TB, cfg Config) *Redactor {
	t.Helper()
	r, err := New(cfg)
	require.NoError(t, err)
	return r
}

func TestRedactDefaults(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  string
		count int
	}{
		{"openai key", "key=" + openAIKey + " ok", "key=[REDACTED:openai-key] ok", 1},
		{"openai key alone", "use " + openAIKey, "use [REDACTED:openai-key]", 1},
		{"anthropic key", anthropicKey, "[REDACTED:anthropic-key]", 1},
		{"aws key id", "AWS_ACCESS_KEY_ID " + awsKeyID + "\n", "AWS_ACCESS_KEY_ID [REDACTED:aws-access-key-id]\n", 1},
		{"aws secret", "aws_secret_access_key = " + awsSecret, "aws_secret_access_key = [REDACTED:aws-secret-access-key]", 1},
		{"github token", "token " + githubToken + ".", "token [REDACTED:github-token].", 1},
		{"github pat", githubPAT, "[REDACTED:github-token]", 1},
		{"slack", "slack: " + slackToken, "slack: [REDACTED:slack-token]", 1},
		{"google", "k=" + googleKey, "k=[REDACTED:google-api-key]", 1},
		{"stripe", stripeKey, "[REDACTED:stripe-key]", 1},
		{"jwt", "session " + jwt, "session [REDACTED:jwt]", 1},
		{"bearer header", "Authorization: Bearer abcdef0123456789abcdef", "Authorization: Bearer [REDACTED:bearer-token]", 1},
		{"bearer jwt", "authorization: bearer " + jwt, "authorization: bearer [REDACTED:jwt]", 1},
		{"basic auth", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED:basic-auth]", 1},
		{"url credentials", "postgres://app:s3cr3t@db.internal:5432/x", "postgres://app:[REDACTED:url-credentials]@db.internal:5432/x", 1},
		{"password assignment", "password=hunter2&user=bob", "password=[REDACTED:password-assignment]&user=bob", 1},
		{"password yaml", "  password: hunter2\n", "  password: [REDACTED:password-assignment]\n", 1},
		{"password json", `{"password": "hunter2", "user": "bob"}`, `{"password": "[REDACTED:password-assignment]", "user": "bob"}`, 1},
		{"password doubled colon", "password::hunter2 ok", "password::[REDACTED:password-assignment] ok", 1},
		{"password colon equals", "pass:=hunter2 ok", "pass:=[REDACTED:password-assignment] ok", 1},
		{"placeholder after a quote and colon is not a value", `pAss:":[REDACTED:password-assignment]`, `pAss:":[REDACTED:password-assignment]`, 0},
		{"password property of a JSON schema", `{"password": {"type": "string"}}`, `{"password": {"type": "string"}}`, 0},
		{"api_key env", "API_KEY=abc123xyz", "API_KEY=[REDACTED:password-assignment]", 1},
		{"client secret", "client-secret: 'q1w2e3'", "client-secret: '[REDACTED:password-assignment]'", 1},
		{"key word ending a snake_case name", "DB_PASSWORD=hunter22x SLACK_TOKEN: abc123xyz", "DB_PASSWORD=[REDACTED:password-assignment] SLACK_TOKEN: [REDACTED:password-assignment]", 2},
		{"snake_case name as a JSON key", `{"db_password": "hunter22x"}`, `{"db_password": "[REDACTED:password-assignment]"}`, 1},
		{"aws secret after a prefix", "MY_AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "MY_AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-access-key]", 1},
		{"pem block", "before\n" + pemBlock + "\nafter", "before\n[REDACTED:private-key]\nafter", 1},
		{"pem cut off", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "[REDACTED:private-key]", 1},
		{"pgp block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nxyz\n-----END PGP PRIVATE KEY BLOCK-----", "[REDACTED:private-key]", 1},
		{"several", "a=" + awsKeyID + " b=" + githubToken, "a=[REDACTED:aws-access-key-id] b=[REDACTED:github-token]", 2},
		{"secret after an ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:x secret: hunter22x", "arn:aws:secretsmanager:us-east-1:123456789012:secret:x secret: [REDACTED:password-assignment]", 1},
		{"colon-separated key that is not an ARN", "db:password:hunter22x", "db:password:[REDACTED:password-assignment]", 1},
		{"key word in a token shaped unlike an ARN", "arn:password:hunter22x", "arn:password:[REDACTED:password-assignment]", 1},
		{"ARN whose account is not one", "arn:aws:svc:us-east-1:acct:secret:hunter22x", "arn:aws:svc:us-east-1:acct:secret:[REDACTED:password-assignment]", 1},

		// no secrets
		{"short sk", "task-force sk-abc", "task-force sk-abc", 0},
		{"bypass flag", "bypass=true", "bypass=true", 0},
		{"max tokens", "max_tokens=100 input_tokens: 20", "max_tokens=100 input_tokens: 20", 0},
		{"key word inside a snake_case name", "password_hint=pet reset_token_ttl=30", "password_hint=pet reset_token_ttl=30", 0},
		{"compass", "compass: north", "compass: north", 0},
		{"bearer prose", "the bearer of bad news", "the bearer of bad news", 0},
		{"basic prose", "basic understanding required", "basic understanding required", 0},
		{"url without password", "https://user@example.com/x", "https://user@example.com/x", 0},
		{"public key", "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----", 0},
		{"empty", "", "", 0},
		{"secret resource of an ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf", "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf", 0},
		{"ARN in a JSON value", `{"SecretId": "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:prod/db-AbCdEf"}`, `{"SecretId": "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:prod/db-AbCdEf"}`, 0},
		{"ARN in prose", "rotate ARN:AWS:SECRETSMANAGER:eu-west-1:123456789012:secret:app-Xy12Zq now", "rotate ARN:AWS:SECRETSMANAGER:eu-west-1:123456789012:secret:app-Xy12Zq now", 0},
	}
	r := newRedactor(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := r.Redact(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.count, n)

			again, n2 := r.Redact(got)
			assert.Equal(t, got, again, "redacting twice must change nothing")
			assert.Zero(t, n2)
		})
	}
}

// TestRedactSecretBetweenBinaryBytes: a decoding was read only when three quarters of it were
// text, so a key between as many binary bytes as it has, encoded, went through though a
// reader decoding the run reads it.
func TestRedactSecretBetweenBinaryBytes(t *testing.T) {
	r := newRedactor(t, Config{})
	noise := []byte{0x00, 0xff, 0x01, 0xfe, 0x02, 0x80, 0x9c, 0x10, 0x00, 0xff, 0x01, 0xfe, 0x02, 0x80, 0x9c, 0x10, 0x07, 0x1b, 0x00, 0xfe}
	payload := append(append(append([]byte{}, noise...), awsKeyID...), noise...)
	for name, run := range map[string]string{
		"base64": base64.StdEncoding.EncodeToString(payload),
		"hex":    hex.EncodeToString(payload),
	} {
		got, n := r.Redact("blob " + run + " end")
		assert.Equal(t, 1, n, name)
		assert.NotContains(t, got, run, name)
	}
}

func TestRedactLongSecretsAndRepeats(t *testing.T) {
	r := newRedactor(t, Config{})
	long := strings.Repeat("x", 3000)
	got, n := r.Redact("PASSWORD=" + long + " tail")
	assert.Equal(t, "PASSWORD=[REDACTED:password-assignment] tail", got)
	assert.Equal(t, 1, n)

	got, n = r.Redact("a https://u:p1@h1/ b https://u:p2@h2/ c pwd=1 pwd=2 Bearer " + strings.Repeat("t", 20))
	assert.Equal(t, "a https://u:[REDACTED:url-credentials]@h1/ b https://u:[REDACTED:url-credentials]@h2/ c pwd=[REDACTED:password-assignment] pwd=[REDACTED:password-assignment] Bearer [REDACTED:bearer-token]", got)
	assert.Equal(t, 5, n)
}

func TestCustomPatterns(t *testing.T) {
	r := newRedactor(t, Config{
		DisableDefaults: true,
		Patterns: []Pattern{
			{ID: "employee-id", Regex: `\bEMP-\d{6}\b`},
			{ID: "pin", Regex: `(?i)\bpin\s*(?P<secret>\d{4})\b`},
		},
	})
	got, n := r.Redact("EMP-123456 set PIN 4821; password=x")
	assert.Equal(t, "[REDACTED:employee-id] set PIN [REDACTED:pin]; password=x", got)
	assert.Equal(t, 2, n)
}

func TestNewErrors(t *testing.T) {
	_, err := New(Config{Patterns: []Pattern{{ID: "x", Regex: `[`}}})
	assert.ErrorContains(t, err, `pattern "x"`)
	_, err = New(Config{Patterns: []Pattern{{Regex: `x`}}})
	assert.ErrorContains(t, err, "no id")
}

func TestDefaultPatternsAreUniqueAndCompile(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range DefaultPatterns() {
		require.NotEmpty(t, p.ID)
		assert.False(t, seen[p.ID], p.ID)
		seen[p.ID] = true
	}
	assert.Len(t, seen, len(builtinPatterns))
}

func TestRedactValueReturnsNewValue(t *testing.T) {
	r := newRedactor(t, Config{})
	in := map[string]any{
		"headers": map[string]string{"Authorization": "Bearer abcdef0123456789abcdef"},
		"items":   []any{"ok", githubToken, 3.5, true, nil},
		"nested":  map[string]any{"env": []string{"A=1", "API_KEY=zzz"}},
		"count":   7.0,
	}
	before, err := json.Marshal(in)
	require.NoError(t, err)

	out, n := r.RedactValue(in)
	assert.Equal(t, 3, n)
	assert.Equal(t, map[string]any{
		"headers": map[string]string{"Authorization": "Bearer [REDACTED:bearer-token]"},
		"items":   []any{"ok", "[REDACTED:github-token]", 3.5, true, nil},
		"nested":  map[string]any{"env": []string{"A=1", "API_KEY=[REDACTED:password-assignment]"}},
		"count":   7.0,
	}, out)

	after, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "input must not change")

	// Containers are copied even without secrets, so callers may modify the result.
	clean := []any{"a"}
	copied, n := r.RedactValue(clean)
	assert.Zero(t, n)
	copied.([]any)[0] = "b"
	assert.Equal(t, "a", clean[0])
}

func BenchmarkRedact4KB(b *testing.B) {
	r := newRedactor(b, Config{})
	text := strings.Repeat(`{"id": 42, "status": "shipped", "note": "customer asked about the delivery window", "url": "https://api.example.com/orders/42"}`+"\n", 34)[:4096]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, n := r.Redact(text); n != 0 {
			b.Fatal("false positive")
		}
	}
}

// A secret with zero-width characters inside, or written in full-width
// letters, is masked whole: the text is also read folded, and the span of
// the text as given is replaced.
func TestRedactReadsFoldedText(t *testing.T) {
	r, err := New(Config{})
	require.NoError(t, err)
	zw := awsKeyID[:4] + "\u200b" + awsKeyID[4:10] + "\u2060" + awsKeyID[10:]
	got, n := r.Redact("id " + zw + " end")
	assert.Equal(t, "id [REDACTED:aws-access-key-id] end", got)
	assert.Equal(t, 1, n)

	var wide strings.Builder
	for _, c := range awsKeyID {
		wide.WriteRune(c - '!' + '！') // the full-width form of each ASCII character
	}
	got, n = r.Redact("ｉｄ " + wide.String() + " and " + awsKeyID)
	assert.Equal(t, "ｉｄ [REDACTED:aws-access-key-id] and [REDACTED:aws-access-key-id]", got)
	assert.Equal(t, 2, n)

	// Text without a secret is returned as it is, accents and all.
	got, n = r.Redact("café ｆｕｌｌ-width, no secret")
	assert.Equal(t, "café ｆｕｌｌ-width, no secret", got)
	assert.Zero(t, n)
}

// BenchmarkRedact4KBEscaped: a JSON document quoted in a string, as a log carries it, is
// also read decoded.
func BenchmarkRedact4KBEscaped(b *testing.B) {
	r := newRedactor(b, Config{})
	text := strings.Repeat(`{\"id\": 42, \"status\": \"shipped\", \"note\": \"customer asked about the delivery window\", \"url\": \"https:\/\/api.example.com\/orders\/42?a=1&amp;b=%20\"}`+"\n", 34)[:4096]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, n := r.Redact(text); n != 0 {
			b.Fatal("false positive")
		}
	}
}

// BenchmarkRedactValue4KB: a tool's result of 34 rows of a few strings each, about 4 KB, no
// secret.
func BenchmarkRedactValue4KB(b *testing.B) {
	r := newRedactor(b, Config{})
	var rows []any
	for i := range 34 {
		rows = append(rows, map[string]any{"id": float64(i), "status": "shipped", "tags": []any{"priority", "eu-west", "gift"},
			"note": "customer asked about the delivery window", "url": "https://api.example.com/orders/42"})
	}
	v := map[string]any{"rows": rows, "lines": strings.Split(strings.Repeat("the order shipped on time and the customer was told\n", 20), "\n")}
	b.ReportAllocs()
	for b.Loop() {
		if _, n := r.RedactValue(v); n != 0 {
			b.Fatal("false positive")
		}
	}
}

// BenchmarkRedactJSONText5KB: a tool message whose text is a JSON document of about 5 KB, 60
// records each of a few string fields and a small array of strings, no secret, masked as the
// layer masks a transcript text (read as a text, and its runs of strings as a value's).
func BenchmarkRedactJSONText5KB(b *testing.B) {
	r := newRedactor(b, Config{})
	var rows []string
	for i := range 60 {
		rows = append(rows, fmt.Sprintf(`{"id": %d, "status": "shipped", "note": "asked about the window", "tags": ["priority", "eu-west"], "city": "Lyon"}`, i))
	}
	msgs := []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: `{"rows": [` + strings.Join(rows, ", ") + `]}`}}
	tr := mask.Transcript{Mask: r.Redact, Find: r.items, System: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, masked := tr.Messages("", msgs); masked {
			b.Fatal("false positive")
		}
	}
}
