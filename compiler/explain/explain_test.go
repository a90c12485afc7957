package explain_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/explain"
	"github.com/agentc-dev/agentc/dsl"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var formats = map[string]string{"text": ".txt", "dot": ".dot", "mermaid": ".mmd"}

func build(t *testing.T, dir string) *explain.Explanation {
	t.Helper()
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	p, diags, err := dsl.Load(context.Background(), []string{dir}, dsl.Options{Schema: schema})
	require.NoError(t, err)
	require.False(t, diags.HasErrors(), "%v", diags)
	return explain.Build(p, schema.Constraints())
}

// TestGolden renders the support example and a policy with violations in
// every format and compares with testdata/<name>.<ext>; -update rewrites
// them.
func TestGolden(t *testing.T) {
	cases := map[string]string{
		"support":    filepath.Join("..", "..", "examples", "support"),
		"violations": filepath.Join("testdata", "violations"),
		"stores":     filepath.Join("testdata", "stores"),
	}
	for name, dir := range cases {
		x := build(t, dir)
		for format, ext := range formats {
			t.Run(name+"/"+format, func(t *testing.T) {
				var b bytes.Buffer
				require.NoError(t, explain.Write(&b, x, format))
				golden := filepath.Join("testdata", name+ext)
				if *update {
					require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err, "run with -update to create it")
				assert.Equal(t, string(want), b.String())
			})
		}
	}
}

func TestSupportConsequences(t *testing.T) {
	x := build(t, filepath.Join("..", "..", "examples", "support"))
	require.Len(t, x.Stages, 3)
	chat, tool := x.Stages[0], x.Stages[1]
	assert.Equal(t, "chat", chat.Name)
	require.Len(t, chat.Layers, 7)
	assert.Equal(t, "tracing", chat.Layers[0].Ref)
	assert.Contains(t, chat.Consequences, "a failing call reaches the model up to 6 times (fallback 2 models × retry 3 attempts)")

	var meter *explain.Layer
	for _, l := range chat.Layers {
		if l.Use == "meter" {
			meter = l
		}
	}
	require.NotNil(t, meter)
	require.NotEmpty(t, meter.Held)
	assert.Equal(t, "order/compaction-before-meter", meter.Held[0].Rule)
	assert.False(t, meter.Held[0].Outside)
	assert.Equal(t, "compaction", meter.Held[0].Other)
	assert.False(t, meter.Held[0].Violated)

	joined := strings.Join(tool.Consequences, "\n")
	assert.Contains(t, joined, "a replay in idempotent skips audit, retry and the tool call")
	assert.Contains(t, joined, "audit writes one record per logical tool call")
}

func TestViolationsAreShown(t *testing.T) {
	x := build(t, filepath.Join("testdata", "violations"))
	chat, tool := x.Stages[0], x.Stages[1]
	assert.Contains(t, chat.Consequences, "a failing call reaches the model up to 12 times (outer (retry) 2 attempts × fallback 2 models × inner (retry) 3 attempts)")
	assert.True(t, chat.Layers[1].Held[0].Violated, "tracing is not first")
	assert.True(t, chat.Layers[0].Held[0].Violated, "meter is outside compaction")

	joined := strings.Join(tool.Consequences, "\n")
	assert.Contains(t, joined, "audit writes one record per attempt: up to 3 for one logical tool call")
	assert.Contains(t, joined, "`send_email` is side-effecting and not retry_safe: a failed call of it runs again only when the failure proves it did not act")
	assert.NotContains(t, joined, "repeat its effect", "the retry does not run a call that may have acted again")
	assert.Contains(t, joined, "a hit in memoize skips no_bulk (guard) and the tool call")

	var b bytes.Buffer
	require.NoError(t, x.Dot(&b))
	assert.Contains(t, b.String(), "color=red")
	b.Reset()
	require.NoError(t, x.Mermaid(&b))
	assert.Contains(t, b.String(), "linkStyle")
}

func TestUnknownFormat(t *testing.T) {
	err := explain.Write(&bytes.Buffer{}, &explain.Explanation{}, "svg")
	assert.ErrorContains(t, err, `unknown format "svg"`)
}

func TestEmptyPolicy(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, (&explain.Explanation{Policy: "p"}).Text(&b))
	assert.Contains(t, b.String(), "no chains")
}

func TestNoReinvokers(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p
tools: {
	search: {}
	drop: {side_effecting: true}
}
chains: tool: [{use: "tool_policy", deny: ["drop"]}, {use: "audit"}]
`), 0o644))
	x := build(t, dir)
	require.Len(t, x.Stages, 1)
	assert.Equal(t, []string{
		"each call of `search` runs once: no layer re-invokes it",
		"`drop` is refused by tool_policy before any call runs",
		"audit writes one record per logical tool call",
	}, x.Stages[0].Consequences)
}

func TestManyRetriesSaturate(t *testing.T) {
	var b strings.Builder
	b.WriteString("package p\nchains: chat: [\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "\t{use: \"retry\", name: \"r%d\", max_attempts: 3},\n", i)
	}
	b.WriteString("]\n")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(b.String()), 0o644))
	x := build(t, dir)
	chat := x.Stages[0]
	require.Equal(t, "chat", chat.Name)
	require.NotEmpty(t, chat.Consequences)
	assert.Equal(t, "a failing call reaches the model up to more than 1,000,000 times (r0 (retry) 3 attempts × r1 (retry) 3 attempts × r2 (retry) 3 attempts × … (50 layers))", chat.Consequences[0])
}

// TestSettingsAReviewerNeeds checks that explain shows the settings that
// change what a layer does to a call (an idempotency key on chosen
// arguments, a budget refused before it is crossed, the internal networks
// egress lets a tool reach, a checkpoint before tools run) and calls a
// checkpoint layer's state by its name.
func TestSettingsAReviewerNeeds(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p

models: m: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}
models: b: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}
stores: runs: {kind: "sqlite", path: "runs.db"}
tools: {
	refund: {side_effecting: true, args: {type: "object", properties: order_id: type: "string"}}
	fetch: {url_arg: "url"}
}
chains: {
	chat: [
		{use: "meter", budget: usd: 5, on_cross: "refuse"},
		{use: "hedge", models: ["m", "b"], delay: "2s", win: "first_success"},
	]
	tool: [
		{use: "egress", allow: ["svc.internal.example"], allow_private: ["10.20.0.0/16"], tools: ["fetch"]},
		{use: "idempotent", key_args: ["order_id"], tools: ["refund"]},
	]
	turn: [{use: "checkpoint", store: "runs", after_tool: true, keep: 3}]
}
`), 0o644))
	x := build(t, dir)
	require.Len(t, x.Stages, 3)
	chat, tool, turn := x.Stages[0], x.Stages[1], x.Stages[2]
	assert.Contains(t, chat.Layers[0].Settings, "on_cross: refuse")
	assert.Equal(t, []string{"models: m, b", "delay: 2s", "win: first_success"}, chat.Layers[1].Settings)
	assert.Contains(t, tool.Layers[0].Settings, "allow_private: 10.20.0.0/16")
	assert.Contains(t, tool.Layers[1].Settings, "key_args: order_id")
	assert.Equal(t, []string{"after_tool: true", "keep: 3"}, turn.Layers[0].Settings)
	assert.Equal(t, []string{`state: checkpoints in store "runs" (sqlite file runs.db): shared by the processes on this host, each host has its own`}, turn.Layers[0].State)
}

// TestStateLocations checks that each stateful layer names where its state
// lives, that a URL written in the policy loses its credentials, and that
// a layer without state says nothing.
func TestStateLocations(t *testing.T) {
	x := build(t, filepath.Join("testdata", "stores"))
	require.Len(t, x.Stages, 3)
	chat, tool, turn := x.Stages[0], x.Stages[1], x.Stages[2]
	assert.Equal(t, []string{`state: budget ledger in store "shared" (redis, url_env REDIS_URL, prefix billing): shared by every replica`}, chat.Layers[0].State)
	assert.Equal(t, []string{`state: cache in store "local" (sqlite file cache.db): shared by the processes on this host, each host has its own`}, chat.Layers[2].State)
	// The user names who the store is to the database; the password and
	// the query go.
	assert.Equal(t, []string{`state: audit trail in store "trail" (postgres, url postgres://agentc@db.internal:5432/agentc): shared by every replica`}, tool.Layers[0].State)
	assert.Equal(t, []string{`state: idempotency table in store "shared" (redis, url_env REDIS_URL, prefix billing): shared by every replica`}, tool.Layers[1].State)
	assert.Equal(t, []string{"state: cache in the default store, process memory: each replica has its own"}, tool.Layers[2].State)
	assert.Equal(t, []string{"state: rate limit in process memory: each replica has its own"}, turn.Layers[0].State)

	for _, format := range explain.Formats {
		var b bytes.Buffer
		require.NoError(t, explain.Write(&b, x, format))
		assert.NotContains(t, b.String(), "secret", format)
		assert.Contains(t, b.String(), "shared by every replica", format)
	}

	support := build(t, filepath.Join("..", "..", "examples", "support"))
	assert.Empty(t, support.Stages[0].Layers[0].State, "tracing keeps no state")
}

// TestSettingsThatDecideWhatIsBlocked checks that explain shows what a
// guard refuses: tool_policy's argument patterns, the kinds pii detects
// (all, when kinds is unset), whether egress reads every argument for
// URLs, content_filter's keywords and patterns, and security's own
// patterns, whether its defaults are on and its threshold. A pattern is
// written between backquotes, so a space at its end shows. In the chat
// stage, whether pii, content_filter and security read the system messages
// (system, set or the default) is shown too; in the other stages, which
// have no transcript, it is not.
func TestSettingsThatDecideWhatIsBlocked(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p

models: m: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}
tools: {
	run_cmd: {args: {type: "object", properties: {cmd: {type: "string", maxLength: 100}, opts: {type: "object"}}}}
	fetch: {url_arg: "url"}
}
chains: {
	chat: [
		{use: "security", defaults: false, patterns: ["reveal the (system )?prompt"]},
		{use: "content_filter", keywords: ["drop table", "c++"], patterns: ["(?i)acme-\\d{4}"], system: false},
		{use: "pii", name: "pii_chat"},
	]
	tool: [
		{use: "egress", allow: ["api.example.com"], scan_args: false},
		{use: "tool_policy", arg_patterns: [{arg: "cmd", pattern: "^rm "}, {arg: "opts", pattern: "^/etc/"}]},
		{use: "pii", kinds: ["email", "ssn", "card", "iban"]},
	]
}
`), 0o644))
	x := build(t, dir)
	require.Len(t, x.Stages, 2)
	chat, tool := x.Stages[0], x.Stages[1]
	assert.Equal(t, []string{"patterns: `reveal the (system )?prompt`", "defaults: false", "threshold: 1", "system: false", "on_error: closed"}, chat.Layers[0].Settings)
	assert.Equal(t, []string{"keywords: drop table, c++", "patterns: `(?i)acme-\\d{4}`", "system: false", "on_error: closed"}, chat.Layers[1].Settings)
	assert.Equal(t, []string{"action: block", "kinds: all", "system: true", "on_error: closed"}, chat.Layers[2].Settings)
	assert.Equal(t, []string{"allow: api.example.com", "scan_args: false"}, tool.Layers[0].Settings)
	assert.Equal(t, []string{"arg_patterns: cmd `^rm `, opts `^/etc/`"}, tool.Layers[1].Settings)
	assert.Equal(t, []string{"action: block", "kinds: email, ssn, card, iban", "on_error: closed"}, tool.Layers[2].Settings)
}

// TestSettingsThatWriteTextInClear shows include_args and include_errors of
// audit and log, which decide whether a trail or a log holds arguments and
// error text in clear, when they are on, and leaves them out when off.
func TestSettingsThatWriteTextInClear(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p

stores: trail: {kind: "sqlite", path: "audit.db"}
chains: tool: [
	{use: "log", include_args: true, include_errors: true},
	{use: "audit", sink: "trail", include_errors: true},
	{use: "log", name: "quiet"},
]
`), 0o644))
	x := build(t, dir)
	require.Len(t, x.Stages, 1)
	layers := x.Stages[0].Layers
	require.Len(t, layers, 3)
	assert.Equal(t, []string{"include_args: true", "include_errors: true"}, layers[0].Settings)
	assert.Equal(t, []string{"trail: logical", "sink: trail", "include_errors: true"}, layers[1].Settings)
	assert.Empty(t, layers[2].Settings)
}
