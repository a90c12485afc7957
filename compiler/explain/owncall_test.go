package explain_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOwnCallPath pins the consequence that spells out where a judge's and a
// summarizing compaction's own model calls go: the chain below the layer.
func TestOwnCallPath(t *testing.T) {
	consequences := chatConsequences(t, `package p
models: {
	primary: {}
	reviewer: {}
	small: {}
}
chains: chat: [
	{use: "tracing"},
	{use: "judge", model: "reviewer"},
	{use: "compaction", strategy: "summarize", model: "small", when: "request.model == 'primary'"},
	{use: "meter"},
	{use: "retry", max_attempts: 3},
]
`)
	assert.Equal(t, []string{
		"a failing call reaches the model up to 3 times (retry 3 attempts)",
		"judge makes its verdict call (model `reviewer`) through the chain below it: compaction, meter, retry and the model call; tracing outside it does not see it; the when of compaction skips it; a failing one reaches the model up to 3 times (retry 3 attempts)",
		"compaction makes its summary call (model `small`) through the chain below it: meter, retry and the model call; tracing and judge outside it do not see it; a failing one reaches the model up to 3 times (retry 3 attempts)",
	}, consequences)
}

// TestOwnCallRerouted pins the note on a fallback that sends a judge's call
// to other models.
func TestOwnCallRerouted(t *testing.T) {
	consequences := chatConsequences(t, `package p
models: {
	primary: {}
	backup: {}
	reviewer: {}
}
chains: chat: [
	{use: "judge", model: "reviewer"},
	{use: "fallback", models: ["primary", "backup"]},
]
`)
	assert.Contains(t, consequences,
		"judge makes its verdict call (model `reviewer`) through the chain below it: fallback and the model call; fallback sends it to its models instead of `reviewer`; a failing one reaches the model up to 2 times (fallback 2 models)")
}

// TestOwnCallWhen pins that the count of a summary's model calls reads the
// whens below the compaction as the runtime does, for the summary's model:
// a hedge whose when is false for it never re-invokes it, and one whose
// when the call decides may (resilience/compaction-summary-hedge-when).
func TestOwnCallWhen(t *testing.T) {
	consequences := chatConsequences(t, `package p
models: {
	primary: {}
	backup: {}
	small: {}
}
chains: chat: [
	{use: "compaction", strategy: "summarize", model: "small", max_tokens: 64, keep_recent: 2},
	{use: "hedge", models: ["primary", "backup"], delay: "10s", when: "request.model == 'primary'"},
	{use: "retry", max_attempts: 3, when: "request.model == 'small' && size(request.messages) > 2"},
]
`)
	assert.Contains(t, consequences,
		"compaction makes its summary call (model `small`) through the chain below it: hedge, retry and the model call; the when of hedge skips it; a failing one may reach the model up to 3 times (retry 3 attempts), as the when of retry decides")
}

// TestOwnCallWhenAfterReroute: a fallback below a compaction sends the
// summary call to its own models, and the layers below it read their whens
// for those: a retry scoped to request.model == 'primary' re-invokes the
// summary call the fallback sends to primary (a run makes 4 calls: primary
// 3 times, then backup). Explain read the whens for the summary's model,
// small, and said the retry skips it (2 calls).
func TestOwnCallWhenAfterReroute(t *testing.T) {
	consequences := chatConsequences(t, `package p
models: {
	primary: {}
	backup: {}
	small: {}
}
chains: chat: [
	{use: "compaction", strategy: "summarize", model: "small", max_tokens: 64, keep_recent: 2},
	{use: "fallback", models: ["primary", "backup"]},
	{use: "retry", max_attempts: 3, when: "request.model == 'primary'"},
	{use: "log", when: "request.model == 'small'"},
	{use: "meter", when: "request.model == 'backup' && size(request.messages) > 2"},
]
`)
	assert.Contains(t, consequences,
		"compaction makes its summary call (model `small`) through the chain below it: fallback, retry, log, meter and the model call; fallback sends it to its models instead of `small`; the when of log skips it; a failing one reaches the model up to 6 times (fallback 2 models × retry 3 attempts)")
}

// chatConsequences explains the policy src, whose one chain is the chat
// chain, and returns that chain's consequences.
func chatConsequences(t *testing.T, src string) []string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	x := build(t, dir)
	require.Len(t, x.Stages, 1)
	return x.Stages[0].Consequences
}

// TestOwnCallPassesOutputCoerce pins that the path of an own call says an
// output_coerce below the layer lets it through: its output is the layer's
// (a verdict, a summary), not the answer the schema describes.
func TestOwnCallPassesOutputCoerce(t *testing.T) {
	consequences := chatConsequences(t, `package p
models: {
	primary: {}
	reviewer: {}
}
chains: chat: [
	{use: "judge", model: "reviewer"},
	{use: "retry", max_attempts: 2},
	{use: "output_coerce", schema: {type: "object"}},
]
`)
	assert.Contains(t, consequences,
		"judge makes its verdict call (model `reviewer`) through the chain below it: retry, output_coerce and the model call; output_coerce lets it through unchecked, its output being the layer's; a failing one reaches the model up to 2 times (retry 2 attempts)")
}
