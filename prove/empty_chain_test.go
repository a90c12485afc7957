package prove_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A declared model is a target through the chat chain, and a declared tool
// through the tool chain, even where the chain is empty: the call reaches
// it directly, and what the invariants say of the run still holds or not.
func TestEmptyChainsAreExplored(t *testing.T) {
	r := explorePolicy(t, `models: m: {usd_per_mtok_in: 1}
`, 1)
	assert.Equal(t, 1, r.Targets, "the model through its empty chat chain")
	assert.Positive(t, r.States)
	assert.Empty(t, violated(r))

	r = explorePolicy(t, `tools: lookup: {args: {type: "object", properties: q: type: "string"}}
`, 1)
	assert.Positive(t, r.Targets, "the tool through its empty tool chain")
	assert.Empty(t, violated(r))
}
