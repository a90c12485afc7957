package prove_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// A plan whose layer does not build (a file_check root missing on this
// machine) is reported once, the same way every time, naming the layer at
// its index in the policy's chain, not in the chain prove puts probes in,
// and no target: every target fails alike.
func TestBuildErrorNamesThePolicysLayer(t *testing.T) {
	p, dir := policyPlan(t, `models: {a: {usd_per_mtok_in: 1}, b: {usd_per_mtok_in: 2}}
tools: {
	read: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
	write: {path_arg: "path", side_effecting: true, args: {type: "object", required: ["path"], properties: path: type: "string"}}
}
chains: tool: [
	{use: "log"},
	{use: "file_check", roots: ["./missing"]},
]
`)
	const want = `prove: build chains.tool[1] "file_check": provision: file_check: root`
	var first string
	for range 4 {
		_, err := prove.Explore(context.Background(), p, prove.Options{Depth: 1, Dir: dir})
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		if first == "" {
			first = err.Error()
		}
		assert.Equal(t, first, err.Error(), "the same error every time")
	}

	sc, err := scenario.Parse([]byte(`{"tools": {"read": [{"result": {"ok": true}}]}, "steps": [{"tool": {"name": "read", "args": {"path": "a"}}}]}`))
	require.NoError(t, err)
	_, err = prove.Replay(context.Background(), p, sc, prove.Options{Dir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `build chains.tool[1] "file_check"`)
}
