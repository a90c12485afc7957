package redact

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

var builtinPatterns = []builtinPattern{
	// A block from its BEGIN line (to its END line, or to the end of the text when it is cut
	// off), or the body of one cut off before, the lines of base64 that run into its END line.
	{Pattern: Pattern{"private-key", `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)|[A-Za-z0-9+/]{16,}={0,2}\r?\n(?:[A-Za-z0-9+/]*={0,2}\r?\n)*-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`},
		needles: []string{"PRIVATE KEY"}},
	{Pattern: Pattern{"anthropic-key", `\bsk-ant-[A-Za-z0-9_-]{20,}`},
		needles: []string{"sk-ant-"}},
	{Pattern: Pattern{"openai-key", `\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`},
		needles: []string{"sk-"}},
	{Pattern: Pattern{"aws-access-key-id", `\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b`},
		needles: []string{"AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA"}},
	{Pattern: Pattern{"aws-secret-access-key", `(?i)\baws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{40,})`},
		keys: []string{"aws"}},
	{Pattern: Pattern{"github-token", `\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`},
		needles: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{Pattern: Pattern{"slack-token", `\bxox[abposr]-[A-Za-z0-9-]{10,}`},
		needles: []string{"xox"}},
	{Pattern: Pattern{"google-api-key", `\bAIza[0-9A-Za-z_-]{35}`},
		needles: []string{"AIza"}},
	{Pattern: Pattern{"stripe-key", `\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}`},
		needles: []string{"_live_", "_test_"}},
	{Pattern: Pattern{"jwt", `\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}`},
		needles: []string{"eyJ"}},
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
}
