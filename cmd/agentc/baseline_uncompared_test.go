package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
)

// A layer of both versions whose baseline config does not decode (a plan
// another build wrote, handed to compiler.CompareBaseline) is reported at
// the layer in the policy, as docs/state.md says: the start of its chain
// is for a layer of the baseline only.
func TestUncomparedLayerOfBothIsReportedAtTheLayer(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(`package p

tools: refund: {side_effecting: true, args: {type: "object", properties: order_id: type: "string"}}
stores: shared: {kind: "redis", url_env: "REDIS_URL"}

chains: tool: [
	{use: "log"},
	{use: "idempotent", store: "shared", key_args: ["order_id"]},
]
`), 0o644))
	ctx := context.Background()
	old, err := compiler.LoadBaseline(ctx, dir, compiler.Options{})
	require.NoError(t, err)
	require.Equal(t, "idempotent", old.Chains.Tool[1].Use)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(old.Chains.Tool[1].Config, &cfg))
	cfg["retired_field"] = 1
	old.Chains.Tool[1].Config, err = json.Marshal(cfg)
	require.NoError(t, err)
	c, err := compiler.Compile(ctx, []string{dir}, compiler.Options{})
	require.NoError(t, err)
	c.CompareBaseline(old)
	var lines []int
	for _, d := range c.Diagnostics {
		if d.Rule == compiler.RuleStateReset {
			assert.Contains(t, d.Message, "the state of idempotent in the baseline could not be compared: its config does not decode")
			lines = append(lines, d.Pos.Line)
		}
	}
	assert.Equal(t, []int{8}, lines, "at the idempotent layer, not at the chain's first")
}
