package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// maskDecls declares send_email, which a client offers and runs, and a
// tool chain of rest.
func maskDecls(rest string) string {
	return `tools: send_email: args: {type: "object", properties: {to: type: "string", body: type: "string"}}
chains: tool: [` + rest + `]`
}

// proposedEverywhere has the model propose a call of send_email with args
// to a client of each route, streamed and not, and returns what each got:
// the arguments of the call relayed, or the error (a refusal's status
// and body, or the stream's error event).
func proposedEverywhere(t *testing.T, chat, tools, args string, opts ...func(*Options)) (map[string]string, *gateway) {
	t.Helper()
	// The text before the call ends its line, which the layers reading
	// the output by lines release at once: a stream has begun when the
	// call is refused.
	line := func(sse string) string { return strings.Replace(sse, `"Let me check."`, `"Let me check.\n"`, 1) }
	oa, an := make([]reply, 4), make([]reply, 2)
	for i := range oa {
		oa[i] = reply{body: line(oaToolCallSSE("send_email", args))}
	}
	for i := range an {
		an[i] = reply{body: line(anToolUseSSE("send_email", args))}
	}
	g := newGatewayWith(t, maskDecls(tools), chat, oa, an, opts...)
	ctx := context.Background()
	got := map[string]string{}
	refused := func(route string, err error) { got[route] = refusal(err) }

	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("write to John")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("send_email")}}
	if c, err := g.openai(t).Chat.Completions.New(ctx, params); err != nil {
		refused("chat", err)
	} else {
		require.Len(t, c.Choices[0].Message.ToolCalls, 1)
		got["chat"] = c.Choices[0].Message.ToolCalls[0].Function.Arguments
	}
	stream := g.openai(t).Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		refused("chat stream", err)
		for _, c := range acc.Choices {
			assert.Empty(t, c.Message.ToolCalls, "no fragment of a refused call is sent")
		}
	} else {
		require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
		got["chat stream"] = acc.Choices[0].Message.ToolCalls[0].Function.Arguments
	}

	rs := responses.ResponseNewParams{Model: "primary", Input: rsText("write to John"),
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "send_email",
			Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}}}
	callOf := func(items []responses.ResponseOutputItemUnion) string {
		for _, it := range items {
			if it.Type == "function_call" {
				return it.Arguments.OfString
			}
		}
		return "no call"
	}
	if r, err := g.openai(t).Responses.New(ctx, rs); err != nil {
		refused("responses", err)
	} else {
		got["responses"] = callOf(r.Output)
	}
	racc, types, err := rsStream(t, g.openai(t).Responses.NewStreaming(ctx, rs))
	if err != nil {
		refused("responses stream", err)
		for _, ty := range types {
			assert.NotContains(t, ty, "function_call", "no event of a refused call is sent")
		}
	} else {
		got["responses stream"] = "no call"
		for _, it := range racc.Snapshot().Output {
			if it.Type == "function_call" {
				got["responses stream"] = it.Arguments
			}
		}
	}

	an_ := anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("write to John"))},
		Tools:    []anthropic.ToolUnionParam{anProposalTool("send_email")}}
	if m, err := g.anthropic(t).Messages.New(ctx, an_); err != nil {
		refused("messages", err)
	} else {
		got["messages"] = toolInput(m.Content)
	}
	msg, err := anStreamProposal(t, g, "backup", "send_email")
	if err != nil {
		refused("messages stream", err)
		assert.Equal(t, "no call", toolInput(msg.Content), "no tool_use block of a refused call is sent")
	} else {
		got["messages stream"] = toolInput(msg.Content)
	}
	return got, g
}

// TestProposedCallIsNeverRelayedMasked: a chat-chain layer that masks the
// model's output (pii with action redact, redact) rewrote the arguments
// of the call the model proposed, and the gateway admitted and relayed
// the rewritten call: the tool chain's pii check read
// {"to": "[REDACTED:email]"} and let it through, and the client ran
// send_email to a masked address. The tool chain now reads the call as
// the model proposed it, and a call a chat-chain layer masks is refused
// by that layer, on every route, streamed or not; a call it leaves alone
// is relayed as the model made it.
func TestProposedCallIsNeverRelayedMasked(t *testing.T) {
	const (
		email   = `{"to":"john.doe@example.com","body":"hi"}`
		secret  = `{"to":"ops","body":"the key is AKIAIOSFODNN7EXAMPLE"}`
		clean   = `{"to":"ops","body":"hi"}`
		maskPII = `{use: "pii", name: "mask_pii", action: "redact", kinds: ["email"]},`
		redact  = `{use: "redact"},`
	)
	for _, tc := range []struct {
		name, chat, tools, args string
		// layer refuses the call; "" relays it as the model made it.
		layer string
	}{
		{"tool chain reads the call as proposed", maskPII, `{use: "pii", name: "no_pii_calls", kinds: ["email"]}`, email, "no_pii_calls"},
		{"chat pii redact", maskPII, ``, email, "mask_pii"},
		{"chat redact", redact, ``, secret, "redact"},
		{"the layer that masks it, inner", maskPII + redact, ``, secret, "redact"},
		{"the layer that masks it, outer", maskPII + redact, ``, email, "mask_pii"},
		{"clean call", maskPII + redact, `{use: "pii", name: "no_pii_calls", kinds: ["email"]}`, clean, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, g := proposedEverywhere(t, tc.chat, tc.tools, tc.args)
			require.Len(t, got, 6)
			if tc.layer != "" {
				stage := "chat"
				if tc.tools != "" {
					stage = "tool"
				}
				assert.Contains(t, g.metrics(t), `agentc_serve_blocks_total{layer="`+tc.layer+`",stage="`+stage+`"} 6`)
			}
			for route, out := range got {
				if tc.layer == "" {
					assert.JSONEq(t, tc.args, out, "%s: relayed as the model made it", route)
					continue
				}
				assert.NotContains(t, out, "REDACTED", route)
				assert.NotContains(t, out, "john.doe", route)
				assert.NotContains(t, out, "AKIA", route)
				assert.Contains(t, out, "blocked by "+tc.layer+":", route)
				if !strings.HasSuffix(route, "stream") {
					assert.True(t, strings.HasPrefix(out, "Forbidden "), "%s: %s", route, out)
				}
			}
		})
	}
}

// rewriteCalls is a host's chat middleware that rewrites the arguments of
// the calls the model makes; calls counts the calls it handles.
type rewriteCalls struct{ calls atomic.Int64 }

func (r *rewriteCalls) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		r.calls.Add(1)
		return runtime.HoldToolCalls(ctx, c, next, yield, func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
			for i := range calls {
				calls[i].Arguments = json.RawMessage(`{"to":"ops","body":"rewritten"}`)
			}
			return calls, nil
		})
	}
}

var hostRewrite = &rewriteCalls{}

func init() {
	runtime.Register(runtime.Module{ID: "serve_test_rewrite_calls", Stages: []plan.Stage{plan.StageChat},
		Doc: "test layer rewriting the model's tool calls", New: func() runtime.Middleware { return hostRewrite }})
}

// TestProposedCallRewrittenByAHostsLayer: a call a host's chat middleware
// rewrote is refused by that layer, which is not run outside the chain to
// find it.
func TestProposedCallRewrittenByAHostsLayer(t *testing.T) {
	withLayer := func(o *Options) {
		src := o.Source
		o.Source = SourceFunc(func(ctx context.Context) (*Loaded, error) {
			ld, err := src.Load(ctx)
			if err == nil {
				ld.Plan.Chains.Chat = append(ld.Plan.Chains.Chat, plan.Layer{Use: "serve_test_rewrite_calls", Name: "host_rewrite"})
			}
			return ld, err
		})
	}
	before := hostRewrite.calls.Load()
	got, _ := proposedEverywhere(t, `{use: "redact"},`, ``, `{"to":"ops","body":"hi"}`, withLayer)
	require.Len(t, got, 6)
	for route, out := range got {
		assert.Contains(t, out, "blocked by host_rewrite:", route)
		assert.NotContains(t, out, "rewritten", route)
	}
	assert.Equal(t, int64(6), hostRewrite.calls.Load()-before, "the layer ran once for each request")
}

// TestReplayedMaskedCallIsRefused: a cache in front of a masking layer
// recorded the call as the layer released it (or, behind it, replays the
// call through it), and a second request got the masked call, which no
// model call of that request made, relayed. And a model that read the
// user's address masked wrote the placeholder itself: that call, live,
// was relayed, and the client ran send_email to "[REDACTED:email]". Every
// call whose arguments hold a mask's placeholder is refused while a
// masking layer is in the chat chain, live or replayed, on every route,
// streamed or not, by the masking layer (layer tools when the chain has
// several); a clean call, live or replayed, is relayed.
func TestReplayedMaskedCallIsRefused(t *testing.T) {
	const (
		maskPII = `{use: "pii", name: "mask_pii", action: "redact", kinds: ["email"]},`
		redact  = `{use: "redact"},`
		memo    = `{use: "memoize", ttl: "1h", scope: "global"},`
		email   = `{"to":"john.doe@example.com","body":"hi"}`
		masked  = `{"to":"[REDACTED:email]","body":"hi"}`
		clean   = `{"to":"ops","body":"hi"}`
	)
	for _, tc := range []struct {
		name, chain, args string
		// first and second name the layer that refuses the call of the
		// first request (the model's) and of the second (the cache's,
		// or the model's again); "" relays it.
		first, second string
		// placeholder: the refusal is of a placeholder in the call.
		placeholder bool
	}{
		{"cache outside", memo + maskPII, email, "mask_pii", "mask_pii", false},
		{"cache inside", maskPII + memo, email, "mask_pii", "mask_pii", false},
		{"clean call", memo + maskPII, clean, "", "", false},
		{"model writes the placeholder", memo + maskPII, masked, "mask_pii", "mask_pii", true},
		{"model writes the placeholder, no cache", maskPII, masked, "mask_pii", "mask_pii", true},
		{"model writes the placeholder, two masking layers", memo + maskPII + redact, masked, "tools", "tools", true},
		{"placeholder without a masking layer", memo, masked, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				body := oaToolCallSSE("send_email", tc.args)
				g := newGatewayWith(t, maskDecls(""), tc.chain, []reply{{body: body}, {body: body}},
					[]reply{{body: anToolUseSSE("send_email", tc.args)}, {body: anToolUseSSE("send_email", tc.args)}})
				for i, layer := range []string{tc.first, tc.second} {
					for _, route := range []string{"chat", "messages"} {
						out, err := proposeOnce(t, g, route, stream)
						if layer == "" {
							require.NoError(t, err, "%s request %d", route, i)
							assert.JSONEq(t, tc.args, out, "%s request %d", route, i)
							continue
						}
						require.Error(t, err, "%s stream=%v request %d", route, stream, i)
						msg := refusal(err)
						assert.Contains(t, msg, "blocked by "+layer+":", "%s stream=%v request %d", route, stream, i)
						if tc.placeholder {
							assert.Contains(t, msg, "placeholder", "%s request %d", route, i)
							assert.Contains(t, msg, "the model or a cache wrote it", "%s request %d", route, i)
						}
						if !stream {
							assert.True(t, strings.HasPrefix(msg, "Forbidden "), "%s request %d: %s", route, i, msg)
						}
					}
				}
				if tc.chain != maskPII {
					assert.Equal(t, 1, g.oa.requests(), "the second answer is the cache's")
				}
			}
		})
	}
}

// proposeOnce asks g for a call of send_email through route ("chat": the
// OpenAI chat completions API, "messages": Anthropic's), streamed or not,
// and returns the arguments of the call relayed, or the error.
func proposeOnce(t *testing.T, g *gateway, route string, stream bool) (string, error) {
	t.Helper()
	ctx := context.Background()
	if route == "messages" {
		if stream {
			msg, err := anStreamProposal(t, g, "backup", "send_email")
			return toolInput(msg.Content), err
		}
		m, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("write to John"))},
			Tools:    []anthropic.ToolUnionParam{anProposalTool("send_email")}})
		if err != nil {
			return "", err
		}
		return toolInput(m.Content), nil
	}
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("write to John")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("send_email")}}
	if !stream {
		c, err := g.openai(t).Chat.Completions.New(ctx, params)
		if err != nil {
			return "", err
		}
		return c.Choices[0].Message.ToolCalls[0].Function.Arguments, nil
	}
	s := g.openai(t).Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	return acc.Choices[0].Message.ToolCalls[0].Function.Arguments, nil
}

// refusal returns a refusal's status and body, or the stream's error
// event.
func refusal(err error) string {
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case errors.As(err, &oe):
		return http.StatusText(oe.StatusCode) + " " + oe.RawJSON()
	case errors.As(err, &ae):
		return http.StatusText(ae.StatusCode) + " " + ae.RawJSON()
	default:
		return "error " + err.Error()
	}
}

// toolInput returns the input of the first tool_use block of content.
func toolInput(content []anthropic.ContentBlockUnion) string {
	for _, b := range content {
		if b.Type == "tool_use" {
			return string(b.Input)
		}
	}
	return "no call"
}

// alterCalls is a host's chat middleware that changes each call the model
// makes with alter.
type alterCalls struct{ alter func(*runtime.ToolUse) }

func (a *alterCalls) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		return runtime.HoldToolCalls(ctx, c, next, yield, func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
			for i := range calls {
				a.alter(&calls[i])
			}
			return calls, nil
		})
	}
}

func init() {
	for id, alter := range map[string]func(*runtime.ToolUse){
		"serve_test_swap_call_ids": func(tc *runtime.ToolUse) { tc.ID = "call_" + tc.ID },
		"serve_test_mask_and_swap": func(tc *runtime.ToolUse) {
			tc.ID = "call_" + tc.ID
			tc.Arguments = json.RawMessage(`{"to":"***","body":"hi"}`)
		},
	} {
		mw := &alterCalls{alter: alter}
		runtime.Register(runtime.Module{ID: id, Stages: []plan.Stage{plan.StageChat},
			Doc: "test layer altering the model's tool calls", New: func() runtime.Middleware { return mw }})
	}
}

// TestProposedCallGivenAnotherIDByAHostsLayer: a host's chat middleware
// that gave a call the model made another id (and masked its arguments
// without a placeholder) had the call admitted as the layer released it
// and relayed: the gateway matched the calls the model made by id, found
// none, and took the call for a cache's answer. The tool chain read the
// masked arguments, not the model's. A call no call the model made has
// the id of, while the model made calls none released has, is now read
// by the tool chain as the model made it and refused by the layer.
func TestProposedCallGivenAnotherIDByAHostsLayer(t *testing.T) {
	const email = `{"to":"john.doe@example.com","body":"hi"}`
	for _, tc := range []struct{ use, tools, layer string }{
		{"serve_test_swap_call_ids", ``, "host_alter"},
		{"serve_test_mask_and_swap", ``, "host_alter"},
		{"serve_test_mask_and_swap", `{use: "pii", name: "no_pii_calls", kinds: ["email"]}`, "no_pii_calls"},
	} {
		t.Run(tc.use+" "+tc.layer, func(t *testing.T) {
			withLayer := func(o *Options) {
				src := o.Source
				o.Source = SourceFunc(func(ctx context.Context) (*Loaded, error) {
					ld, err := src.Load(ctx)
					if err == nil {
						ld.Plan.Chains.Chat = append(ld.Plan.Chains.Chat, plan.Layer{Use: tc.use, Name: "host_alter"})
					}
					return ld, err
				})
			}
			got, _ := proposedEverywhere(t, ``, tc.tools, email, withLayer)
			require.Len(t, got, 6)
			for route, out := range got {
				assert.Contains(t, out, "blocked by "+tc.layer+":", route)
				assert.NotContains(t, out, "***", route)
				if !strings.HasSuffix(route, "stream") {
					assert.True(t, strings.HasPrefix(out, "Forbidden "), "%s: %s", route, out)
				}
			}
		})
	}
}

// TestRefusalNamesTheChainOfASameNamedLayer: a pii layer named "pii" in
// the chat chain and another in the tool chain refused a proposed call as
// "blocked by pii:", which did not tell which of them did. The 403 now
// names the chain and the layer's place in it when the name is not the
// layer's alone; not its position in the policy's files, which are the
// operator's and not the client's to read.
func TestRefusalNamesTheChainOfASameNamedLayer(t *testing.T) {
	const email = `{"to":"john.doe@example.com","body":"hi"}`
	for _, tc := range []struct{ chat, tools, want string }{
		{`{use: "pii", action: "redact", kinds: ["email"]},`, `{use: "pii", kinds: ["email"]}`, `blocked by pii (chains.tool[0]): `},
		{`{use: "pii", action: "redact", kinds: ["email"]},`, `{use: "pii", kinds: ["phone"]}`, `blocked by pii (chains.chat[0]): `},
	} {
		got, _ := proposedEverywhere(t, tc.chat, tc.tools, email)
		require.Len(t, got, 6)
		for route, out := range got {
			assert.Contains(t, out, tc.want, route)
			assert.NotContains(t, out, "policy.cue", route)
		}
	}
	// A name one layer has alone is not annotated.
	got, _ := proposedEverywhere(t, `{use: "pii", action: "redact", kinds: ["email"]},`, ``, email)
	for route, out := range got {
		assert.Contains(t, out, "blocked by pii:", route)
	}
}
