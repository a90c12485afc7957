package serve

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentc-dev/agentc/builtins/ratelimit"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// tokenCounter is a model client that counts the input tokens of a request
// through its provider, without generating (providers/anthropic.Client).
type tokenCounter interface {
	CountTokens(ctx context.Context, req *runtime.ChatRequest) (int64, error)
}

// The X-Agentc-Token-Count response header of count_tokens says where the
// count comes from: the model's provider, or the gateway's estimate.
const (
	tokenCountHeader   = "X-Agentc-Token-Count"
	tokenCountProvider = "provider"
	tokenCountEstimate = "estimate"
)

// countTokens answers POST /v1/messages/count_tokens: {"input_tokens": N}
// for a Messages request body, decoded and checked as /v1/messages decodes
// and checks it (the carried fields, the model, the offered tools).
//
// Counting sends the conversation to the provider without running the chat
// chain, so it does so only when no layer of the chain could have refused
// or rewritten the request (countChecks): a model whose client counts
// (tokenCounter) is then asked. Otherwise, and for a model whose client
// does not count, the answer is the runtime's estimate of the request
// (runtime.EstimateRequest) and nothing leaves the gateway. The header
// X-Agentc-Token-Count tells which.
func (s *Server) countTokens(x *exchange) {
	var p chatParams
	if !s.readChat(x, &p, decodeAnthropic, anthropicHeaders) || !s.admitRequest(x, &p) {
		return
	}
	source, n := tokenCountEstimate, runtime.EstimateRequest(&p.req)
	if counter := x.g.counter(p.req.Model); counter != nil && len(countChecks(x.g.pl)) == 0 {
		served := &servedSlot{idHeader: anthropicChat.requestIDHeader}
		ctx := runtime.WithUpstreamRequestID(x.r.Context(), served)
		if err := takeCountRate(ctx, x); err != nil {
			s.observeRefusal(plan.StageChat, err)
			x.failErr(err)
			return
		}
		var err error
		if n, err = counter.CountTokens(ctx, &p.req); err != nil {
			x.failErr(err)
			return
		}
		served.setHeader(x.Header())
		source = tokenCountProvider
	}
	x.Header().Set(tokenCountHeader, source)
	x.writeJSON(http.StatusOK, struct {
		InputTokens int64 `json:"input_tokens"`
	}{n})
}

// admitRequest resolves the model a decoded chat request names (setting
// it to the policy's name) and checks the tools it offers, as the chat and
// count routes do before anything is called. On a refusal it has answered
// (404 unknown_model, 403 blocked) and returns false.
func (s *Server) admitRequest(x *exchange, p *chatParams) bool {
	name, ok := x.g.resolveModel(p.req.Model)
	if !ok {
		// x.model stays unset: a metric label takes only declared names.
		x.err = fmt.Errorf("model %q is not declared by the policy (GET /v1/models lists the models)", p.req.Model)
		x.fail(http.StatusNotFound, errUnknownModel, x.err.Error())
		return false
	}
	p.req.Model, x.model = name, name
	if err := unreadDocuments(x.g.pl, p); err != nil {
		x.err = err
		x.fail(http.StatusBadRequest, errBadRequest, err.Error())
		return false
	}
	// A tool the request offers must be one the policy lets run: the
	// model would propose calls to it that could only be refused.
	for _, t := range p.req.Tools {
		if err := x.g.pl.CheckToolDeclared(t.Name); err != nil {
			s.observeRefusal(plan.StageTool, err)
			x.failErr(fmt.Errorf("tools: the request offers %s: %w", t.Name, err))
			return false
		}
		if err := x.g.customDeclared(&t); err != nil {
			x.err = err
			x.fail(http.StatusBadRequest, errBadRequest, err.Error())
			return false
		}
	}
	return true
}

// counter returns the client of the model name when it counts tokens
// through its provider, else nil.
func (g *generation) counter(name string) tokenCounter {
	c := g.deps.Models[name]
	if sm, ok := c.(*servedModel); ok {
		c = sm.client
	}
	tc, _ := c.(tokenCounter)
	return tc
}

// countChecks returns the layers of pl's chat chain that could refuse or
// rewrite a request before the model reads it (runtime's ContentLayers):
// counting through the provider would send it a request none of them has
// seen.
func countChecks(pl *runtime.Pipeline) []string { return pl.ContentLayers(plan.StageChat) }

// takeCountRate takes, for a count the provider answers (an upstream
// request on the gateway's key), a token of each rate_limit layer of the
// chat chain that bounds a tenant's or every caller's calls (scope key or
// global) whatever they ask (no when): the count shares the bucket of the
// chat calls it bounds, and is refused (or waits) as a chat call would be.
// A layer with a when, whose condition reads a chat call, and one of scope
// run (a count belongs to no run) take none.
func takeCountRate(ctx context.Context, x *exchange) error {
	chain := x.g.plan.Chains.Of(plan.StageChat)
	run := runtime.Run{Agent: "serve", Tenant: x.caller.tenant}
	for _, l := range x.g.pl.Layers(plan.StageChat) {
		if l.Use != ratelimit.ID {
			continue
		}
		rl, ok := l.Middleware.(*ratelimit.RateLimit)
		if !ok {
			// Not the builtin's shape: its bucket cannot be taken, and
			// the count must not pass it untaken.
			return fmt.Errorf("rate limit layer %q is a %T, whose bucket a token count cannot take", l.Name, l.Middleware)
		}
		if rl.Scope == "run" || l.Index >= len(chain) || chain[l.Index].When != nil {
			continue
		}
		if err := rl.Take(ctx, run); err != nil {
			return err
		}
	}
	return nil
}
