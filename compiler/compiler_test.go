package compiler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func writePolicy(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(src), 0o644))
	return dir
}

func TestStageTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Stages {
		assert.NotEmpty(t, s.Doc, s.Name)
		assert.False(t, seen[s.Name], "duplicate stage %s", s.Name)
		seen[s.Name] = true
	}
	assert.Equal(t, "load-policy", Stages[0].Name)
	assert.Equal(t, "lower", Stages[len(Stages)-1].Name)
}

func TestCompileLowersPlan(t *testing.T) {
	dir := writePolicy(t, `package p

models: m: {usd_per_mtok_in: 1}
tools: refund: {side_effecting: true, retry_safe: true, args: {type: "object", required: ["amount"], properties: amount: type: "number"}}
chains: tool: [
	{use: "guard", name: "limit", tools: ["refund"], deny: "args.amount > 10.0", phase: "before"},
	{use: "retry", when: "tool.name == 'refund'"},
]
admit: "item.score > 0.5"
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Empty(t, c.Diagnostics)
	require.NotNil(t, c.Plan)
	assert.Equal(t, []string{"load-policy", "validate-configs", "compile-cel", "check-order", "lower"}, c.Stages)
	b, err := plan.Encode(c.Plan)
	require.NoError(t, err)
	back, err := plan.Decode("mem", b)
	require.NoError(t, err, "a compiled plan validates against the plan schema")
	require.Len(t, back.Chains.Tool, 2)
	g := back.Chains.Tool[0]
	assert.Equal(t, "limit", g.Name)
	require.Contains(t, g.Predicates, "deny")
	assert.Equal(t, []string{"refund"}, g.Predicates["deny"].Tools)
	assert.Equal(t, "before", g.Predicates["deny"].Phase)
	require.NotNil(t, back.Chains.Tool[1].When)
	assert.Equal(t, "tool.name == 'refund'", back.Chains.Tool[1].When.Source)
	assert.JSONEq(t, `{"initial_delay":"100ms","max_attempts":3,"max_delay":"10s","multiplier":2}`, string(back.Chains.Tool[1].Config))
	require.NotNil(t, back.Admit)
	assert.Equal(t, "admit", back.Admit.Stage)
}

func TestCompileStopsAtFirstFailingStage(t *testing.T) {
	dir := writePolicy(t, `package p
chains: chat: [{use: "retry", max_attempts: 99, when: "request.modle == 'x'"}]
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	assert.Nil(t, c.Plan)
	assert.Equal(t, []string{"load-policy"}, c.Stages, "the stages after a schema error do not run")
	require.Len(t, c.Diagnostics, 1, "the when of an entry with an error is not checked")
	assert.Equal(t, "schema/invalid-value", c.Diagnostics[0].Rule)

	_, err = Compile(context.Background(), []string{dir}, Options{StopAfter: "nope"})
	assert.ErrorContains(t, err, "unknown compiler stage")
}

type sentiment struct {
	Threshold float64 `json:"threshold"`
}

func (s *sentiment) Validate() error {
	if s.Threshold == 0.42 {
		return errors.New("threshold 0.42 is reserved")
	}
	if s.Threshold == 0.43 {
		return errors.New("threshold: 0.43 is reserved")
	}
	return nil
}

func (*sentiment) WrapChat(next runtime.ChatHandler) runtime.ChatHandler { return next }

func TestCustomMiddlewareIsVetted(t *testing.T) {
	runtime.Register(runtime.Module{
		ID: "test_sentiment", Stages: []plan.Stage{plan.StageChat}, Doc: "test middleware",
		ConfigSchema: `threshold: *0.5 | number & >0 & <=1`,
		New:          func() runtime.Middleware { return &sentiment{} },
	})
	ok := writePolicy(t, "package p\nchains: chat: [{use: \"test_sentiment\", threshold: 0.9}]\n")
	c, err := Compile(context.Background(), []string{ok}, Options{})
	require.NoError(t, err)
	require.Empty(t, c.Diagnostics)
	assert.JSONEq(t, `{"threshold":0.9}`, string(c.Plan.Chains.Chat[0].Config))

	bad := writePolicy(t, "package p\nchains: chat: [{use: \"test_sentiment\", threshold: 2}]\n")
	c, err = Compile(context.Background(), []string{bad}, Options{})
	require.NoError(t, err)
	require.Len(t, c.Diagnostics, 1)
	assert.Equal(t, "schema/invalid-value", c.Diagnostics[0].Rule)

	// The module's own Validate runs at vet time, placed at the field.
	refused := writePolicy(t, "package p\nchains: chat: [{use: \"test_sentiment\", threshold: 0.42}]\n")
	c, err = Compile(context.Background(), []string{refused}, Options{})
	require.NoError(t, err)
	require.Len(t, c.Diagnostics, 1)
	assert.Equal(t, "schema/invalid-value", c.Diagnostics[0].Rule)
	assert.Equal(t, "chains.chat[0].threshold: 0.42 is reserved", c.Diagnostics[0].Message)
	assert.Equal(t, 2, c.Diagnostics[0].Pos.Line)
	assert.Equal(t, 51, c.Diagnostics[0].Pos.Col)

	// A message that starts with the field's path continues the entry's,
	// as the schema's own messages do.
	refused = writePolicy(t, "package p\nchains: chat: [{use: \"log\"}, {use: \"test_sentiment\", threshold: 0.43}]\n")
	c, err = Compile(context.Background(), []string{refused}, Options{})
	require.NoError(t, err)
	require.Len(t, c.Diagnostics, 1)
	assert.Equal(t, "chains.chat[1].threshold: 0.43 is reserved", c.Diagnostics[0].Message)
	assert.Equal(t, 65, c.Diagnostics[0].Pos.Col)
}

func BenchmarkCompileExample(b *testing.B) {
	paths := []string{filepath.Join("..", "examples", "support")}
	for i := 0; i < b.N; i++ {
		c, err := Compile(context.Background(), paths, Options{})
		if err != nil || c.Plan == nil {
			b.Fatal(err, c.Diagnostics)
		}
	}
}

func TestCustomMiddlewareConstraints(t *testing.T) {
	runtime.Register(runtime.Module{
		ID: "test_scorer", Stages: []plan.Stage{plan.StageChat}, Doc: "test middleware",
		Constraints: []runtime.Constraint{{ID: "scorer-inside-pii", Outer: "pii", Inner: "test_scorer",
			Why: "the scorer must never see raw PII"}},
		New: func() runtime.Middleware { return &sentiment{} },
	})
	bad := writePolicy(t, "package p\nchains: chat: [{use: \"test_scorer\"}, {use: \"pii\"}]\n")
	c, err := Compile(context.Background(), []string{bad}, Options{})
	require.NoError(t, err)
	var rules []string
	for _, d := range c.Diagnostics {
		rules = append(rules, d.Rule)
	}
	assert.Contains(t, rules, "order/scorer-inside-pii")

	ok := writePolicy(t, "package p\nchains: chat: [{use: \"pii\"}, {use: \"test_scorer\"}]\n")
	c, err = Compile(context.Background(), []string{ok}, Options{})
	require.NoError(t, err)
	assert.Empty(t, c.Diagnostics)
}

func TestIdentOffset(t *testing.T) {
	tests := []struct {
		src  string
		want int
	}{
		{"args.x == 1", 0},
		{"tool.name == 'margs' && args.x == 1", 24},
		{`"args" == tool.name || args.y`, 23},
		{"xargs.y == 1 || args.z", 16},
		{"item.args == 1", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, identOffset(tt.src, "args"), tt.src)
	}
}

// A guard's predicates are lowered as vet checked them: with the policy's
// cel_cost_limit, and with what the entry's when proves present, so that
// the runtime builds the plan of a policy vet accepted (agentc_test.go
// runs it).
func TestGuardPredicateLoweredAsChecked(t *testing.T) {
	dir := writePolicy(t, `package p

settings: cel_cost_limit: 100000000
tools: note: {args: {type: "object", required: ["text"], properties: {text: {type: "string", maxLength: 50000000}, tag: type: "string"}}}
chains: tool: [
	{use: "guard", name: "big", tools: ["note"], deny: "args.text.contains('DROP TABLE')"},
	{use: "guard", name: "tagged", tools: ["note"], when: "has(args.tag)", deny: "args.tag == 'x'"},
]
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Empty(t, c.Diagnostics, "a read of args.tag where when tests it present needs no test of its own")
	require.NotNil(t, c.Plan)
	b, err := plan.Encode(c.Plan)
	require.NoError(t, err)
	back, err := plan.Decode("mem", b)
	require.NoError(t, err, "the plan validates against the plan schema")
	assert.Equal(t, uint64(100000000), back.Chains.Tool[0].Predicates["deny"].CostLimit)
	assert.Equal(t, []string{"args.tag"}, back.Chains.Tool[1].Predicates["deny"].Given)

}
