package dsl

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Common mistakes get a message that names the fix, not the schema's
// pattern.
func TestInvalidValueHints(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"bare number duration", `chains: turn: [{use: "rate_limit", rate: 10, per: 60, burst: 2, mode: "reject"}]`,
			`chains.turn[0].per: 60 is a bare number, not a duration: write it as a string with its unit, such as "60s" or "60ms"`},
		{"duration without unit", `chains: chat: [{use: "retry", max_attempts: 2, initial_delay: "200"}]`,
			`chains.chat[0].initial_delay: "200" has no unit: write it with one, such as "200ms" or "200s"`},
		{"duration with a space", `chains: chat: [{use: "retry", max_attempts: 2, initial_delay: "10 s"}]`,
			`chains.chat[0].initial_delay: "10 s": a duration has no spaces; write "10s"`},
		{"unit spelt out", `chains: turn: [{use: "rate_limit", rate: 5, per: "1min", burst: 1, mode: "reject"}]`,
			`chains.turn[0].per: "1min": a duration's units are ns, us, ms, s, m and h; write "1m"`},
		{"zero lease", `chains: tool: [{use: "idempotent", lease_ttl: "0s"}]`,
			`chains.tool[0].lease_ttl: "0s" is zero: this field takes a duration above zero (leave it out for its default)`},
		{"store url twice", `stores: s: {kind: "redis", url: "redis://127.0.0.1:6379/0", url_env: "REDIS_URL"}`,
			`stores.s: url and url_env are both given, and the store would read only url_env; give one`},
		{"empty pattern", `chains: chat: [{use: "security", patterns: [""]}]`,
			`chains.chat[0].patterns[0]: is empty: give a value, or leave the field out`},
		{"not a duration", `chains: chat: [{use: "retry", max_attempts: 2, initial_delay: "soon"}]`,
			`chains.chat[0].initial_delay: "soon" is not a duration such as "250ms", "30s" or "1h30m"`},
		{"window not a duration nor month", `chains: chat: [{use: "meter", window: "monthly"}]`,
			`chains.chat[0].window: "monthly" is not a duration such as "250ms", "30s" or "1h30m", nor "month"; did you mean "month"?`},
		{"window of a week", `chains: chat: [{use: "meter", window: "1 week"}]`,
			`chains.chat[0].window: "1 week": a duration has no week unit; write hours, as in "168h", whose windows start on Thursdays at 00:00 UTC (the Unix epoch was a Thursday)`},
		{"window far from month", `chains: chat: [{use: "meter", window: "weekly"}]`,
			`chains.chat[0].window: "weekly" is not a duration such as "250ms", "30s" or "1h30m", nor "month"`},
		{"required typo", `tools: t: {args: {type: "object", required: ["amout"], properties: amount: type: "number"}}`,
			`tools.t.args.required[0]: required names "amout", which properties does not describe (it describes amount); did you mean "amount"?`},
		{"nested required typo", `tools: t: {args: {type: "object", properties: item: {type: "object", required: ["sku"], properties: {id: type: "string"}}}}`,
			`tools.t.args.properties.item.required[0]: required names "sku", which properties does not describe (it describes id)`},
		{"days", `chains: tool: [{use: "memoize", ttl: "2d"}]`,
			`chains.tool[0].ttl: "2d": a duration has no day unit; write hours, as in "48h"`},
		{"days spelt out", `settings: run_idle: "1 day"`,
			`settings.run_idle: "1 day": a duration has no day unit; write hours, as in "24h"`},
		{"weeks spelt out", `chains: tool: [{use: "idempotent", ttl: "2 weeks"}]`,
			`chains.tool[0].ttl: "2 weeks": a duration has no week unit; write hours, as in "336h"`},
		{"empty tools", `chains: tool: [{use: "log", tools: []}]`,
			`chains.tool[0].tools: an empty tools list does not scope the entry to no tool: the entry applies to every tool, as without tools`},
		{"url in url_env", `stores: s: {kind: "redis", url_env: "redis://127.0.0.1:6379/0"}`,
			`stores.s.url_env: "redis://127.0.0.1:6379/0" is a URL, not the name of an environment variable: this field names the variable that holds it (such as "REDIS_URL"), never the value`},
		{"env name", `keys: app: {env: "app-key"}`,
			`keys.app.env: "app-key" is not the name of an environment variable (letters, digits and _, not starting with a digit)`},
		{"shared secret", `keys: {a: {env: "APP_KEY"}, b: {env: "APP_KEY", tenant: "t"}}`,
			`key "b" has the same env as key "a": a caller presenting that secret could not be told to be one (tenant "t") or the other (tenant "a"), and agentc serve refuses to start`},
		{"key in env", `keys: app: {env: "ghp_0123456789abcdefghijklmnop"}`,
			`key "app": env holds what looks like a key, not the name of the variable that holds it`},
		{"hex key in env", `keys: app: {env: "d428fc11ed3fc4326beedaad8207f743"}`,
			`key "app": env holds what looks like a key`},
		{"random key in env", `keys: app: {env: "Xk9pQ2mZ7vL4nR8tW3yB6cD1"}`,
			`key "app": env holds what looks like a key`},
		{"mcp env secret", `mcp: servers: gh: {command: ["gh"], env: GITHUB_TOKEN: "ghp_0123456789abcdefghijklmnop"}`,
			`mcp server "gh": env GITHUB_TOKEN holds a credential in the policy (and the plan); name the environment variable of agentc serve that holds it: GITHUB_TOKEN: "${GITHUB_TOKEN}"`},
		{"mcp env deploy key", `mcp: servers: gh: {command: ["gh"], env: DEPLOY_KEY: "c2VjcmV0LWRlcGxveS1rZXk"}`,
			`mcp server "gh": env DEPLOY_KEY holds a credential in the policy (and the plan)`},
		{"mcp env private key", `mcp: servers: gh: {command: ["gh"], env: TLS: "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----"}`,
			`mcp server "gh": env TLS holds a credential in the policy (and the plan)`},
		{"mcp env reference", `mcp: servers: gh: {command: ["gh"], env: GITHUB_TOKEN: "$GITHUB_TOKEN"}`,
			`mcp server "gh": env GITHUB_TOKEN: offset 0: a $ that is neither ${NAME} nor $$ (write ${NAME} for a variable, $$ for a $)`},
		{"mcp header secret", `mcp: servers: gh: {url: "https://mcp.example.com/", headers: Authorization: "Bearer ghp_0123456789abcdefghijklmnop"}`,
			`mcp server "gh": header Authorization holds a credential in the policy (and the plan); name the environment variable that holds it: Authorization: "Bearer ${TOKEN}"`},
		{"mcp header secret in any header", `mcp: servers: gh: {url: "https://mcp.example.com/", headers: "X-Upstream": "sk-live-0123456789abcdefgh"}`,
			`header X-Upstream holds a credential in the policy`},
		{"mcp header reference", `mcp: servers: gh: {url: "https://mcp.example.com/", headers: Authorization: "Bearer $GITHUB_TOKEN"}`,
			`mcp server "gh": header Authorization: offset 7: a $ that is neither ${NAME} nor $$ (write ${NAME} for a variable, $$ for a $)`},
		{"mcp header of the transport", `mcp: servers: gh: {url: "https://mcp.example.com/", headers: "mcp-session-id": "x"}`,
			`mcp server "gh": header mcp-session-id is set by the MCP transport itself; remove it`},
		{"mcp header on a command", `mcp: servers: gh: {command: ["gh-mcp"], headers: Authorization: "Bearer ${GITHUB_TOKEN}"}`,
			`mcp server "gh": headers apply to a url, not to a command`},
		{"url in egress allow", `chains: tool: [{use: "egress", allow: ["https://api.example.com/v1"]}]`,
			`chains.tool[0].allow[0]: "https://api.example.com/v1" is a URL, not a host: allow lists host names (with an optional :port); write "api.example.com"`},
		{"key in sha256", `keys: app: {sha256: "sk-live-1234567890abcdef"}`,
			`keys.app.sha256: "sk-live-1234567890abcdef" is not a SHA-256 (64 lower-case hex digits): give the hash of the key (printf %s "$KEY" | sha256sum), or env with the variable that holds it; never the key itself`},
		{"upper-case sha256", `keys: app: {sha256: "D428FC11ED3FC4326BEEDAAD8207F74367127007C3688AA51B311679C44718A2"}`,
			`is not lower-case: write the SHA-256 in lower-case hex`},
		{"look-alike letter in a name", `chains: tool: [{use: "log", name: "аudit_log"}]`,
			`chains.tool[0].name: "аudit_log" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _: it holds 'а' (U+0430, a Cyrillic letter), and names are ASCII`},
		{"single-quoted enum", `chains: tool: [{use: "audit", trail: 'logical'}]`,
			`chains.tool[0].trail: 'logical' is not one of "attempts", "logical": single quotes make bytes in CUE, not a string; write "logical"`},
		{"single-quoted duration", `chains: chat: [{use: "memoize", ttl: '10m'}]`,
			`chains.chat[0].ttl: '10m' is not a duration such as "250ms", "30s" or "1h30m": single quotes make bytes in CUE, not a string; write "10m"`},
		{"single-quoted use", `chains: chat: [{use: 'retry'}]`,
			`chains.chat[0].use: 'retry' is not allowed here: want a string: single quotes make bytes in CUE, not a string; write "retry"`},
		{"single-quoted predicate holding double quotes", `chains: tool: [{use: "guard", deny: 'args.note == "test"'}]`,
			`single quotes make bytes in CUE, not a string; write "args.note == 'test'" (CEL reads single-quoted strings too) or #"args.note == "test""#`},
		{"single-quoted predicate holding both quotes", `chains: tool: [{use: "guard", deny: 'args.note == "it\'s"'}]`,
			`single quotes make bytes in CUE, not a string; write #"args.note == "it's""#`},
		{"space in a name", `chains: tool: [{use: "log", name: "audit log"}]`,
			`chains.tool[0].name: "audit log" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _`},
		{"path in egress allow", `chains: tool: [{use: "egress", allow: ["example.com/api"]}]`,
			`chains.tool[0].allow[0]: "example.com/api" is not a host: allow lists host names ("api.example.com"), a wildcard as the first label only ("*.example.com") or "*", each with an optional :port, and no path`},
		{"extension without its dot", `chains: tool: [{use: "file_check", roots: ["."], extensions: ["txt"]}]`,
			`chains.tool[0].extensions[0]: "txt" is not an extension: write it with its dot, ".txt"`},
		{"url without a scheme", `models: m: {provider: "openai", model: "gpt-4.1", base_url: "api.openai.com/v1"}`,
			`models.m.base_url: "api.openai.com/v1" is not a URL starting with http:// or https://`},
		{"three-letter region", `chains: chat: [{use: "pii", regions: ["USA"]}]`,
			`chains.chat[0].regions[0]: "USA" is not a two-letter region code such as "US" or "GB"`},
		{"blank keyword", `chains: chat: [{use: "content_filter", keywords: ["ok", " "]}]`,
			`chains.chat[0].keywords[1]: " " is blank: a keyword holds at least one character that is not white space; remove it`},
		{"constraint id in capitals", `constraints: [{id: "No-Log", outer: "retry", inner: "log", why: "w"}]`,
			`constraints[0].id: "No-Log" is not a constraint id: lower-case letters, digits and -, such as "pii-before-log"`},
		{"rate limit written as a quota", `chains: tool: [{use: "rate_limit", rate: 1000, per: "720h"}]`,
			`chains.tool[0]: 1000 per "720h" with burst 1 lets one call through every 43m12s once the burst is spent, however few calls came in the period: mode "wait" holds a call up to 43m12s, "reject" and "block" refuse it; for a quota of 1000 calls per "720h" set burst: 1000, or a meter with budget: calls: 1000 and window: "720h"; for one call every 43m12s write rate: 1, per: "43m12s"`},
		{"rate limit on turns written as a quota", `chains: turn: [{use: "rate_limit", rate: 100, per: "24h", burst: 10, mode: "reject"}]`,
			`chains.turn[0]: 100 per "24h" with burst 10 lets one call through every 14m24s once the burst is spent, however few calls came in the period: mode "wait" holds a call up to 14m24s, "reject" and "block" refuse it; for a quota of 100 calls per "24h" set burst: 100; for one call`},
		{"invisible character in a scope", `tools: pay: {}
chains: tool: [{use: "log", tools: ["pa\u200by"]}]`,
			`it holds '\u200b' (U+200B, an invisible format character), and names are ASCII`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, _ := loadSnippet(t, tt.src)
			require.Len(t, diags, 1, "%v", diags)
			assert.Equal(t, "schema/invalid-value", diags[0].Rule)
			assert.Contains(t, diags[0].Message, tt.want)
		})
	}
}

// A list declared in two files (a chain, the constraints, a tool's
// required arguments, an entry's tools...) is reported as such, once, at
// both lists: not as a list too short, nor as an entry's fields set
// differently in two places.
func TestListDeclaredTwice(t *testing.T) {
	for _, tt := range []struct{ name, a, b, want, at, other string }{
		{"chain, entries conflict", `chains: chat: [{use: "retry", max_attempts: 3}]`, `chains: chat: [{use: "meter", budget: usd: 1}]`,
			"the field is set differently in two places; chains.chat is declared twice, and CUE joins two lists entry by entry", "b.cue:3:22", "a.cue:3:22"},
		{"chain, lengths", `chains: tool: [{use: "log"}]`, `chains: tool: [{use: "log"}, {use: "audit"}]`,
			"chains.tool is declared twice, as lists of 1 and 2 entries, and CUE joins two lists entry by entry: declare each chain as one list in one place", "b.cue:3:15", "a.cue:3:15"},
		{"chain, lengths and entries", `chains: tool: [{use: "log"}]`, `chains: tool: [{use: "audit"}, {use: "log"}]`,
			"chains.tool is declared twice, as lists of 1 and 2 entries", "b.cue:3:15", "a.cue:3:15"},
		{"constraints, lengths", `constraints: [{id: "a-b", stage: "tool", outer: "pii", inner: "audit", why: "x"}]`,
			`constraints: [{id: "c-d", stage: "chat", outer: "security", inner: "pii", why: "y"}, {id: "e-f", stage: "tool", outer: "egress", inner: "audit", why: "z"}]`,
			"constraints is declared twice, as lists of 1 and 2 elements, and CUE joins two lists element by element: declare it as one list in one place", "b.cue:3:14", "a.cue:3:14"},
		{"constraints, elements conflict", `constraints: [{id: "a-b", stage: "tool", outer: "pii", inner: "audit", why: "x"}]`,
			`constraints: [{id: "c-d", stage: "tool", outer: "pii", inner: "audit", why: "x"}]`,
			`constraints[0].id: conflicting values "c-d" and "a-b": the field is set differently in two places; constraints is declared twice, and CUE joins two lists element by element: declare it as one list in one place`, "b.cue:3:20", "a.cue:3:20"},
		{"required arguments", `tools: t: {args: {type: "object", required: ["a"], properties: {a: type: "string", b: type: "string"}}}`, `tools: t: args: required: ["a", "b"]`,
			"tools.t.args.required is declared twice, as lists of 1 and 2 elements", "b.cue:3:27", "a.cue:3:45"},
		{"invariants off", `invariants: off: ["max_executions"]`, `invariants: off: ["audit_complete", "budget_overshoot"]`,
			"invariants.off is declared twice, as lists of 1 and 2 elements", "b.cue:3:18", "a.cue:3:18"},
		{"an entry's tools", "tools: {a: {}, b: {}}\nchains: tool: [{use: \"log\", tools: [\"a\"]}]", `chains: tool: [{use: "log", tools: ["a", "b"]}]`,
			"chains.tool is declared twice, and CUE joins two lists entry by entry: declare each chain as one list in one place", "b.cue:3:15", "a.cue:4:15"},
		{"mcp command", `mcp: servers: fs: {command: ["npx", "x"]}`, `mcp: servers: fs: command: ["npx"]`,
			"mcp.servers.fs.command is declared twice, as lists of 2 and 1 elements", "b.cue:3:28", "a.cue:3:29"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePolicy(t, map[string]string{"a.cue": "package p\n\n" + tt.a + "\n", "b.cue": "package p\n\n" + tt.b + "\n"})
			_, diags, err := Load(context.Background(), []string{dir}, Options{})
			require.NoError(t, err)
			require.Len(t, diags, 1, "%v", diags)
			d := diags[0]
			assert.Equal(t, "schema/invalid-value", d.Rule)
			assert.Contains(t, d.Message, tt.want)
			assert.NotContains(t, d.Message, "needs at least")
			at := func(p Pos) string { return fmt.Sprintf("%s:%d:%d", filepath.Base(p.File), p.Line, p.Col) }
			assert.Equal(t, tt.at, at(d.Pos))
			require.Len(t, d.Related, 1, "%v", d)
			assert.Equal(t, tt.other, at(d.Related[0].Pos))
		})
	}
}

// A required name that properties lacks is not reported where something
// else at its level may describe it.
func TestRequiredDescribedElsewhere(t *testing.T) {
	_, diags, _ := loadSnippet(t, `tools: {
	a: {args: {type: "object", required: ["x-id"], properties: {name: type: "string"}, patternProperties: "^x-": type: "string"}}
	b: {args: {type: "object", required: ["id"], allOf: [{properties: id: type: "string"}], properties: {name: type: "string"}}}
	c: {args: {type: "object", required: ["id"]}}
}`)
	assert.Empty(t, diags)
}

// A declared name holding a look-alike letter matches no reference to it:
// the error at the declaration names the letter.
func TestLookAlikeDeclaration(t *testing.T) {
	_, diags, _ := loadSnippet(t, `tools: "pаy": {}`)
	require.NotEmpty(t, diags)
	assert.Equal(t, "schema/unknown-field", diags[0].Rule)
	assert.Equal(t, `tools: "pаy" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _: it holds 'а' (U+0430, a Cyrillic letter), and names are ASCII`, diags[0].Message)
}

// A declared name that is not a name (a space, a leading digit) is reported
// as such at its label, with the label unquoted, not as an unknown field
// whose closest allowed name is itself.
func TestDeclarationNotAName(t *testing.T) {
	_, diags, _ := loadSnippet(t, "models: \"my model\": {}\ntools: {\n\tok: {}\n\t\"2fa\": {}\n}")
	require.Len(t, diags, 2)
	assert.Equal(t, `models: "my model" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _`, diags[0].Message)
	assert.Equal(t, `tools: "2fa" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _`, diags[1].Message)
	assert.Equal(t, 3, diags[1].Pos.Line-diags[0].Pos.Line, "each at its label")
}

// An empty list where the schema wants at least one element is placed at
// that list, not at the chain that holds its entry.
func TestEmptyListPlacedAtTheList(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{`models: a: {}
chains: chat: [{use: "fallback", models: []}]`, "4:42 schema/invalid-value"},
		{`tools: t: {args: {type: "object"}}
chains: tool: [{use: "file_check", roots: []}]`, "4:43 schema/invalid-value"},
		{`tools: t: {args: {type: "object"}}
chains: tool: [
	{use: "idempotent", key_args: []},
]`, "5:32 schema/invalid-value"},
		{`tools: t: {url_arg: [], args: {type: "object"}}`, "3:21 schema/invalid-value"},
	} {
		_, diags, got := loadSnippet(t, tt.src)
		require.Len(t, diags, 1, "%v", diags)
		assert.Equal(t, []string{tt.want}, got)
		assert.Contains(t, diags[0].Message, "has 0 elements, needs at least 1")
	}
}

// A field the schema declares only under a setting of another field is
// explained by that setting, not reported as a plain unknown or missing
// field.
func TestConditionalFields(t *testing.T) {
	tests := []struct {
		name, src, rule, want string
	}{
		{"classifier model without kind", `models: g: {}
chains: chat: [{use: "security", classifier: {model: "g"}}]`, "schema/unknown-field",
			`unknown field "model": it is a field only where kind is "chat", and kind here is "text" (its default): set kind: "chat", or remove the field`},
		{"text threshold on a chat classifier", `models: g: {}
chains: chat: [{use: "security", classifier: {kind: "chat", model: "g", threshold: 0.9}}]`, "schema/unknown-field",
			`unknown field "threshold": it is a field only where kind is "text", and kind here is "chat": set kind: "text", or remove the field`},
		{"summary model on keep_recent", `models: s: {}
chains: chat: [{use: "compaction", model: "s"}]`, "schema/unknown-field",
			`unknown field "model": it is a field only where strategy is "summarize", and strategy here is "keep_recent" (its default): set strategy: "summarize", or remove the field`},
		{"summarize without model", `chains: chat: [{use: "compaction", strategy: "summarize"}]`, "schema/missing-field",
			`missing required field "model": strategy "summarize" needs it`},
		{"chat classifier without model", `chains: chat: [{use: "security", classifier: {kind: "chat"}}]`, "schema/missing-field",
			`missing required field "model": kind "chat" needs it`},
		{"sqlite without path", `stores: s: {kind: "sqlite"}`, "schema/missing-field",
			`missing required field "path": kind "sqlite" needs it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, _ := loadSnippet(t, tt.src)
			require.Len(t, diags, 1, "%v", diags)
			assert.Equal(t, tt.rule, diags[0].Rule)
			assert.Equal(t, tt.want, diags[0].Message)
		})
	}
}

// A field named as other gateways name it gets agentc's field as its
// did-you-mean, where the struct has that field; a misspelling still gets
// the closest field.
func TestUnknownFieldAliases(t *testing.T) {
	tests := []struct{ name, src, at, want string }{
		{"rps", `chains: tool: [{use: "rate_limit", rps: 10}]`,
			"3:36", `unknown field "rps"; did you mean "rate"? (rate is the calls let through each per, "1s" by default)`},
		{"max_retries", `chains: chat: [{use: "retry", max_retries: 2}]`,
			"3:31", `unknown field "max_retries"; did you mean "max_attempts"? (max_attempts counts the first attempt too: 2 retries are max_attempts: 3)`},
		{"window", `chains: chat: [{use: "rate_limit", rate: 5, window: "1m"}]`,
			"3:45", `unknown field "window"; did you mean "per"?`},
		{"alias of a field the struct has not", `chains: chat: [{use: "log", rps: 10}]`,
			"3:29", `unknown field "rps"`},
		{"misspelling", `chains: chat: [{use: "rate_limit", rat: 5}]`,
			"3:36", `unknown field "rat"; did you mean "rate"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, got := loadSnippet(t, tt.src)
			require.NotEmpty(t, diags)
			assert.Equal(t, tt.at+" schema/unknown-field", got[0])
			if tt.name == "alias of a field the struct has not" {
				assert.Equal(t, tt.want, diags[0].Message)
				return
			}
			assert.Contains(t, diags[0].Message, tt.want)
		})
	}
}

// A value of a JSON Schema keyword outside its enumeration gets the
// closest allowed value as its did-you-mean, at the value; so does a
// misspelt format, which validators would take for a format of one's own.
func TestSchemaValueSuggestions(t *testing.T) {
	tests := []struct{ name, src, at, want string }{
		{"type typo", `tools: t: {args: {type: "object", properties: n: {type: "nubmer"}}}`,
			"3:57 error", `tools.t.args.properties.n.type: not valid JSON Schema: value must be one of "array", "boolean", "integer", "null", "number", "object", "string"; did you mean "number"?`},
		{"type named as in a language, in a list", `tools: t: {args: {type: "object", properties: n: {type: ["null", "int"]}}}`,
			"3:66 error", `tools.t.args.properties.n.type[1]: not valid JSON Schema: value must be one of "array", "boolean", "integer", "null", "number", "object", "string"; did you mean "integer"?`},
		{"format typo", `tools: t: {args: {type: "object", properties: u: {type: "string", format: "urii"}}}`,
			"3:75 warning", `tools.t.args.properties.u.format: "urii" is not a format JSON Schema defines, so no validator knows it; did you mean "uri"?`},
		{"nested format", `tools: t: {args: {type: "object", properties: d: {type: "array", items: {type: "string", format: "date_time"}}}}`,
			"3:98 warning", `tools.t.args.properties.d.items.format: "date_time" is not a format JSON Schema defines, so no validator knows it; did you mean "date-time"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, got := loadSnippet(t, tt.src)
			require.Len(t, diags, 1, "%v", got)
			assert.Equal(t, tt.at, fmt.Sprintf("%d:%d %s", diags[0].Pos.Line, diags[0].Pos.Col, diags[0].Severity))
			assert.Equal(t, "schema/invalid-value", diags[0].Rule)
			assert.Equal(t, tt.want, diags[0].Message)
		})
	}

	// A format of one's own, near no defined one, is left alone.
	_, diags, _ := loadSnippet(t, `tools: t: {args: {type: "object", properties: c: {type: "string", format: "iso4217-currency"}}}`)
	assert.Empty(t, diags)
}
