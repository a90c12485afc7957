package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// tenantHeader is a custom chat middleware with a config of its own.
type tenantHeader struct {
	Key   string   `json:"key"`
	Limit int      `json:"limit"`
	Tags  []string `json:"tags"`
	Inner struct {
		On bool `json:"on"`
	} `json:"inner"`
}

func (*tenantHeader) WrapChat(next runtime.ChatHandler) runtime.ChatHandler { return next }

func init() {
	runtime.Register(runtime.Module{
		ID: "test.tenant", Stages: []plan.Stage{plan.StageChat},
		New: func() runtime.Middleware { return &tenantHeader{} },
	})
}

// A custom middleware's config that does not fit its struct is refused
// where it is: by plan.Load at its JSON pointer, line and column, with
// the kinds of value found and wanted (not a Go decoder's type names),
// and by Build, for a plan made in memory, at the field's path.
func TestCustomConfigMismatchIsPlaced(t *testing.T) {
	for _, c := range []struct{ config, load, build string }{
		{`{"key": 5}`, `/chains/chat/0/config/key (line 4, col 64): a number: test.tenant's key is a string`,
			`config: key: a number, where the field takes a string`},
		{`{"limit": 2.5}`, `/chains/chat/0/config/limit (line 4, col 66): 2.5: test.tenant's limit is an integer that a Go int holds`,
			`config: limit: 2.5, where the field takes an integer that a Go int holds`},
		{`{"tags": ["a", 7]}`, `/chains/chat/0/config/tags/1 (line 4, col 71): a number: test.tenant's tags[1] is a string`,
			`config: tags[1]: a number, where the field takes a string`},
		{`{"inner": {"on": "yes"}}`, `/chains/chat/0/config/inner/on (line 4, col 73): a string: test.tenant's inner.on is a boolean`,
			`config: inner.on: a string, where the field takes a boolean`},
		{`{"inner": []}`, `/chains/chat/0/config/inner (line 4, col 66): an array: test.tenant's inner is an object`,
			`config: inner: an array, where the field takes an object`},
		// An unknown key names the field it is near.
		{`{"kye": "t"}`, `/chains/chat/0/config/kye (line 4, col 64): unknown field "kye" (a typo, or a plan of another agentc: build the plan again with the agentc that loads it); did you mean "key"?`,
			`config: unknown field "kye" (a typo, or a plan of another agentc: build the plan again with the agentc that loads it); did you mean "key"?`},
		{`{"inner": {"On": true}}`, `/chains/chat/0/config/inner/On (line 4, col 73): unknown field "On" (keys match the fields exactly: "on")`,
			`config: inner: unknown field "On" (keys match the fields exactly: "on")`},
	} {
		t.Run(c.config, func(t *testing.T) {
			doc := fmt.Sprintf("{\n  \"version\": 1,\n  \"policy\": \"p\",\n  \"chains\": {\"chat\": [{\"use\": \"test.tenant\", \"config\": %s}]}\n}\n", c.config)
			path := filepath.Join(t.TempDir(), "plan.json")
			require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
			_, err := plan.Load(path)
			var pe *plan.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, []string{c.load}, pe.Problems)

			_, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("test.tenant", c.config)}}), runtime.Deps{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), `chains.chat[0] "test.tenant": `+c.build)
		})
	}
	// A config that fits loads and builds.
	_, err := plan.Decode("ok.json", []byte(`{"version":1,"policy":"p","chains":{"chat":[{"use":"test.tenant","config":{"key":"t","limit":3,"tags":["a"],"inner":{"on":true}}}]}}`))
	require.NoError(t, err)
}
