package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// autoApprove is a custom middleware with a bug for the prove scripts: when
// an inner layer blocks a tool call, it marks the call approved and makes it
// again, so the tool runs after all.
type autoApprove struct{}

func (*autoApprove) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if runtime.Classify(err) != runtime.ClassBlocked {
			return v, err
		}
		args := maps.Clone(c.Args)
		args["approved"] = true
		c.Args = args
		return next(ctx, c)
	}
}

func init() {
	runtime.Register(runtime.Module{
		ID:     "clitest.auto_approve",
		Stages: []plan.Stage{plan.StageTool},
		Doc:    "approves a blocked tool call and makes it again (a bug prove must find)",
		New:    func() runtime.Middleware { return &autoApprove{} },
	})
}

// proveBoundPolicies writes a clean policy and one whose retry sits
// outside a logical audit (a violation at k=2) into a temporary directory.
func proveBoundPolicies(t *testing.T) string {
	dir := t.TempDir()
	tool := `tools: refund: {side_effecting: true, retry_safe: true, args: {type: "object", required: ["order_id"], properties: order_id: type: "string"}}` + "\n"
	for name, chain := range map[string]string{
		"clean": `chains: tool: [{use: "audit", trail: "logical"}, {use: "retry", max_attempts: 3, initial_delay: "10ms"}]`,
		"bad":   `chains: tool: [{use: "retry", max_attempts: 3, initial_delay: "10ms"}, {use: "audit", trail: "logical"}]`,
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "p.cue"), []byte("package p\n\n"+tool+chain+"\n"), 0o644))
	}
	return dir
}

// TestProveBound: an exploration a bound stops proves nothing: it says how
// far it went, is not clean in -json, and exits 3, apart from a violation
// (1) and a clean proof (0).
func TestProveBound(t *testing.T) {
	dir := proveBoundPolicies(t)
	run := func(args ...string) (int, string) {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), append([]string{"prove", "-o", t.TempDir()}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	code, out := run("-k", "3", "-maxstates", "20", filepath.Join(dir, "clean"))
	assert.Equal(t, exitNotProven, code, out)
	assert.Regexp(t, `: 3 targets, 20 states .*: not proven: bound reached \(-maxstates 20\) after 20 states; clean up to k=1 \(every script up to that length ran on all 3 targets\), 0 of 3 targets explored to k=3\n`, out)
	assert.NotContains(t, out, "proved clean")

	code, out = run("-k", "3", "-timeout", "1ns", "-json", filepath.Join(dir, "clean"))
	assert.Equal(t, exitNotProven, code, out)
	assert.Contains(t, out, `"clean": false`)
	assert.Contains(t, out, `"complete": false`)
	assert.Contains(t, out, `"bound": "timeout"`)
	assert.Contains(t, out, `"proved_k": 0`)

	// A violation found before the bound is a violation.
	code, out = run("-k", "3", "-maxstates", "30", filepath.Join(dir, "bad"))
	assert.Equal(t, exitProblems, code, out)
	assert.Contains(t, out, "violated audit_complete")
	assert.Contains(t, out, "; exploration stopped: bound reached (-maxstates 30)")

	// A bound the exploration does not reach changes nothing.
	code, out = run("-k", "2", "-maxstates", "100000", "-timeout", "1h", filepath.Join(dir, "clean"))
	assert.Equal(t, exitOK, code, out)
	assert.Contains(t, out, "proved clean at k=2")

	code, out = run("-maxstates", "-1", filepath.Join(dir, "clean"))
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, out, "-maxstates -1: want 0 (no bound) or more")
}

// TestRebasePlan: the plan prove writes beside its counterexamples names the
// policy's relative files from its own directory; absolute paths stay, and
// the plan it was made from is left as it was.
func TestRebasePlan(t *testing.T) {
	p := &plan.Plan{
		Chains: plan.Chains{Tool: []plan.Layer{
			{Use: "log"},
			{Use: "file_check", Config: []byte(`{"must_exist":true,"roots":["./data","/srv/data"]}`)},
		}},
		Stores: map[string]plan.Store{"db": {Kind: "sqlite", Path: "state/db.sqlite"}, "mem": {Kind: "memory"}},
	}
	q, err := rebasePlan(p, "policies/refunds", "out")
	require.NoError(t, err)
	assert.JSONEq(t, `{"must_exist":true,"roots":["../policies/refunds/data","/srv/data"]}`, string(q.Chains.Tool[1].Config))
	assert.Equal(t, "../policies/refunds/state/db.sqlite", q.Stores["db"].Path)
	assert.Empty(t, q.Stores["mem"].Path)
	assert.Equal(t, `{"must_exist":true,"roots":["./data","/srv/data"]}`, string(p.Chains.Tool[1].Config))
	assert.Equal(t, "state/db.sqlite", p.Stores["db"].Path)
}

// TestProveGoesOnAfterAPolicyThatDoesNotBuild: a policy whose layer does not
// build on this machine (a file_check root that is not there) is reported
// at the layer's place in the policy, the same way in every run, and the
// policies after it are explored; prove exits 1, as for a policy that does
// not compile.
func TestProveGoesOnAfterAPolicyThatDoesNotBuild(t *testing.T) {
	dir := proveBoundPolicies(t)
	missing := filepath.Join(t.TempDir(), "srv", "data")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a_srv"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a_srv", "p.cue"), []byte(`package p

models: m: {usd_per_mtok_in: 1}
tools: read: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [
	{use: "log"},
	{use: "file_check", roots: ["`+missing+`"]},
]
`), 0o644))
	t.Chdir(dir)
	var first string
	for range 3 {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), []string{"prove", "-k", "1", "-o", t.TempDir(), "./..."}, &stdout, &stderr)
		assert.Equal(t, exitProblems, code, stdout.String()+stderr.String())
		assert.Contains(t, stderr.String(), `a_srv/p.cue:7:2: build chains.tool[1] "file_check": provision: file_check: root "`+missing+`": lstat `)
		assert.Contains(t, stderr.String(), "agentc: a_srv does not build: nothing to prove\n")
		assert.Regexp(t, `(?m)^bad: .*counterexample at k=1`, stdout.String(), "the policy after it is explored")
		assert.Regexp(t, `(?m)^clean: .*proved clean at k=1`, stdout.String())
		if first == "" {
			first = stderr.String()
		}
		assert.Equal(t, first, stderr.String(), "the same report every time")
	}
}

// TestProveNotExplored: a policy whose every generated call of a tool is
// refused before any layer is not proved clean: each such tool is named
// with why, the verdict says it, -json lists it and is not clean, and prove
// exits 1.
func TestProveNotExplored(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(`package p

tools: refund: {args: {type: "object", required: ["order_id"], properties: order_id: {type: "string", pattern: "\\bA1", maxLength: 1}}}
chains: tool: [{use: "audit"}]
`), 0o644))
	var stdout, stderr strings.Builder
	code := Main(context.Background(), []string{"prove", "-k", "2", "-o", t.TempDir(), dir}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	assert.Equal(t, exitProblems, code, out)
	assert.Contains(t, out, "tool refund: not explored: every generated call was refused before any layer (the arguments of refund do not match its args schema: args.order_id:")
	assert.Contains(t, out, "not proved: no explored call reached tool refund (see above); no invariant violated at k=2\n")
	assert.NotContains(t, out, "proved clean")

	stdout.Reset()
	code = Main(context.Background(), []string{"prove", "-k", "1", "-json", "-o", t.TempDir(), dir}, &stdout, &stderr)
	assert.Equal(t, exitProblems, code, stdout.String())
	assert.Contains(t, stdout.String(), `"clean": false`)
	assert.Contains(t, stdout.String(), `"target": "tool refund"`)
}

// TestProveNamesAnInvariantAsVetNamesItsFile: a custom invariant's
// violation named the policy's file as the command was given it, absolute
// for an absolute path, where vet names it from the working directory.
func TestProveNamesAnInvariantAsVetNamesItsFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "pol"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pol", "policy.cue"), []byte(`package p

tools: pay: {side_effecting: true, args: {type: "object", properties: id: {type: "string", maxLength: 8}}}
invariants: custom: never: "executions.tools.pay <= 0"
`), 0o644))
	t.Chdir(dir)
	for _, path := range []string{"pol", filepath.Join(dir, "pol")} {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), []string{"prove", "-k", "1", "-o", t.TempDir(), path}, &stdout, &stderr)
		assert.Equal(t, exitProblems, code, stdout.String()+stderr.String())
		assert.Contains(t, stdout.String(), "violated never: "+filepath.Join("pol", "policy.cue")+":4:", path)
	}
}
