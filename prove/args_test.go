package prove_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const patternRefund = `tools: refund: {
	side_effecting: true
	retry_safe:     true
	args: {type: "object", required: ["order_id", "amount"], properties: {
		order_id: {type: "string", pattern: "^[A-Z][0-9]+$"}
		amount: {type: "number", minimum: 0, maximum: 10000}
	}}
}
chains: tool: [{use: "retry", max_attempts: 3}, {use: "audit", trail: "logical"}]
`

// A tool whose string argument has a pattern is called with a string that
// matches it: the retry outside a logical-trail audit is found, as it is
// without the pattern. The call whose order_id is "a" is explored too.
func TestArgsMatchThePattern(t *testing.T) {
	r := explorePolicy(t, patternRefund, 1)
	require.NotEmpty(t, r.Violations, "the calls must get past the schema check")
	assert.Equal(t, "audit_complete", r.Violations[0].Invariant)
	assert.Regexp(t, `^[A-Z][0-9]+$`, r.Violations[0].Scenario.Steps[0].Tool.Args["order_id"])
	assert.Empty(t, r.Unexplored)
	assert.Equal(t, 9, r.Targets, "small, large and refused arguments, once and twice concurrent in two orders")
}

// A tool whose every generated call is refused before any layer is not
// reported proved: the report names it and why.
func TestRefusedBeforeAnyLayerIsNotExplored(t *testing.T) {
	r := explorePolicy(t, `tools: refund: {args: {type: "object", required: ["order_id"], properties: order_id: {type: "string", pattern: "\\bA1", maxLength: 1}}}
chains: tool: [{use: "audit"}]
`, 2)
	assert.Empty(t, r.Violations)
	require.Len(t, r.Unexplored, 1)
	assert.Equal(t, "tool refund", r.Unexplored[0].Target)
	assert.Contains(t, r.Unexplored[0].Reason, "every generated call was refused before any layer")
	assert.Contains(t, r.Unexplored[0].Reason, "order_id")
}

// A URL argument behind egress names a host the allow list admits (the
// scenario's DNS stub resolves it to a public address), and a path argument
// behind file_check lies under its root, with its extension: the tool runs.
func TestArgsPassEgressAndFileCheck(t *testing.T) {
	r := explorePolicy(t, `tools: web_fetch: {url_arg: "url", args: {type: "object", required: ["url"], properties: url: {type: "string", maxLength: 2048}}}
chains: tool: [{use: "egress", allow: ["api.example.com"]}, {use: "retry", max_attempts: 3}, {use: "audit", trail: "logical"}]
`, 1)
	assert.Empty(t, r.Unexplored)
	require.NotEmpty(t, r.Violations, "the retry outside the audit is found once the call reaches the tool")
	assert.Equal(t, "https://api.example.com/a", r.Violations[0].Scenario.Steps[0].Tool.Args["url"])
	assert.Equal(t, map[string][]string{"api.example.com": {"93.184.216.34"}}, r.Violations[0].Scenario.DNS)

	p, dir := policyPlan(t, `tools: read: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [{use: "file_check", roots: ["./data"], extensions: [".md"], must_exist: true}, {use: "retry", max_attempts: 3}, {use: "audit", trail: "logical"}]
`)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "notes.md"), []byte("x"), 0o644))
	r = exploreP(t, p, dir, 1)
	assert.Empty(t, r.Unexplored)
	require.NotEmpty(t, r.Violations)
	assert.Equal(t, "notes.md", r.Violations[0].Scenario.Steps[0].Tool.Args["path"], "relative to the root")
}

// A tool every generated call of which a layer blocks before it runs is
// not explored either: the report says which layer.
func TestBlockedBeforeTheToolIsNotExplored(t *testing.T) {
	r := explorePolicy(t, `tools: web_fetch: {url_arg: "url", args: {type: "object", required: ["url"], properties: url: type: "string"}}
chains: tool: [{use: "guard", deny: "size(args.url) >= 0", message: "no fetching"}]
`, 1)
	require.Len(t, r.Unexplored, 1)
	assert.Equal(t, "tool web_fetch", r.Unexplored[0].Target)
	assert.Contains(t, r.Unexplored[0].Reason, "no generated call reached the tool")
	assert.Contains(t, r.Unexplored[0].Reason, "no fetching")
}
