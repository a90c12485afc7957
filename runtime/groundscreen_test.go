package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// screen is a chat layer that flags a grounding item whose text holds
// "POISON", and records the texts it was asked about.
type screen struct {
	Drop bool `json:"drop"`

	mu   sync.Mutex
	read []string
}

func (s *screen) WrapChat(next runtime.ChatHandler) runtime.ChatHandler { return next }

func (s *screen) ScreenGrounding(_ context.Context, text string) (string, bool) {
	s.mu.Lock()
	s.read = append(s.read, text)
	s.mu.Unlock()
	if strings.Contains(text, "POISON") {
		return "poison found", s.Drop
	}
	return "", false
}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.screen", Stages: []plan.Stage{plan.StageChat},
		ConfigSchema: "drop?: bool", New: func() runtime.Middleware { return &screen{} },
	})
}

// TestGroundingScreenDropsBeforeTheBudget: a screening layer reads each
// admitted item rendered alone, over an empty query (not the user's text);
// an item it drops leaves room in the budget for the next best.
func TestGroundingScreenDropsBeforeTheBudget(t *testing.T) {
	block := "Q=refunds?\n<doc>refunds take 5 days</doc>\n" // b's, which fits the budget exactly
	p := groundPlan(&plan.Grounding{Render: &plan.GroundingRender{Template: "Q={{.Query}}\n{{range .Items}}<doc>{{.Content}}</doc>\n{{end}}",
		MaxTokens: int(runtime.EstimateTokens(block))}})
	p.Chains.Chat = []plan.Layer{rt.Named("scr", rt.Layer("test.screen", `{"drop":true}`))}
	pl := rt.Build(t, p, runtime.Deps{})
	items := []runtime.Item{
		{ID: "a", Content: "POISON refunds", Score: 0.9},
		{ID: "b", Content: "refunds take 5 days", Score: 0.8},
		{ID: "c", Content: "guessed", Score: 0.7, Metadata: map[string]any{"tier": "inferred"}},
		{ID: "d", Content: "orders ship in 2 days", Score: 0.6},
	}
	g, err := pl.Ground(context.Background(), "refunds?", items)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, ids(g.Prompt), "the flagged item takes no room in the budget")
	assert.Equal(t, []string{"a"}, ids(g.Flagged))
	assert.Equal(t, []string{"scr: poison found"}, g.FlaggedWhy)
	assert.Equal(t, []string{"c"}, ids(g.Refused), "a refused item is not screened")
	assert.Equal(t, []string{"d"}, ids(g.Dropped))
	assert.Equal(t, block, g.Block)
	scr := pl.Layers(plan.StageChat)[0].Middleware.(*screen)
	assert.Equal(t, []string{"Q=\n<doc>POISON refunds</doc>\n", "Q=\n<doc>refunds take 5 days</doc>\n", "Q=\n<doc>orders ship in 2 days</doc>\n"}, scr.read)
}

// TestGroundingScreenReadsAnItemThatDoesNotRenderAlone: an item the
// template cannot render alone is still read (its id, source, content and
// metadata), never let through unread.
func TestGroundingScreenReadsAnItemThatDoesNotRenderAlone(t *testing.T) {
	p := groundPlan(&plan.Grounding{Render: &plan.GroundingRender{Template: "{{(index .Items 1).Content}}"}})
	p.Chains.Chat = []plan.Layer{rt.Named("scr", rt.Layer("test.screen", ""))}
	pl := rt.Build(t, p, runtime.Deps{})
	_, err := pl.Ground(context.Background(), "q", []runtime.Item{{Content: "fine"}, {ID: strings.Repeat("x", 100), Source: "web", Content: "POISON"}})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "scr", b.Layer)
	assert.Equal(t, `grounding item "`+strings.Repeat("x", 64)+`..." (source "web"): poison found`, b.Message, "a long id is cut")
}

func ids(items []runtime.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// TestRegroundDropsTheKeptBlocks: after Reground, the next model call of a
// run, and of a turn with reground_every_turn, retrieves again: an item
// revoked at the source leaves the runs that carried it.
func TestRegroundDropsTheKeptBlocks(t *testing.T) {
	for _, everyTurn := range []bool{false, true} {
		ret := &retriever{sets: [][]runtime.Item{kb[:1], kb[3:4]}}
		model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
		pl := rt.Build(t, groundPlan(&plan.Grounding{Render: &plan.GroundingRender{Template: "{{range .Items}}{{.Content}}{{end}}"}, EveryTurn: everyTurn}),
			runtime.Deps{Models: map[string]runtime.ModelClient{"m": model}, Retriever: ret})
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
		_, err := pl.Turn(ctx, runtime.TurnRequest{Input: "refunds?"}, func(ctx context.Context) (string, error) {
			for i := range 3 {
				if i == 2 {
					pl.Reground() // the first item is withdrawn from the index
				}
				if _, err := pl.Complete(ctx, runtime.ChatRequest{Model: "m", Messages: []runtime.Message{{Role: "user", Content: "x"}}}); err != nil {
					return "", err
				}
			}
			return "", nil
		})
		require.NoError(t, err)
		var blocks []string
		for _, req := range model.Requests() {
			blocks = append(blocks, req.Messages[0].Content)
		}
		assert.Equal(t, []string{"refunds take 5 days", "refunds take 5 days", "orders ship in 2 days"}, blocks, "every turn: %v", everyTurn)
		assert.Len(t, ret.queries, 2)
	}
}
