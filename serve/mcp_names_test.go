package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// namesUpstream serves, on a loopback port, a tool under each of names that
// answers "done"; calls counts the calls of each.
func namesUpstream(t *testing.T, names ...string) (string, func(string) int) {
	t.Helper()
	var mu sync.Mutex
	calls := map[string]int{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	for _, name := range names {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				calls[name]++
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[name]
	}
}

const variantPolicy = `package gw

keys: agent: {sha256: %q}
mcp: servers: pay: {url: %q%s}
tools: %s: {side_effecting: true, args: {type: "object"}}
chains: tool: [
	{use: "guard", name: "refund_limit", tools: [%[4]q], deny: "has(args.amount) && args.amount > 100.0", message: "refunds over 100 need an approver"},
	{use: "audit", trail: "logical"},
]
`

// TestMCPCaseVariantToolNamesWithheld: an upstream tool whose name is the
// name of a tool the policy names (here guards) in another case, or the
// name of another tool listed in another case, is withheld: not listed,
// its calls refused before the upstream sees them, logged and counted. A
// call of "Refund" would otherwise skip the guard written for "refund".
func TestMCPCaseVariantToolNamesWithheld(t *testing.T) {
	// Next to the tool the policy guards, and two variants of a tool the
	// policy does not name.
	upstream, calls := namesUpstream(t, "refund", "Refund", "REFUND", "lookup", "Lookup", "stock",
		"\uff52efund", "refund\u200b", "refund ")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(variantPolicy, sha("agent-key"), upstream, "", "refund"))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	assert.Equal(t, []string{"refund", "stock"}, listedTools(t, cs))
	ctx := context.Background()
	for _, name := range []string{"Refund", "REFUND", "lookup", "Lookup", "\uff52efund", "refund\u200b", "refund "} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"amount": 250}})
		if err == nil {
			assert.True(t, res.IsError, "%q is refused", name)
		}
		assert.Zero(t, calls(name), "the upstream never sees a call of %q", name)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"amount": 250}})
	require.NoError(t, err)
	assert.Contains(t, text(t, res), "blocked by refund_limit")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "stock", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "done", text(t, res))
	logs := s.logs.String()
	assert.Contains(t, logs, "mcp tool withheld: its name differs from another tool's only in case or form")
	assert.Contains(t, logs, `tool=Refund server=pay`)
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_mcp_tools_withheld{layer="mcp",server="pay"} 7`)

	// Instead of it, behind a prefix: the policy guards "pay_refund", the
	// upstream lists only "Refund".
	upstream, calls = namesUpstream(t, "Refund", "stock")
	s = startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(variantPolicy, sha("agent-key"), upstream, `, prefix: "pay_"`, "pay_refund"))), WatchInterval: -1})
	cs = connectProxy(t, s.url, "agent-key", nil)
	assert.Equal(t, []string{"pay_stock"}, listedTools(t, cs))
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay_Refund", Arguments: map[string]any{"amount": 250}})
	if err == nil {
		assert.True(t, res.IsError)
	}
	assert.Zero(t, calls("Refund"))
}

func TestFoldToolName(t *testing.T) {
	for _, name := range []string{"refund", "Refund", "REFUND", "\uff52efund", "\uff32\uff45\uff46\uff55\uff4e\uff44",
		"refund\u200b", "re\u00adfund", "\u2060refund", "refund ", " refund\u3000", "refund\ufe0f"} {
		assert.Equal(t, "refund", foldToolName(name), "%q", name)
	}
	assert.Equal(t, "pay_refund", foldToolName("Pay_Refund"))
	assert.NotEqual(t, "refund", foldToolName("r\u0435fund"), "a Cyrillic look-alike is not a case or form variant (badToolName withholds it)")
	assert.NotEqual(t, "refund", foldToolName("re fund"))
}

// TestLookAlikes: a name the policy names is kept, and so are the names no
// other folds to; a variant says which name it differs from.
func TestLookAlikes(t *testing.T) {
	var tools []ListedTool
	for _, name := range []string{"refund", "Refund", "lookup", "Lookup", "stock", "Stock\u200b"} {
		tools = append(tools, ListedTool{Name: name})
	}
	blocked := lookAlikes(tools, map[string]bool{"refund": true, "CHARGE": true}, nil)
	var names []string
	for name := range blocked {
		names = append(names, name)
	}
	assert.ElementsMatch(t, []string{"Refund", "lookup", "Lookup"}, names)
	assert.Equal(t, `tool name "Refund" differs from "refund", the name of a tool the policy names, only in case or form: a rule naming one would not apply to the other`,
		blocked["Refund"].Message)
	assert.Contains(t, blocked["lookup"].Message, `differs from "Lookup", the name of another tool listed`)
	assert.Equal(t, LayerMCP, blocked["Lookup"].Layer)
	assert.Empty(t, lookAlikes([]ListedTool{{Name: "charge"}}, map[string]bool{"Charge": true, "charge": true}, nil), "a name the policy names is kept")
}

// TestToolNameRules: what a predicate says of tool names is read from its
// syntax: names it compares tool.name with (raw strings too, not the name
// of another path), and the rules of the methods it calls on tool.name. A
// listed name that escapes a rule only by case or form is withheld, as one
// differing from a name is: a guard denying tool.name.startsWith('delete_')
// would not apply to Delete_repo.
func TestToolNameRules(t *testing.T) {
	for _, tt := range []struct {
		src   string
		names []string
		rules []string
	}{
		{"tool.name == 'delete_repo'", []string{"delete_repo"}, nil},
		{"'delete_repo' != tool.name", []string{"delete_repo"}, nil},
		{"tool.name in ['a', \"b\"]", []string{"a", "b"}, nil},
		{"tool.name == r'delete_repo'", []string{"delete_repo"}, nil},
		{"args.tool.name == 'DELETE'", nil, nil},
		{"tool.name.startsWith('delete_') || tool.name.endsWith(\"_all\")", nil, []string{`tool.name.startsWith("delete_")`, `tool.name.endsWith("_all")`}},
		{"tool.name.contains('drop') && tool.name.matches('^rm_[a-z]+$')", nil, []string{`tool.name.contains("drop")`, `tool.name.matches("^rm_[a-z]+$")`}},
		{"tool.name.matches('(')", nil, nil},
		{"matches(tool.name, '^rm_')", nil, []string{`tool.name.matches("^rm_")`}},
		{"not ( valid", nil, nil},
	} {
		names, rules := toolNameRules(tt.src)
		assert.Equal(t, tt.names, names, tt.src)
		var srcs []string
		for _, r := range rules {
			srcs = append(srcs, r.src)
		}
		assert.Equal(t, tt.rules, srcs, tt.src)
	}

	_, rules := toolNameRules("tool.name.startsWith('delete_') || tool.name.endsWith('_all') || tool.name.contains('drop') || tool.name.matches('^rm_[a-z]+$')")
	var tools []ListedTool
	for _, name := range []string{"Delete_repo", "delete_branch", "wipe_ALL", "cache_all", "table_DROP", "dropper", "rm_Tmp", "rm_log", "lookup"} {
		tools = append(tools, ListedTool{Name: name})
	}
	blocked := lookAlikes(tools, map[string]bool{}, rules)
	var names []string
	for name := range blocked {
		names = append(names, name)
	}
	assert.ElementsMatch(t, []string{"Delete_repo", "wipe_ALL", "table_DROP", "rm_Tmp"}, names)
	assert.Equal(t, `tool name "Delete_repo" escapes tool.name.startsWith("delete_"), a rule of the policy, only by case or form: the rule would not apply to it`,
		blocked["Delete_repo"].Message)
}

// TestMCPCaseVariantOfAPredicateNameWithheld: a policy names a tool in a
// tool layer's predicate too (a guard's deny or a when comparing tool.name
// with "refund"). An upstream listing "Refund" in place of the "refund"
// such a guard names would offer the client's model the guarded tool
// while its calls skip the guard: it is withheld as a variant of a tool a
// tools scope names is. A string the predicate compares with something
// else ('STOCK', a value of an argument) names no tool: "stock" is served.
func TestMCPCaseVariantOfAPredicateNameWithheld(t *testing.T) {
	upstream, calls := namesUpstream(t, "Refund", "Charge", "stock")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
chains: tool: [
	{use: "guard", name: "refund_limit", deny: "tool.name == 'refund' && has(args.amount) && args.amount > 100.0 && !(has(args.note) && args.note == 'STOCK')", message: "refunds over 100 need an approver"},
	{use: "guard", name: "charge_limit", when: "tool.name in [\"charge\"]", deny: "has(args.amount) && args.amount > 100.0"},
	{use: "audit", trail: "logical"},
]
`, sha("agent-key"), upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	assert.Equal(t, []string{"stock"}, listedTools(t, cs))
	for _, name := range []string{"Refund", "Charge"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"amount": 250}})
		if err == nil {
			assert.True(t, res.IsError, "%q is refused", name)
		}
		assert.Zero(t, calls(name), "the upstream never sees a call of %q", name)
	}
	assert.Contains(t, s.logs.String(), `differs from \"refund\", the name of a tool the policy names`)
}

// TestMCPCaseVariantEscapingANameRuleWithheld: a guard denying
// tool.name.startsWith('delete_') does not apply to Delete_repo, which CEL
// compares exactly: an upstream listing it is withheld, its calls never
// sent, while delete_branch is served and guarded.
func TestMCPCaseVariantEscapingANameRuleWithheld(t *testing.T) {
	upstream, calls := namesUpstream(t, "Delete_repo", "delete_branch", "lookup")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: gh: url: %q
chains: tool: [
	{use: "guard", name: "no_deletes", deny: "tool.name.startsWith('delete_')", message: "deletes need an approver"},
	{use: "audit", trail: "logical"},
]
`, sha("agent-key"), upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	assert.Equal(t, []string{"delete_branch", "lookup"}, listedTools(t, cs))
	for _, name := range []string{"Delete_repo", "delete_branch"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil {
			assert.True(t, res.IsError, "%q is refused", name)
		}
		assert.Zero(t, calls(name), "the upstream never sees a call of %q", name)
	}
	assert.Contains(t, s.logs.String(), `escapes tool.name.startsWith(\"delete_\")`)
}
