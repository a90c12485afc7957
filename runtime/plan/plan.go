// Package plan defines the compiled form of a policy: plain data that the
// compiler writes (agentc build) and the runtime loads (runtime.Build). A plan
// is JSON; schemas/plan.schema.json describes it and Load validates a plan
// against it before decoding.
//
// The package imports no CUE code: a service can ship a plan.json and link
// only the runtime.
package plan

import (
	"encoding/json"
	"fmt"
	"time"
)

// Version is the plan format version this package reads and writes.
const Version = 1

// Stage names a chain.
type Stage = string

// The stages of a plan.
const (
	StageChat  Stage = "chat"
	StageTool  Stage = "tool"
	StageTurn  Stage = "turn"
	StageAdmit Stage = "admit"
)

// Stages lists the chain stages in order.
var Stages = []Stage{StageChat, StageTool, StageTurn}

// Plan is a compiled policy.
type Plan struct {
	// Version is the plan format version (Version).
	Version int `json:"version"`
	// Policy is the CUE package name of the policy.
	Policy string `json:"policy"`
	// Models are the declared models with their prices.
	Models map[string]Model `json:"models,omitempty"`
	// Tools are the declared tools with their effects and argument schemas.
	Tools map[string]Tool `json:"tools,omitempty"`
	// Chains holds the layers per stage, outermost first.
	Chains Chains `json:"chains"`
	// Admit is the grounding admission predicate, if any.
	Admit *Predicate `json:"admit,omitempty"`
	// Grounding renders, records and re-retrieves the admitted items (nil:
	// no grounding section).
	Grounding *Grounding `json:"grounding,omitempty"`
	// Stores are the named state backends.
	Stores map[string]Store `json:"stores,omitempty"`
	// Keys are the virtual API keys a server admits, by name.
	Keys map[string]Key `json:"keys,omitempty"`
	// MCPServers are the upstream MCP servers a server fronts, by name.
	MCPServers map[string]MCPServer `json:"mcp_servers,omitempty"`
	// Invariants are the properties agentc prove checks (nil: the built-in
	// defaults).
	Invariants *Invariants `json:"invariants,omitempty"`
	// Settings are the policy's settings that the runtime enforces.
	Settings Settings `json:"settings,omitzero"`
	// State declares the run's typed state fields and their handlers (nil:
	// none).
	State *State `json:"state,omitempty"`
}

// StageState is the stage of the state handlers' predicates.
const StageState Stage = "state"

// State is the state section of a policy: the run's typed fields.
type State struct {
	// Fields are the state fields by name.
	Fields map[string]StateField `json:"fields"`
	// Queue bounds the background handlers' queue (0: DefaultStateQueue).
	Queue int `json:"queue,omitempty"`
}

// DefaultStateQueue is the capacity of the background handlers' queue when
// the policy sets none.
const DefaultStateQueue = 1024

// StateField is one state field.
type StateField struct {
	// Schema is the JSON Schema of the field's value (absent: any JSON).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Secret marks a value that must never be persisted in clear.
	Secret bool `json:"secret,omitempty"`
	// OnSet and OnAppend run, in order, on a set and on an append.
	OnSet    []StateHandler `json:"on_set,omitempty"`
	OnAppend []StateHandler `json:"on_append,omitempty"`
	// Background are the sinks told of every operation, asynchronously.
	Background []StateSink `json:"background,omitempty"`
	// Pos is the field's position in the policy ("file:line:col").
	Pos string `json:"pos,omitempty"`
}

// StateHandler is one handler of a field: exactly one of Deny (a veto),
// Redact, Truncate and Set (transforms).
type StateHandler struct {
	// Deny vetoes the operation when true; Message says why.
	Deny    *Predicate `json:"deny,omitempty"`
	Message string     `json:"message,omitempty"`
	// Redact replaces the matches of its patterns in the value's strings.
	Redact *StateRedact `json:"redact,omitempty"`
	// Truncate bounds strings to this many characters and lists to this
	// many elements.
	Truncate int `json:"truncate,omitempty"`
	// Set replaces the value with the expression's result.
	Set *Predicate `json:"set,omitempty"`
	// Pos is the handler's position in the policy.
	Pos string `json:"pos,omitempty"`
}

// StateRedact is a redact handler: each match of a pattern in a string of
// the value is replaced; without patterns every string is.
type StateRedact struct {
	Patterns    []string `json:"patterns,omitempty"`
	Replacement string   `json:"replacement"`
}

// StateSink is a background handler: "log", "audit" (Store names the
// audit sink's store) or "webhook" (POSTs the event to URL, or to the URL
// the variable URLEnv names).
type StateSink struct {
	Sink   string `json:"sink"`
	Store  string `json:"store,omitempty"`
	URL    string `json:"url,omitempty"`
	URLEnv string `json:"url_env,omitempty"`
	Pos    string `json:"pos,omitempty"`
}

// DefaultRunIdle is settings.run_idle when a policy leaves it unset.
const DefaultRunIdle = "24h"

// DefaultMaxAnswerBytes is settings.max_answer_bytes when a policy leaves
// it unset: 32 MiB.
const DefaultMaxAnswerBytes = 32 << 20

// Settings are the run-time settings of a policy.
type Settings struct {
	// AllowUndeclaredTools lets calls to tools the policy does not declare
	// run (settings.allow_undeclared_tools); without it they are refused
	// on entry to the tool chain.
	AllowUndeclaredTools bool `json:"allow_undeclared_tools,omitempty"`
	// RunIdle ends a named run after this long without a call (a Go
	// duration such as "24h"; "0s" never). Empty, as in a plan written
	// before the setting existed, is the default of 24h.
	RunIdle string `json:"run_idle,omitempty"`
	// MaxAnswerBytes bounds the text, thinking and tool-call arguments one
	// model call's stream may carry, summed; 0 (unset) is
	// DefaultMaxAnswerBytes.
	MaxAnswerBytes int64 `json:"max_answer_bytes,omitempty"`
	// DigestKeyEnv names the environment variable that holds the key the
	// layers digest arguments and error text with (HMAC-SHA256) before
	// they store the digest; empty: plain SHA-256. The plan holds the
	// name, never the key.
	DigestKeyEnv string `json:"digest_key_env,omitempty"`
}

// Grounding is the grounding section of a policy.
type Grounding struct {
	// Render is the block the admitted items are rendered into (nil: none
	// is injected).
	Render *GroundingRender `json:"render,omitempty"`
	// Record writes an audit record per grounding to the audit sink of
	// Sink (empty: the default store).
	Record bool   `json:"record_grounding,omitempty"`
	Sink   string `json:"sink,omitempty"`
	// EveryTurn retrieves again on each turn instead of once per run.
	EveryTurn bool `json:"reground_every_turn,omitempty"`
}

// The placements of a grounding block.
const (
	PlacementSystem         = "system"
	PlacementBeforeLastUser = "before_last_user"
)

// GroundingRender is a grounding block: a Go text/template, an optional
// token budget and where the block goes in a request.
type GroundingRender struct {
	Template  string `json:"template"`
	MaxTokens int    `json:"max_tokens,omitempty"`
	// Placement is PlacementSystem (when empty) or PlacementBeforeLastUser.
	Placement string `json:"placement,omitempty"`
}

// Key is a virtual API key: the SHA-256 of the key (hex) or the name of the
// environment variable that holds it. A plan never holds a key itself.
type Key struct {
	SHA256 string `json:"sha256,omitempty"`
	Env    string `json:"env,omitempty"`
	// Tenant scopes the key's runs, budgets and rate limits.
	Tenant string `json:"tenant"`
}

// TenantOf returns the tenant of the key called name: Tenant, else the
// key's name.
func (k Key) TenantOf(name string) string {
	if k.Tenant == "" {
		return name
	}
	return k.Tenant
}

// MCPServer is an upstream MCP server: a command speaking MCP on its
// standard input and output, or the URL of a streamable HTTP endpoint.
type MCPServer struct {
	Command []string          `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Prefix  string            `json:"prefix,omitempty"`
	// Headers are sent with every request to a URL server; a value's
	// ${NAME} is the environment variable NAME, read when the server
	// connects, so the plan holds no credential.
	Headers map[string]string `json:"headers,omitempty"`
	// Session says whose calls share an upstream session: "client" (one
	// per MCP client session), "tenant" (one per tenant) or "shared" (one
	// for every caller); "" is "client" for a URL, "tenant" for a command.
	Session string `json:"session,omitempty"`
	// MaxSessions bounds the sessions open with the server at once, but
	// for "shared" (0: the default, DefaultMaxSessions).
	MaxSessions int `json:"max_sessions,omitempty"`
	// Pos is the server's position in the policy ("file:line:col"), for
	// messages.
	Pos string `json:"pos,omitempty"`
}

// Invariants configures the properties that agentc prove checks on every
// explored run (docs/prove.md).
type Invariants struct {
	// Off lists the built-in invariants turned off.
	Off []string `json:"off,omitempty"`
	// MaxExecutions bounds the executions of a tool per logical call, by
	// tool name; a tool not listed runs at most once per logical call when
	// it is side-effecting and not retry_safe, without bound otherwise.
	MaxExecutions map[string]int `json:"max_executions,omitempty"`
	// Custom are the user's invariants by id: CEL over the run's trace that
	// must hold after every explored run.
	Custom map[string]Invariant `json:"custom,omitempty"`
}

// Invariant is a user invariant.
type Invariant struct {
	// Expr is the CEL expression (bool).
	Expr string `json:"expr"`
	// Pos is "file:line:col" of the expression in the policy.
	Pos string `json:"pos,omitempty"`
}

// Chains holds the layers of each stage, index 0 outermost.
type Chains struct {
	Chat []Layer `json:"chat,omitempty"`
	Tool []Layer `json:"tool,omitempty"`
	Turn []Layer `json:"turn,omitempty"`
}

// Of returns the layers of stage s (nil for an unknown stage).
func (c *Chains) Of(s Stage) []Layer {
	switch s {
	case StageChat:
		return c.Chat
	case StageTool:
		return c.Tool
	case StageTurn:
		return c.Turn
	}
	return nil
}

// Model is a declared model.
type Model struct {
	USDPerMTokIn  float64 `json:"usd_per_mtok_in"`
	USDPerMTokOut float64 `json:"usd_per_mtok_out"`
	// USDPerMTokCached prices input tokens read from the provider's prompt
	// cache; nil prices them as input.
	USDPerMTokCached *float64 `json:"usd_per_mtok_cached,omitempty"`
	// USDPerMTokCacheWrite prices input tokens written to the provider's
	// prompt cache; nil prices them as input.
	USDPerMTokCacheWrite *float64 `json:"usd_per_mtok_cache_write,omitempty"`
	// USDPerMTokCacheWrite1h prices the input tokens of those written to
	// one-hour cache entries (Usage.CacheWrite1hInputTokens); nil prices
	// them as the other writes.
	USDPerMTokCacheWrite1h *float64 `json:"usd_per_mtok_cache_write_1h,omitempty"`
	// LongContext prices a call whose input is above its threshold (nil:
	// every call at the rates above).
	LongContext   *LongContext `json:"long_context,omitempty"`
	ContextTokens int          `json:"context_tokens,omitempty"`
	// Provider names the provider that serves the model ("openai",
	// "anthropic", or one a host registers with runtime.RegisterProvider);
	// empty when the host supplies the client in Deps.Models.
	Provider string `json:"provider,omitempty"`
	// ID is the provider's model id (the policy's `model` field).
	ID string `json:"model,omitempty"`
	// APIKeyEnv names the environment variable that holds the API key. The
	// key itself is never part of a plan.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// BaseURL is the provider's endpoint (empty: the provider's default).
	BaseURL string `json:"base_url,omitempty"`
	// MaxTokens bounds the output of a request that sets no max_tokens
	// (0: the provider client's default).
	MaxTokens int `json:"max_tokens,omitempty"`
}

// LongContext is a model's long-context tier: the provider bills a call
// whose input tokens (all of them: those read from and written to the
// prompt cache included) are above AboveInputTokens at these prices, the
// whole call, not only the tokens above the threshold. Its cache prices
// default as the model's do: cached and written tokens as the tier's
// input, one-hour writes as the tier's other writes.
type LongContext struct {
	AboveInputTokens       int64    `json:"above_input_tokens"`
	USDPerMTokIn           float64  `json:"usd_per_mtok_in"`
	USDPerMTokOut          float64  `json:"usd_per_mtok_out"`
	USDPerMTokCached       *float64 `json:"usd_per_mtok_cached,omitempty"`
	USDPerMTokCacheWrite   *float64 `json:"usd_per_mtok_cache_write,omitempty"`
	USDPerMTokCacheWrite1h *float64 `json:"usd_per_mtok_cache_write_1h,omitempty"`
}

// Rates returns the model with the prices a call of inputTokens input
// tokens is billed at: those of its long-context tier when the input is
// above the tier's threshold, else its own.
func (m Model) Rates(inputTokens int64) Model {
	t := m.LongContext
	if t == nil || inputTokens <= t.AboveInputTokens {
		return m
	}
	m.USDPerMTokIn, m.USDPerMTokOut = t.USDPerMTokIn, t.USDPerMTokOut
	m.USDPerMTokCached, m.USDPerMTokCacheWrite, m.USDPerMTokCacheWrite1h = t.USDPerMTokCached, t.USDPerMTokCacheWrite, t.USDPerMTokCacheWrite1h
	m.LongContext = nil
	return m
}

// Tool is a declared tool.
type Tool struct {
	SideEffecting bool `json:"side_effecting"`
	RetrySafe     bool `json:"retry_safe"`
	// SecretResult marks the tool's results secret: never persisted in
	// clear by a checkpoint.
	SecretResult bool `json:"secret_result,omitempty"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// URLArg and PathArg are the argument a tool's URL or file path is
	// in: a name, or a JSON pointer into the arguments ("/request/url",
	// "/files/*/path"). URLArgs and PathArgs list every reference when
	// the tool declares several (URLArg and PathArg are then the first).
	URLArg   string   `json:"url_arg,omitempty"`
	PathArg  string   `json:"path_arg,omitempty"`
	URLArgs  []string `json:"url_args,omitempty"`
	PathArgs []string `json:"path_args,omitempty"`
	// Args is the JSON Schema of the arguments (absent: untyped).
	Args json.RawMessage `json:"args,omitempty"`
	// ResultSchema is the JSON Schema of the tool's result (absent: none),
	// checked by an output_coerce layer of the tool chain.
	ResultSchema json.RawMessage `json:"result_schema,omitempty"`
}

// Store is a named state backend.
type Store struct {
	Kind string `json:"kind"`
	Path string `json:"path,omitempty"`
	// URL is the server address of a networked store (redis, postgres);
	// URLEnv names the environment variable that holds it, read when the
	// store is opened. URL wins when both are set.
	URL    string `json:"url,omitempty"`
	URLEnv string `json:"url_env,omitempty"`
	// Prefix namespaces a networked store's keys (redis) or names its
	// schema (postgres); empty is "agentc".
	Prefix string `json:"prefix,omitempty"`
	// Timeout bounds each operation of a networked store (a Go duration;
	// empty is DefaultStoreTimeout).
	Timeout string `json:"timeout,omitempty"`
}

// DefaultStoreTimeout is a store's timeout when its declaration sets none.
const DefaultStoreTimeout = 5 * time.Second

// OpTimeout returns the store's timeout: Timeout, DefaultStoreTimeout when
// empty. A value that is not a positive duration is an error.
func (s Store) OpTimeout() (time.Duration, error) {
	if s.Timeout == "" {
		return DefaultStoreTimeout, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout %q: want a positive duration such as 2s", s.Timeout)
	}
	return d, nil
}

// Layer is one entry of a chain.
type Layer struct {
	// Use is the builtin or custom middleware id.
	Use string `json:"use"`
	// Name is unique in its chain (defaults to Use; an unnamed layer's Use
	// must then be unique among the chain's names).
	Name string `json:"name,omitempty"`
	// When skips the layer for calls where it is false.
	When *Predicate `json:"when,omitempty"`
	// Tools restricts a tool-chain layer to these tools (empty: all).
	Tools []string `json:"tools,omitempty"`
	// Config holds the middleware's own fields, defaults applied.
	Config json.RawMessage `json:"config,omitempty"`
	// Predicates holds the CEL predicates of the config (for guard: "deny"
	// or "require"), checked at compile time.
	Predicates map[string]*Predicate `json:"predicates,omitempty"`
	// Pos is the layer's position in the policy ("file:line:col"), for
	// messages.
	Pos string `json:"pos,omitempty"`
}

// Predicate is a CEL predicate as checked by the compiler. The runtime
// rebuilds the stage's environment (typing args from the schemas of Tools)
// and compiles Source once at Build.
type Predicate struct {
	Stage  Stage  `json:"stage"`
	Phase  string `json:"phase,omitempty"`
	Source string `json:"source"`
	// Tools are the tools whose argument schemas type `args` (empty:
	// untyped).
	Tools []string `json:"tools,omitempty"`
	// CostLimit is the runtime cost limit; 0 when the static estimate
	// already proves the bound.
	CostLimit uint64 `json:"cost_limit,omitempty"`
	// Given are the paths the entry's `when` proves present wherever the
	// predicate runs ("args.reason" for when: "has(args.reason)"): a read
	// of one needs no presence test of its own.
	Given []string `json:"given,omitempty"`
	// NamePos gives the position in the policy ("file:line:col") of each
	// string a tool-stage predicate tests tool.name with (tool.name ==
	// 'refund', tool.name.startsWith('delete_')), by the string: a gateway
	// that finds it names no tool served says where it is written.
	NamePos map[string]string `json:"name_pos,omitempty"`
}
