package memoize

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/chatcache"
	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "memoize"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitCaches, runtime.TraitShortCircuits, runtime.TraitSideEffectSensitive},
		Doc:     "exact-match cache on stage, model or tool, canonical input and scope; never for side-effecting tools",
		New:     New,
	})
}

// New returns a memoize layer with the schema's defaults (ttl 10m, scope
// run).
func New() runtime.Middleware {
	return &Memoize{TTL: runtime.Duration(10 * time.Minute), Scope: "run"}
}

// Memoize is the memoize middleware; its exported fields are its config
// (schemas/memoize.cue).
type Memoize struct {
	TTL   runtime.Duration `json:"ttl"`
	Scope string           `json:"scope"`
	Store string           `json:"store,omitempty"`
	// SingleFlight runs one of several identical concurrent misses, in
	// every process that shares the store, and lets the others share its
	// result.
	SingleFlight bool `json:"single_flight,omitempty"`
	// LeaseTTL bounds a single-flight leader's claim (DefaultLease when
	// zero).
	LeaseTTL runtime.Duration `json:"lease_ttl,omitempty"`

	name   string
	kv     runtime.KV
	logger *slog.Logger
	// digester hashes the keys: keyed with settings.digest_key_env.
	digester runtime.Digester
	warned   sync.Map // tool name -> struct{}: refusals already logged
	// readOnly are the tools whose calls a chat answer may hold to be
	// stored and replayed (chatcache.ReadOnlyTools); random draws the ids
	// of the calls a hit replays.
	readOnly map[string]bool
	random   runtime.Random

	// With SingleFlight: the store's lease port, the calls in flight in
	// this process, and the bounds of the wait between reads of a claim
	// held elsewhere.
	leaser           runtime.Leaser
	flights          lease.Group
	clock            runtime.Clock
	pollMin, pollMax time.Duration
}

// DefaultLease is the lease_ttl of a single-flight leader's claim when the
// config sets none.
const DefaultLease = 30 * time.Second

// Provision resolves the store.
func (m *Memoize) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.logger = b.Logger
	m.digester = b.Digester()
	m.readOnly, m.random = chatcache.ReadOnlyTools(b.Plan), b.Random()
	kv, err := b.KV(m.Store)
	if err != nil {
		return err
	}
	m.kv = kv
	if m.SingleFlight {
		if m.LeaseTTL <= 0 {
			m.LeaseTTL = runtime.Duration(DefaultLease)
		}
		if m.leaser, err = b.Leaser(m.Store); err != nil {
			return err
		}
		m.clock = b.Clock()
		m.pollMin, m.pollMax = 2*time.Millisecond, 200*time.Millisecond
	}
	return nil
}

// Validate checks the scope and the ttl (a store keeps an entry written
// with a ttl of zero for good).
func (m *Memoize) Validate() error {
	if m.Scope != "run" && m.Scope != "key" && m.Scope != "global" {
		return fmt.Errorf(`scope must be "run", "key" or "global", got %q`, m.Scope)
	}
	if m.TTL <= 0 {
		return errors.New("ttl must be positive")
	}
	return nil
}

// Cacheable reports whether a cache may serve calls of tool: only a tool the
// plan declares and marks neither side-effecting nor secret_result (a
// cache would hold the secret outside the run and serve it to other runs).
func Cacheable(tool *runtime.ToolInfo) bool {
	return tool != nil && tool.Declared && !tool.SideEffecting && !tool.SecretResult
}

// key hashes the parts of a cache key, with an HMAC under the digest key
// when the pipeline has one (settings.digest_key_env): a reader of a shared
// store cannot test a guessed request against it. Scope "run" keys on the
// run's tenant and id, "key" on its tenant alone, "global" on neither.
func (m *Memoize) key(stage string, run runtime.Run, target string, input []byte) string {
	h := m.digester.New()
	for _, s := range []string{stage, m.name, m.Scope, scopeOf(m.Scope, run), target} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(input)
	if m.SingleFlight { // lease records, not plain values
		return "agentc/memoize/flight/" + hex.EncodeToString(h.Sum(nil))
	}
	return "agentc/memoize/" + hex.EncodeToString(h.Sum(nil))
}

// StateKeys implements runtime.StateKeyer: the entry of a sample call.
func (m *Memoize) StateKeys(at runtime.StateSite) []runtime.StateKey {
	m.name = at.Name()
	return []runtime.StateKey{{Store: runtime.StoreName(m.Store), Key: m.key(string(at.Stage), at.Run(), "sample-target", []byte("sample-input")), Digests: runtime.DigestsKeyed,
		What: "cached entries", Then: "every call misses until the cache fills again, and the old entries stay until their ttl"}}
}

func (m *Memoize) get(ctx context.Context, key string) ([]byte, bool) {
	b, ok, err := m.kv.Get(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.WarnContext(ctx, "memoize store read failed; treating as a miss", "error", err)
		}
		return nil, false
	}
	return b, ok
}

func (m *Memoize) set(ctx context.Context, key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		m.logger.DebugContext(ctx, "memoize: result does not encode as JSON; not cached", "error", err)
		return
	}
	if err := m.kv.Set(context.WithoutCancel(ctx), key, b, m.TTL.D()); err != nil {
		m.logger.WarnContext(ctx, "memoize store write failed; result not cached", "error", err)
	}
}

// DecodeEntry decodes a cached chat answer. A value that is not an answer a
// layer recorded (one without its deltas: garbage, or another program's
// value written over the key) is an error, never an answer to replay.
func DecodeEntry(b []byte) (*chatcache.Entry, error) {
	var e chatcache.Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	if e.Deltas == nil { // every recorded entry has them, if empty
		return nil, errors.New(`not a cached answer (no "deltas")`)
	}
	return &e, nil
}

// entry decodes the cached chat answer b; one that does not decode is
// logged and treated as a miss (nil), and so is one that calls a tool the
// policy does not declare read-only (keeps).
func (m *Memoize) entry(ctx context.Context, b []byte) *chatcache.Entry {
	e, err := DecodeEntry(b)
	if err != nil {
		m.corrupt(ctx, err)
		return nil
	}
	if !m.keeps(e) {
		return nil
	}
	return e
}

// keeps reports whether the chat answer e may be stored and replayed: each
// of its tool calls is a call of a tool the policy declares and does not
// mark side_effecting. A hit makes the caller run the calls the answer
// holds: a payment would be made again, or another run's made in this one.
func (m *Memoize) keeps(e *chatcache.Entry) bool {
	return e.CallsOnly(m.readOnly)
}

// value decodes the cached tool result b; one that does not decode is
// logged and treated as a miss.
func (m *Memoize) value(ctx context.Context, b []byte) (any, bool) {
	var v any
	if err := jsonnum.Decode(b, &v); err != nil {
		m.corrupt(ctx, err)
		return nil, false
	}
	return v, true
}

// corrupt logs a cached entry that does not decode.
func (m *Memoize) corrupt(ctx context.Context, err error) {
	m.logger.WarnContext(ctx, "memoize: a cached entry does not decode; treating it as a miss", "error", err)
}

// WrapChat implements runtime.ChatWrapper.
func (m *Memoize) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		input, err := ChatKeyInput(&c.Request)
		if err != nil {
			return next(ctx, c, yield)
		}
		key := m.key(plan.StageChat, c.Meta.Run, c.Request.Model, input)
		if m.SingleFlight {
			return m.chatFlight(ctx, c, key, next, yield)
		}
		if b, ok := m.get(ctx, key); ok {
			if e := m.entry(ctx, b); e != nil {
				chatcache.Replay(c, e, m.random, yield)
				return nil
			}
		}
		e, err := chatcache.Record(ctx, c, next, yield)
		if e == nil || !m.keeps(e) {
			return err
		}
		m.set(ctx, key, e)
		return nil
	}
}

// ChatKeyInput returns the canonical input a chat call is keyed on: the
// request as JSON (model, messages, max_tokens, tools, tool_choice,
// sampling parameters, stop sequences, response format, parallel tool
// calls, betas, thinking, reasoning effort), without the caller's metadata
// and end-user id (safety_identifier) and its prompt-cache breakpoints and
// key, which do not change the output. Two requests with equal inputs ask
// the model the same thing and constrain its answer the same way. The ids
// of the conversation's tool calls are read as the places of their calls
// (placedCallIDs): a call's id is the provider's, or one a replay drew
// (chatcache.FreshCalls), and says nothing of what is asked.
func ChatKeyInput(req *runtime.ChatRequest) ([]byte, error) {
	keyed := withoutBreakpoints(req)
	keyed.Metadata, keyed.SafetyIdentifier, keyed.PromptCacheKey = nil, "", ""
	keyed.Messages = placedCallIDs(keyed.Messages)
	return json.Marshal(&keyed)
}

// placedCallIDs returns msgs (not modified) with each tool call id, in the
// calls and in the results answering them, replaced by its rank among the
// ids in the order they first appear ("1", "2"...): which result answers
// which call is kept, the ids' text is not. A turn after a replayed
// answer, whose calls got ids of their own, is keyed as the turn after the
// recorded one, so that a run repeating another hits turn after turn.
func placedCallIDs(msgs []runtime.Message) []runtime.Message {
	var out []runtime.Message
	ranks := map[string]string{}
	rank := func(id string) string {
		if id == "" {
			return ""
		}
		r, ok := ranks[id]
		if !ok {
			r = strconv.Itoa(len(ranks) + 1)
			ranks[id] = r
		}
		return r
	}
	for i := range msgs {
		m := &msgs[i]
		ids := m.ToolCallID != "" || len(m.ToolCalls) > 0 || slices.ContainsFunc(m.Parts, func(p runtime.ContentPart) bool { return p.ToolCallID != "" })
		if !ids {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		c := &out[i]
		c.ToolCallID = rank(m.ToolCallID)
		if len(m.Parts) > 0 {
			c.Parts = slices.Clone(m.Parts)
			for k := range c.Parts {
				c.Parts[k].ToolCallID = rank(c.Parts[k].ToolCallID)
			}
		}
		if len(m.ToolCalls) > 0 {
			c.ToolCalls = slices.Clone(m.ToolCalls)
			for k := range c.ToolCalls {
				c.ToolCalls[k].ID = rank(c.ToolCalls[k].ID)
			}
		}
	}
	if out == nil {
		return msgs
	}
	return out
}

// withoutBreakpoints returns a shallow copy of req without its prompt-cache
// breakpoints (runtime.CacheControl): a cost hint, which a client may move
// from one call to the next without changing what the model answers. A
// message whose text blocks were kept apart only to hold a breakpoint gets
// its text as one, as without it. The messages and tools are copied only
// when one holds a breakpoint.
func withoutBreakpoints(req *runtime.ChatRequest) runtime.ChatRequest {
	out := *req
	out.CacheControl = nil
	for i := range req.Messages {
		if hasBreakpoint(&req.Messages[i]) {
			out.Messages = slices.Clone(req.Messages)
			for j := i; j < len(out.Messages); j++ {
				m := &out.Messages[j]
				if !hasBreakpoint(m) {
					continue
				}
				m.Parts = slices.Clone(m.Parts)
				text := m.Content == ""
				for k := range m.Parts {
					m.Parts[k].CacheControl = nil
					text = text && m.Parts[k].Type == runtime.PartText && !m.Parts[k].Document
				}
				if text && len(m.Parts) > 0 && !m.Interleaved() {
					// Text blocks a breakpoint kept apart are the
					// message's text without it (unless a tool call
					// sits between them: then they stay apart; nor a
					// text document, which a Claude model reads as one).
					m.Content, m.Parts = m.Text(), nil
				}
				m.ToolCalls = slices.Clone(m.ToolCalls)
				for k := range m.ToolCalls {
					m.ToolCalls[k].CacheControl = nil
				}
			}
			break
		}
	}
	for i := range req.Tools {
		if req.Tools[i].CacheControl != nil {
			out.Tools = slices.Clone(req.Tools)
			for j := range out.Tools {
				out.Tools[j].CacheControl = nil
			}
			break
		}
	}
	return out
}

func hasBreakpoint(m *runtime.Message) bool {
	for i := range m.Parts {
		if m.Parts[i].CacheControl != nil {
			return true
		}
	}
	for i := range m.ToolCalls {
		if m.ToolCalls[i].CacheControl != nil {
			return true
		}
	}
	return false
}

// WrapTool implements runtime.ToolWrapper.
func (m *Memoize) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if !Cacheable(c.Tool) {
			m.refuse(ctx, c)
			return next(ctx, c)
		}
		digest, err := c.ArgsDigestErr()
		if err != nil { // no canonical form: the call bypasses the cache
			return next(ctx, c)
		}
		key := m.key(plan.StageTool, c.Meta.Run, c.Name, []byte(digest))
		if m.SingleFlight {
			return m.toolFlight(ctx, c, key, next)
		}
		if b, ok := m.get(ctx, key); ok {
			if v, ok := m.value(ctx, b); ok {
				c.Meta.Cached = true
				return v, nil
			}
		}
		v, err := next(ctx, c)
		if err == nil {
			m.set(ctx, key, v)
		}
		return v, err
	}
}

// refuse logs, once per tool, that the layer passes a tool through.
func (m *Memoize) refuse(ctx context.Context, c *runtime.ToolCall) {
	if _, seen := m.warned.LoadOrStore(c.Name, struct{}{}); seen {
		return
	}
	reason := "is side-effecting"
	switch {
	case c.Tool == nil || !c.Tool.Declared:
		reason = "is not declared in the policy (its effects are unknown)"
	case c.Tool.SecretResult:
		reason = "is secret_result (its results are secret)"
	}
	m.logger.WarnContext(ctx, "memoize does not cache this tool: it "+reason, "tool", c.Name)
}

var (
	_ runtime.ChatWrapper = (*Memoize)(nil)
	_ runtime.ToolWrapper = (*Memoize)(nil)
)

// scopeOf returns the part of a cache key that scope draws from run: the
// tenant and the run id for "run", the tenant for "key", nothing for
// "global". Each is quoted, so no tenant or run id can pass for another pair.
func scopeOf(scope string, run runtime.Run) string {
	switch scope {
	case "global":
		return ""
	case "key":
		return strconv.Quote(run.Tenant)
	}
	return strconv.Quote(run.Tenant) + strconv.Quote(run.ID)
}
