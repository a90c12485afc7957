package guard_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A guard denying "args.url.startsWith('https://api.example.com/v1/admin')"
// let through every other spelling of a URL a server routes to /v1/admin.
// Written on url_host() and url_path(), it blocks each of them: those it
// reads the routed path of by the deny, the ambiguous ones by on_error.
func TestToolGuardOnURLPathBlocksEverySpellingOfAPrefix(t *testing.T) {
	build := func(deny string) (*runtime.Pipeline, *rt.Tool) {
		l := rt.Named("admin", rt.Layer("guard", `{"deny":"`+deny+`","message":"no admin API","on_error":"closed"}`))
		l.Tools = []string{"fetch"}
		l.Predicates = map[string]*plan.Predicate{"deny": {Stage: plan.StageTool, Phase: "before", Source: deny, Tools: []string{"fetch"}}}
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{l}})
		p.Tools = map[string]plan.Tool{"fetch": {URLArgs: []string{"url"}, Args: json.RawMessage(`{"type":"object","required":["url"],"properties":{"url":{"type":"string"}}}`)}}
		tool := rt.NewTool(rt.ToolResult{Value: "ok"})
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"fetch": tool.Func()}})
		require.NoError(t, err)
		return pl, tool
	}
	sound, soundTool := build("url_host(args.url) == 'api.example.com' && url_path(args.url).startsWith('/v1/admin')")
	naive, naiveTool := build("args.url.startsWith('https://api.example.com/v1/admin')")
	call := func(pl *runtime.Pipeline, url string) error {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "fetch", Args: map[string]any{"url": url}})
		return err
	}
	for _, tt := range []struct {
		url   string
		ambig bool
	}{
		{url: "https://api.example.com/v1/x/../admin"},
		{url: "https://api.example.com/v1/%61dmin/users"},
		{url: "https://api.example.com/v1/x/%2e%2e/admin"},
		{url: "https://API.EXAMPLE.COM/v1/admin"},
		{url: "https://api.example.com:443/v1/admin"},
		{url: "https://ops@api.example.com/v1/admin"},
		{url: "https://api.example.com/v1//admin"},
		{url: `https://api.example.com/v1\admin`},
		{url: "https://api.example.com/v1/x//../admin", ambig: true},
		{url: "https://api.example.com/v1%2Fadmin", ambig: true},
		{url: "https://api.example.com/v1/x/..;/admin", ambig: true},
		{url: "https://api.example.com/v1/x/%252e%252e/admin", ambig: true},
		{url: "https://api.example.com/v1/x%00/../admin", ambig: true},
	} {
		before := naiveTool.Calls()
		require.NoError(t, call(naive, tt.url), tt.url)
		assert.Equal(t, before+1, naiveTool.Calls(), "the prefix test lets %s through", tt.url)

		before = soundTool.Calls()
		err := call(sound, tt.url)
		var b *runtime.BlockedError
		if assert.ErrorAs(t, err, &b, tt.url) {
			assert.Equal(t, "admin", b.Layer, tt.url)
			if tt.ambig {
				assert.ErrorContains(t, b.Err, "url_path", tt.url)
			} else {
				assert.NoError(t, b.Err, tt.url)
				assert.Equal(t, "no admin API", b.Message, tt.url)
			}
		}
		assert.Equal(t, before, soundTool.Calls(), "a blocked call never runs: %s", tt.url)
	}
	for _, url := range []string{"https://api.example.com/v1/public/a", "https://api.example.com/v1/administrators/../public", "https://api.example.com/v1/public?next=/v1/admin"} {
		require.NoError(t, call(sound, url), url)
	}
}
