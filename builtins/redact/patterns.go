package redact

import "github.com/agentc-dev/agentc/internal/credential"

// builtinPattern is a default rule with hints that keep redaction fast on large tool results.
// needles: the rule is skipped unless one of them occurs in the text (case-sensitive). keys:
// the rule's expression starts with one of these lower-case words; it is tried only where
// one of them begins a word or follows an underscore (case-insensitively), anchored there. anchor: the expression
// starts with this exact text; it is tried anchored at each occurrence.
type builtinPattern struct {
	Pattern
	needles []string
	keys    []string
	anchor  string
}

// builtinPatterns are the credential shapes of the one list (credential.Shapes: what vet and
// the log scrubber read too), each standing at a word's start, then redact's own rules of a
// key word and the value beside it, which mask the value alone (its group "secret"): those
// judge a value by the word next to it, not by its form, so they are no shape of a credential
// (vet's credential.Value reads a value whole, with no word beside it, and the scrubber would
// take "password=" in a log line for a leak). The shape bearer-token is masked by the rule of
// the word "bearer", which holds every credential of the shape and masks the token alone.
var builtinPatterns = append(shapePatterns(), []builtinPattern{
	{Pattern: Pattern{"aws-secret-access-key", `(?i)\baws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{40,})`},
		keys: []string{"aws"}},
	{Pattern: Pattern{"bearer-token", `(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)`},
		keys: []string{"bearer"}},
	{Pattern: Pattern{"basic-auth", `(?i)\bauthorization["']?\s*[:=]\s*["']?basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})`},
		keys: []string{"authorization"}},
	{Pattern: Pattern{"url-credentials", `://[^/\s:@]*:(?P<secret>[^/\s@\[]+)@`},
		anchor: "://"},
	// The key word and the value may be strings of their own, as in a JSON array or object
	// written out: ["password=", "hunter2"], ["password", "=hunter2"], {"password=": "hunter2"}.
	{Pattern: Pattern{"password-assignment", `(?i)\b(?:password|passwd|passphrase|pwd|pass|secret|secret[_-]?key|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret|private[_-]?key|token)["']?(?:\s*,\s*["'])?\s*[:=]+\s*(?:["']\s*[:,]\s*)?["']?(?P<secret>[^\s"',;&{}\]\[:=][^\s"',;&}\]]*)`},
		keys: []string{"pass", "pwd", "secret", "api", "access", "auth", "refresh", "client", "private", "token"}},
}...)

// shapePatterns returns the rules of credential.Shapes but bearer-token, in its order.
func shapePatterns() []builtinPattern {
	var out []builtinPattern
	for _, sh := range credential.Shapes {
		expr := `\b(?:` + sh.Expr + `)`
		switch sh.Label {
		case "bearer-token":
			continue
		case "private-key":
			expr = sh.Expr // starts with dashes, or a body's base64
		}
		out = append(out, builtinPattern{Pattern: Pattern{sh.Label, expr}, needles: sh.Needles})
	}
	return out
}
