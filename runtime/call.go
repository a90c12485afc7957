package runtime

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Run identifies the agent run a call belongs to: the CEL variable `run`.
type Run struct {
	// ID is the run id. Meters and caches with scope "run" key their state on it.
	ID string `json:"id"`
	// Agent names the agent.
	Agent string `json:"agent,omitempty"`
	// Tenant names the caller the run is made for (a customer, an API key):
	// a gateway sets it from the credential the request carried. Layers
	// with scope "key" (rate_limit) key their state on it, and idempotent
	// keys every call on it, so two tenants never share a limit or a
	// stored result. Empty is a tenant of its own.
	Tenant string `json:"tenant,omitempty"`
	// Meta holds free-form run metadata (run.meta in CEL).
	Meta map[string]any `json:"meta,omitempty"`
	// Ephemeral marks a run that ends with the request that made it and
	// can never be continued, as no client can name it: the run a gateway
	// gives a request without a run id, and the run of its own the
	// runtime gives a call made without one. When it ends (EndRun), layers
	// drop its state even in a store other processes share, where a named
	// run's is left to expire.
	Ephemeral bool `json:"ephemeral,omitempty"`

	// own marks the fresh run the runtime gives a call made without a run
	// id: it ends with the call, so nothing outlives it (no checkpoint).
	own bool
}

type runKey struct{}

// runValue is what a context carries for its run (WithRun): the run, and
// whether checkRunID accepts its id, decided once when the run is put in
// the context rather than on every call made with it.
type runValue struct {
	Run
	idOK bool
}

// WithRun returns a context that carries run. Every call made with the context
// (and with contexts derived from it) belongs to that run. A call made
// without a run id gets a fresh run of its own, ended when the call returns
// (see the package documentation).
func WithRun(ctx context.Context, run Run) context.Context {
	return context.WithValue(ctx, runKey{}, &runValue{Run: run, idOK: checkRunID(run.ID) == nil})
}

// runIn returns the run ctx carries, or nil.
func runIn(ctx context.Context) *Run {
	if r, ok := ctx.Value(runKey{}).(*runValue); ok {
		return &r.Run
	}
	return nil
}

// RunOf returns the run carried by ctx, or the zero Run.
func RunOf(ctx context.Context) Run {
	if r := runIn(ctx); r != nil {
		return *r
	}
	return Run{}
}

// Meta is the metadata every call carries. Layers read it and stamp it.
type Meta struct {
	// Run is the run the call belongs to.
	Run Run
	// Attempts is, for a chat call, the number of the model call in
	// progress (1 for the first): every model call the logical call makes
	// counts, each attempt of each retry layer and each model a fallback
	// tries alike, so after the call it holds the number of model calls
	// made (1 when none was: a cached answer, a refusal before the model).
	// A retry layer moves it on before each attempt (NextAttempt) so that
	// the layers inside see the number of the call to come. A hedge's
	// racers are not counted (they race, none follows a failure): the
	// call keeps the count of the racer that served. For a tool call it is
	// the number of the attempt in progress of the innermost retry.
	Attempts int
	// modelCalled is set once a model call was made under the number
	// Attempts holds: the next one (or a retry's next attempt) moves it on.
	modelCalled bool
	// IdempotencyKey is stable for one logical call: the same across retries,
	// fallbacks and hedges. Read it with the call's IdempotencyKey method,
	// which derives it on first use when the caller did not supply one.
	IdempotencyKey string
	// keyDerived is set when IdempotencyKey was derived by a call's
	// IdempotencyKey method rather than supplied by the caller.
	keyDerived bool
	// Cached is set by a cache layer that served the call without running
	// the inner layers; meters do not charge such calls.
	Cached bool
	// Deduped is set by an idempotency layer that replayed a stored result.
	Deduped bool
}

// NextAttempt moves Attempts on to the next model call when a model call
// was made under the number it holds: a retry calls it before each
// attempt, so that an attempt that never reached a model (refused by an
// inner layer) does not count, and one run after a fallback moved on
// counts after the fallback's calls.
func (m *Meta) NextAttempt() {
	if m.modelCalled {
		m.Attempts++
		m.modelCalled = false
	}
}

// modelCall numbers a model call about to be made (NextAttempt) and marks
// the number used.
func (m *Meta) modelCall() {
	m.NextAttempt()
	m.modelCalled = true
}

// IdempotencyKeySupplied reports whether IdempotencyKey is the caller's (or
// a layer's) rather than the key a call's IdempotencyKey method derived on
// first use: a layer that keys the call its own way (idempotent with
// key_args) replaces a derived key, never a supplied one.
func (m *Meta) IdempotencyKeySupplied() bool { return m.IdempotencyKey != "" && !m.keyDerived }

// Message is one transcript entry of a chat request. Plain text rides in
// Content; multi-part content (text, images, tool results) in Parts. A
// message may carry both: Content is then its first text, before the parts.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string `json:"role"`
	// Content is the message's plain text.
	Content string `json:"content,omitempty"`
	// Parts is multi-part content.
	Parts []ContentPart `json:"parts,omitempty"`
	// Name names the author (a user name, a tool).
	Name string `json:"name,omitempty"`
	// ToolCallID is, for a tool message, the id of the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolCalls are, for an assistant message, the tool calls it requested,
	// after its parts unless their PartsAfter places them among the parts.
	// A layer that removes parts keeps the calls in place (DeleteParts).
	ToolCalls []ToolUse `json:"tool_calls,omitempty"`
	// Metadata holds the host's annotations of the message; it is never
	// sent to a provider. Compaction keeps a message whose "pin" is "true".
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Text returns the message's text: Content and its text parts, joined by
// line breaks (Content alone, without allocating, when there are none).
// Tool results and tool calls are not text; see ToolResults and ToolCalls.
func (m *Message) Text() string {
	n := 0
	for i := range m.Parts {
		if m.Parts[i].Type == PartText {
			n++
		}
	}
	if n == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for i := range m.Parts {
		if m.Parts[i].Type != PartText {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(m.Parts[i].Text)
	}
	return b.String()
}

// RunsOn reports whether a model reads the text of part j run on from the
// text before it (Content, or part j-1), nothing between them: both are
// plain texts (not documents), no tool call sits between them, and m is
// not a tool message. A Claude model reads a message's separate text
// blocks run together, a prompt-cache breakpoint between them or not, and
// OpenAI's API its content parts; a tool message's texts are one result,
// joined by line breaks for either provider (Text). Where it reports
// false, something the model reads as a boundary stands between the two
// texts (an image, a thinking block, a tool call), and a guard's m.content
// and the text the openai provider sends put a line break between them.
func (m *Message) RunsOn(j int) bool {
	if m.Role == "tool" || j < 0 || j >= len(m.Parts) || !m.Parts[j].plainText() {
		return false
	}
	if j == 0 && m.Content == "" || j > 0 && !m.Parts[j-1].plainText() {
		return false
	}
	for k := range m.ToolCalls {
		if m.CallPlace(k) == j {
			return false
		}
	}
	return true
}

// plainText reports whether the part is a text a model reads as the
// message's own: a text part that is not a document.
func (p *ContentPart) plainText() bool { return p.Type == PartText && !p.Document }

// CallPlace returns the place of tool call k among the message's parts:
// the number of parts before it (see ToolUse.PartsAfter).
func (m *Message) CallPlace(k int) int {
	return len(m.Parts) - min(max(m.ToolCalls[k].PartsAfter, 0), len(m.Parts))
}

// Interleaved reports whether a tool call sits before one of the
// message's parts rather than after them all.
func (m *Message) Interleaved() bool {
	for k := range m.ToolCalls {
		if m.CallPlace(k) < len(m.Parts) {
			return true
		}
	}
	return false
}

// Blocks yields the message's parts and tool calls in their order: a
// part's index and -1, or -1 and a call's index. A call goes before the
// part its place names (CallPlace), after the calls before it; Content,
// when set, comes before them all.
func (m *Message) Blocks() iter.Seq2[int, int] {
	return func(yield func(part, call int) bool) {
		k := 0
		for j := 0; j <= len(m.Parts); j++ {
			for ; k < len(m.ToolCalls) && (j == len(m.Parts) || m.CallPlace(k) <= j); k++ {
				if !yield(-1, k) {
					return
				}
			}
			if j < len(m.Parts) && !yield(j, -1) {
				return
			}
		}
	}
}

// DeleteParts returns m without the parts del reports, each tool call
// kept in its place among the parts left (ToolUse.PartsAfter). m is not
// modified: its slices are copied before they change.
func (m Message) DeleteParts(del func(ContentPart) bool) Message {
	gone := make([]bool, len(m.Parts))
	n := 0
	for j := range m.Parts {
		if gone[j] = del(m.Parts[j]); gone[j] {
			n++
		}
	}
	if n == 0 {
		return m
	}
	out := m
	out.Parts = make([]ContentPart, 0, len(m.Parts)-n)
	for j := range m.Parts {
		if !gone[j] {
			out.Parts = append(out.Parts, m.Parts[j])
		}
	}
	cloned := false
	for k := range m.ToolCalls {
		after := 0
		for j := m.CallPlace(k); j < len(m.Parts); j++ {
			if !gone[j] {
				after++
			}
		}
		if after == m.ToolCalls[k].PartsAfter {
			continue
		}
		if !cloned {
			out.ToolCalls, cloned = slices.Clone(m.ToolCalls), true
		}
		out.ToolCalls[k].PartsAfter = after
	}
	return out
}

// ToolResults returns the tool results the message carries: the text of its
// tool_result parts, after its text (Content and text parts) when it is a
// tool message, whose result may ride in either (RunAgent's tool messages
// carry a tool_result part).
func (m *Message) ToolResults() []string {
	var out []string
	if m.Role == "tool" {
		if t := m.Text(); t != "" || len(m.Parts) == 0 {
			out = append(out, t)
		}
	}
	for i := range m.Parts {
		if m.Parts[i].Type == PartToolResult {
			out = append(out, m.Parts[i].Text)
		}
	}
	return out
}

// LatestInput returns the messages after the last assistant message: what
// entered the transcript since the model last spoke (the user's new message,
// the results of the tools it called). Without an assistant message it is
// the whole transcript.
func LatestInput(msgs []Message) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return msgs[i+1:]
		}
	}
	return msgs
}

// Content part types.
const (
	PartText       = "text"
	PartImage      = "image"
	PartToolResult = "tool_result"
	// PartThinking is a thinking block of an assistant message (Anthropic's
	// extended thinking): Text is the thinking, Signature its signature.
	PartThinking = "thinking"
	// PartRedactedThinking is a redacted_thinking block of an assistant
	// message: Signature holds its encrypted data.
	PartRedactedThinking = "redacted_thinking"
	// PartDocument is a document of a user message whose content no layer
	// reads as text (a PDF): MediaType names it, ImageURL locates it (a
	// data: URL holding its bytes, or an http(s) URL), Filename names it
	// when the client did. A plain-text document is a text part instead
	// (ContentPart.Document), which every layer reads.
	PartDocument = "document"
)

// ContentPart is one part of a multi-part message.
type ContentPart struct {
	// Type is PartText, PartImage, PartToolResult, PartThinking,
	// PartRedactedThinking or PartDocument.
	Type string `json:"type"`
	// Text is the text of a text part, a tool result's content, or the
	// thinking of a thinking part. Message.Text leaves thinking out: it is
	// not part of the message's visible text.
	Text string `json:"text,omitempty"`
	// ImageURL locates an image or a document: an http(s) URL or a data:
	// URL.
	ImageURL string `json:"image_url,omitempty"`
	// MediaType is the image's media type (image/png...) when Data holds
	// it, or a document's (application/pdf).
	MediaType string `json:"media_type,omitempty"`
	// Data holds raw image bytes (base64 in JSON).
	Data []byte `json:"data,omitempty"`
	// Detail is an image's resolution hint for an OpenAI model (its
	// image_url.detail: low, high or auto); "" leaves the model's default.
	// A provider without one leaves it out: it changes how finely the
	// image is read, not what is asked.
	Detail string `json:"detail,omitempty"`
	// ToolCallID is, for a tool result, the id of the call it answers.
	// An image part that has one is part of that result (an image a tool
	// returned, as a screenshot): it follows the result's part, which holds
	// the result's text, in the same message. An Anthropic model reads it
	// inside the result; an OpenAI-shaped model, whose tool messages hold
	// text alone, refuses the call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Document marks a text part the client sent as a plain-text document
	// (Anthropic's document block with a text source): an Anthropic model
	// gets it back as one, another model reads it as text. Layers read and
	// rewrite it as any text part.
	Document bool `json:"document,omitempty"`
	// Filename names a PartDocument, when the client named it (an OpenAI
	// file part's filename).
	Filename string `json:"filename,omitempty"`
	// IsError reports, for a tool result, that the tool failed.
	IsError bool `json:"is_error,omitempty"`
	// Signature is a thinking part's signature, or a redacted_thinking
	// part's encrypted data: opaque, sent back to the model that made it
	// byte for byte. The model rejects a thinking part whose text or
	// signature changed, so no layer edits either.
	Signature string `json:"signature,omitempty"`
	// CacheControl marks a prompt-cache breakpoint after the part
	// (Anthropic's cache_control); nil marks none.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// CacheControl is a prompt-cache breakpoint: the provider caches the
// prompt up to and including what carries it. Anthropic's API takes it on
// the system blocks, the content blocks, the tools and the request; a
// provider that caches on its own (OpenAI) ignores it, as it is a hint
// that changes no output.
type CacheControl struct {
	// Type is the kind of cache ("ephemeral").
	Type string `json:"type"`
	// TTL is the entry's time to live ("5m", "1h"); "" is the
	// provider's default.
	TTL string `json:"ttl,omitempty"`
}

// ToolUse is a tool call requested by the model: an entry of OpenAI's
// tool_calls, an Anthropic tool_use block. (ToolCall is the state of a tool
// call running through the tool chain; ToolUse.Request turns one into the
// other's input.)
type ToolUse struct {
	// ID identifies the call; the tool result answering it carries it.
	ID string `json:"id"`
	// Name is the tool.
	Name string `json:"name"`
	// Arguments is the JSON object of the arguments.
	Arguments json.RawMessage `json:"arguments"`
	// CacheControl marks a prompt-cache breakpoint after the call, in a
	// transcript sent back to the model (see CacheControl).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
	// PartsAfter places the call, in an assistant message, among the
	// message's parts: it is the number of parts that follow it. The zero
	// value puts it after every part; Anthropic's interleaved thinking puts
	// thinking between tool_use blocks, and the message goes back to the
	// model in that order (Message.Blocks). A value above the number of
	// parts puts the call before them all. The calls keep their order among
	// themselves. A provider without an order of blocks (OpenAI) ignores it.
	PartsAfter int `json:"parts_after,omitempty"`
	// Custom marks the call of a custom tool (ToolDef.Custom): the model
	// called it with free text, which Arguments holds as the object
	// {"input": TEXT}, so that the tool chain reads it as it reads any
	// call's arguments (args.input). CustomInput returns the text.
	Custom bool `json:"custom,omitempty"`
}

// CustomArgs returns the arguments of a custom tool's call of input:
// the JSON object {"input": input}.
func CustomArgs(input string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"input": input})
	return b
}

// CustomInput returns the text of a custom tool's call: its arguments'
// one member, the string input. Arguments of any other shape (a layer
// rewrote them into one no custom call has) are an error naming the call.
func (t ToolUse) CustomInput() (string, error) {
	var args map[string]json.RawMessage
	var in string
	if err := json.Unmarshal(t.Arguments, &args); err != nil || len(args) != 1 || args["input"] == nil || json.Unmarshal(args["input"], &in) != nil {
		return "", fmt.Errorf("tool call %q (%s): a custom tool's call holds its text as the arguments {\"input\": TEXT}, got %.200s", t.ID, t.Name, t.Arguments)
	}
	return in, nil
}

// Args decodes the arguments. Empty arguments decode to an empty map; any
// JSON other than an object is an error naming the call. Numbers decode as
// encoding/json decodes them, float64, except those float64 cannot hold
// exactly: an integer int64 holds is an int64 (9007199254740993), any
// other stays a json.Number of its text, which the tool chain refuses on
// entry (see DecodeArgs).
func (t ToolUse) Args() (map[string]any, error) {
	args := map[string]any{}
	if len(bytes.TrimSpace(t.Arguments)) == 0 {
		return args, nil
	}
	if err := DecodeArgs(t.Arguments, &args); err != nil || args == nil {
		if err == nil {
			err = errors.New("null is not an object")
		}
		return nil, fmt.Errorf("tool call %q (%s): arguments are not a JSON object: %w", t.ID, t.Name, err)
	}
	return args, nil
}

// ArgsText returns the text a content check scans in the arguments: every
// object key and string value of the decoded JSON (escapes resolved), one
// per line, in document order; the raw text when it is not JSON.
func (t ToolUse) ArgsText() string {
	if !json.Valid(t.Arguments) {
		return string(t.Arguments)
	}
	dec := json.NewDecoder(bytes.NewReader(t.Arguments))
	var b strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			return string(t.Arguments)
		}
		if s, ok := tok.(string); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
		}
	}
}

// Request returns the tool-chain request that runs the call.
func (t ToolUse) Request() (ToolRequest, error) {
	args, err := t.Args()
	if err != nil {
		return ToolRequest{}, err
	}
	return ToolRequest{Name: t.Name, Args: args}, nil
}

// ToolDef offers a tool to the model.
type ToolDef struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Strict asks the provider to hold the model's arguments to the
	// schema exactly (OpenAI's and Anthropic's strict).
	Strict bool `json:"strict,omitempty"`
	// CacheControl marks a prompt-cache breakpoint after the tool (see
	// CacheControl).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
	// Custom, when set, makes the tool a custom (free-form) tool, as
	// OpenAI's API has them: the model calls it with text (ToolUse.Custom),
	// held to Custom's grammar when it has one, and Parameters is unused.
	// A provider without custom tools refuses the request.
	Custom *CustomTool `json:"custom,omitempty"`
}

// Custom tool formats.
const (
	// CustomText is free text, unconstrained.
	CustomText = "text"
	// CustomGrammar is text held to a grammar.
	CustomGrammar = "grammar"
)

// CustomTool is the input format of a custom tool.
type CustomTool struct {
	// Format is CustomText, CustomGrammar, or "" (the provider's default:
	// free text).
	Format string `json:"format,omitempty"`
	// Syntax is the grammar's syntax: "lark" or "regex".
	Syntax string `json:"syntax,omitempty"`
	// Definition is the grammar.
	Definition string `json:"definition,omitempty"`
}

// Response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat constrains the model's output.
type ResponseFormat struct {
	// Type is FormatText, FormatJSONObject or FormatJSONSchema.
	Type string `json:"type"`
	// Name names the schema (json_schema).
	Name string `json:"name,omitempty"`
	// Schema is the JSON Schema the output must match (json_schema).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Strict asks the provider to enforce the schema exactly.
	Strict bool `json:"strict,omitempty"`
}

// ChatRequest is one model call. Layers may replace a slice, map or pointer
// field on the call's own copy; they never modify what the caller's fields
// point to.
type ChatRequest struct {
	// Model names the model client to call (a key of Deps.Models). Fallback
	// and hedge layers rewrite it on the call's own copy.
	Model string `json:"model"`
	// Messages is the transcript.
	Messages []Message `json:"messages"`
	// MaxTokens bounds the output (0: the model's default).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Tools are the tools offered to the model. A request without Tools
	// (nil) offers the policy's declared tools, unless the host opts out
	// with Deps.NoDeclaredTools; an empty non-nil slice offers none.
	Tools []ToolDef `json:"tools,omitempty"`
	// ToolChoice is "" (the provider's default), auto, none, required or the
	// name of a tool the model must call.
	ToolChoice string `json:"tool_choice,omitempty"`
	// Temperature, TopP, Stop and Seed are sampling parameters; nil (or
	// empty) leaves the provider's default.
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	// FrequencyPenalty, PresencePenalty and LogitBias are OpenAI's
	// sampling penalties (-2 to 2) and token biases (a token id of the
	// model's tokenizer to -100..100); nil leaves none. Only the openai
	// provider can honour them: another fails the call when one asks for
	// something (a penalty other than 0, a bias), since its model would
	// answer otherwise.
	FrequencyPenalty *float64       `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64       `json:"presence_penalty,omitempty"`
	LogitBias        map[string]int `json:"logit_bias,omitempty"`
	// TopK is Anthropic's top_k sampling parameter; nil leaves the
	// provider's default. Only the anthropic provider can honour it;
	// another fails the call.
	TopK *int `json:"top_k,omitempty"`
	// ResponseFormat constrains the output; nil is free text.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// Metadata is free caller metadata (request.params.metadata in CEL);
	// providers that accept metadata forward it.
	Metadata map[string]string `json:"metadata,omitempty"`
	// SafetyIdentifier is OpenAI's safety_identifier: an id of the end
	// user for the provider's abuse monitoring, as Metadata's user_id is
	// (the openai provider sends both, as safety_identifier and user; the
	// anthropic provider sends it as metadata.user_id, in place of
	// Metadata's).
	SafetyIdentifier string `json:"safety_identifier,omitempty"`
	// PromptCacheKey is OpenAI's prompt_cache_key: a hint that routes
	// requests sharing a prefix to the same prompt cache. It changes no
	// output; a provider without it leaves it out.
	PromptCacheKey string `json:"prompt_cache_key,omitempty"`
	// ParallelToolCalls, when set, says whether the model may propose
	// several tool calls in one response (OpenAI's parallel_tool_calls,
	// the negation of Anthropic's disable_parallel_tool_use); nil leaves
	// the provider's default (allowed).
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// CacheControl asks the provider to cache the prompt up to its last
	// cacheable block (Anthropic's top-level cache_control; see
	// CacheControl).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
	// Betas are Anthropic beta features the call asks for (the
	// anthropic-beta header's values). Only the anthropic provider can
	// honour them; another fails the call rather than drop them.
	Betas []string `json:"betas,omitempty"`
	// Thinking asks an Anthropic model for extended thinking; nil leaves
	// it off. Only the anthropic provider can honour it; another fails the
	// call rather than answer without it.
	Thinking *Thinking `json:"thinking,omitempty"`
	// ReasoningEffort is OpenAI's reasoning_effort (none, minimal, low,
	// medium, high, xhigh); "" leaves the model's default. Only the
	// openai provider can honour it; another fails the call.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Verbosity is OpenAI's verbosity (low, medium, high): how long the
	// answer runs; "" leaves the model's default. Only the openai provider
	// can honour it; another fails the call rather than answer at a
	// length the client did not ask for.
	Verbosity string `json:"verbosity,omitempty"`
	// Effort is Anthropic's output_config.effort (low, medium, high,
	// xhigh, max): how many tokens the model spends on its answer, its
	// text and tool calls as much as its thinking; "" leaves the model's
	// default. Only the anthropic provider can honour it; another fails
	// the call (OpenAI's reasoning_effort bounds the reasoning alone).
	Effort string `json:"effort,omitempty"`
	// ContextEdits are Anthropic's context management edits
	// (context_management.edits), which the API applies to the transcript
	// before the model reads it, leaving out earlier thinking blocks or
	// tool results. Only the anthropic provider sends them; another
	// leaves out ClearThinking (it never sends thinking blocks) and fails
	// the call on any other edit, whose model would read what the client
	// asked to clear.
	ContextEdits []ContextEdit `json:"context_edits,omitempty"`
}

// The context management edits the runtime carries (ContextEdit.Type).
const (
	// ClearThinking leaves out the thinking blocks of earlier turns.
	ClearThinking = "clear_thinking_20251015"
	// ClearToolUses leaves out the oldest tool results (and, asked, the
	// tool calls' inputs) once the input passes a threshold.
	ClearToolUses = "clear_tool_uses_20250919"
)

// ContextEdit is one context management edit: its JSON is the edit's
// object as Anthropic's API takes it, its parameters relayed as sent.
type ContextEdit struct {
	// Type is the strategy (ClearThinking, ClearToolUses).
	Type string `json:"type"`
	// Params is the edit's whole object, type included (compact JSON).
	Params json.RawMessage `json:"-"`
}

// MarshalJSON returns the edit's object.
func (e ContextEdit) MarshalJSON() ([]byte, error) {
	if len(e.Params) > 0 {
		return e.Params, nil
	}
	return json.Marshal(struct {
		Type string `json:"type"`
	}{e.Type})
}

// UnmarshalJSON reads an edit's object, keeping it whole in Params.
func (e *ContextEdit) UnmarshalJSON(b []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return err
	}
	e.Type, e.Params = head.Type, c.Bytes()
	return nil
}

// Thinking configures extended thinking (Anthropic's thinking parameter).
type Thinking struct {
	// Type is "enabled" (with BudgetTokens), "adaptive" (the model
	// decides how much to think) or "between_tools".
	Type string `json:"type"`
	// BudgetTokens bounds the tokens spent thinking (enabled only).
	BudgetTokens int `json:"budget_tokens,omitempty"`
	// Display is "summarized" or "omitted" (the thinking text left out,
	// its signature kept); "" is the model's default. Enabled and
	// adaptive only.
	Display string `json:"display,omitempty"`
}

// Usage counts the tokens of a model call.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CachedInputTokens is the part of InputTokens read from the provider's
	// prompt cache.
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	// ReasoningTokens is the part of OutputTokens spent on reasoning.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	// CacheWriteInputTokens is the part of InputTokens written to the
	// provider's prompt cache (Anthropic's cache_creation_input_tokens).
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens,omitempty"`
	// CacheWrite1hInputTokens is the part of CacheWriteInputTokens written
	// to one-hour cache entries (Anthropic's
	// cache_creation.ephemeral_1h_input_tokens), which cost more to write
	// than the five-minute ones that make the rest.
	CacheWrite1hInputTokens int64 `json:"cache_write_1h_input_tokens,omitempty"`
}

// Total returns input plus output tokens, clamped as Ledger.Tokens.
func (u Usage) Total() int64 { return clampedSum(u.InputTokens, u.OutputTokens) }

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add adds v to u. The sums saturate at math.MaxInt64 instead of wrapping
// negative. A negative count in v is absurd (a provider never credits
// tokens back): its sum becomes math.MaxInt64, which a meter refuses as
// absurd usage, rather than taking nothing from it.
func (u *Usage) Add(v Usage) {
	u.InputTokens = addCount(u.InputTokens, v.InputTokens)
	u.OutputTokens = addCount(u.OutputTokens, v.OutputTokens)
	u.CachedInputTokens = addCount(u.CachedInputTokens, v.CachedInputTokens)
	u.ReasoningTokens = addCount(u.ReasoningTokens, v.ReasoningTokens)
	u.CacheWriteInputTokens = addCount(u.CacheWriteInputTokens, v.CacheWriteInputTokens)
	u.CacheWrite1hInputTokens = addCount(u.CacheWrite1hInputTokens, v.CacheWrite1hInputTokens)
}

// addCount returns a+b for the counts of a usage report: a negative b is
// absurd, and makes the sum math.MaxInt64.
func addCount(a, b int64) int64 {
	if b < 0 {
		return math.MaxInt64
	}
	return SaturatingAdd(a, b)
}

// SaturatingAdd returns a+b for a count: a negative b adds nothing, and the
// sum stops at math.MaxInt64 instead of wrapping.
func SaturatingAdd(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Sub returns u minus v (what a call added to a running sum).
func (u Usage) Sub(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens - v.InputTokens, OutputTokens: u.OutputTokens - v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens - v.CachedInputTokens, ReasoningTokens: u.ReasoningTokens - v.ReasoningTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens - v.CacheWriteInputTokens, CacheWrite1hInputTokens: u.CacheWrite1hInputTokens - v.CacheWrite1hInputTokens}
}

// Finish reasons, in OpenAI's vocabulary; providers map theirs onto these
// (Anthropic end_turn and stop_sequence: stop, max_tokens: length, tool_use:
// tool_calls, refusal: content_filter, pause_turn: FinishPauseTurn).
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
	// FinishPauseTurn ends a turn the provider paused (Anthropic's
	// pause_turn: a long turn of its server tools): the answer is not
	// finished, and the client sends it back to have it continued.
	FinishPauseTurn = "pause_turn"
)

// ToolCallDelta is a fragment of a streamed tool call. Fragments of one call
// share its Index; the first carries the call's ID and Name, and the
// Arguments chunks of all of them, concatenated in order, are the call's
// JSON arguments. A Name split over fragments is joined in order too, as
// OpenAI's client libraries join function.name (an Anthropic stream names
// the call once, in its content_block_start), except that a fragment
// repeating the whole name so far is read once: some OpenAI-compatible
// servers send the name with every fragment. A later ID replaces an
// earlier one, as in OpenAI's libraries.
//
// The fragments of a custom tool's call (ToolUse.Custom) are marked Custom
// (one of them is enough): their Arguments chunks are then the call's
// text, which ToolCallBuilder makes the arguments {"input": TEXT}.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Custom    bool   `json:"custom,omitempty"`
}

// wholeCall is the one fragment of call, the k-th: a custom call's holds
// its text. Arguments of a custom call that hold no text (see
// ToolUse.CustomInput) are passed on as they are, unmarked, for the
// consumer to refuse as arguments of no custom call.
func wholeCall(k int, call ToolUse) ToolCallDelta {
	if call.Custom {
		if in, err := call.CustomInput(); err == nil {
			return ToolCallDelta{Index: k, ID: call.ID, Name: call.Name, Arguments: in, Custom: true}
		}
	}
	return ToolCallDelta{Index: k, ID: call.ID, Name: call.Name, Arguments: string(call.Arguments)}
}

// Delta is one streamed piece of a model response: text, tool-call
// fragments, or both. A model client reports the call's usage on any delta
// (usually the last, possibly with nothing else); usages of several deltas
// add up. The finish reason rides on the last delta that carries one.
//
// Every delta that got past a layer commits the call there, whatever it
// carries (text, tool-call fragments, a finish reason or usage alone): the
// consumer has received it, so retry, fallback and hedge never re-invoke the
// model after it (the first-delta commit rule). A finish-only delta commits
// too: a consumer forwarding the stream may already have told its own client
// that the response ended.
type Delta struct {
	Text         string          `json:"text,omitempty"`
	ToolCalls    []ToolCallDelta `json:"tool_calls,omitempty"`
	FinishReason string          `json:"finish_reason,omitempty"`
	// StopSequence is, with FinishStop, the stop sequence the model
	// stopped at, when the provider reports it (Anthropic does).
	StopSequence string `json:"stop_sequence,omitempty"`
	Usage        Usage  `json:"usage,omitzero"`
	// Thinking is a fragment of a thinking block (extended thinking), nil
	// for none. A model thinks before it answers: thinking blocks come
	// first in a response.
	Thinking *ThinkingDelta `json:"thinking,omitempty"`
	// Refusal reports that Text is the model's refusal to answer
	// (OpenAI's refusal), not an answer. A layer that passes the text on,
	// edited or not, keeps it.
	Refusal bool `json:"refusal,omitempty"`
	// More reports that the model client already has the stream's next
	// delta at hand and yields it at once (the upstream had sent it when
	// this one was decoded). A consumer writing to a network connection
	// may hold this delta's bytes and send them with the next ones; a
	// delta without More (the default) is to be sent at once. A layer
	// that passes a delta on unchanged or edited keeps it; one that holds
	// deltas back or makes its own yields them without it.
	More bool `json:"-"`
}

// ThinkingDelta is a fragment of a thinking block. Fragments of one block
// share its Index (its place among the response's thinking blocks); the
// Text of all of them, concatenated in order, is the block's thinking, and
// one carries its Signature. A redacted_thinking block comes whole, in one
// fragment, its encrypted data in Signature.
type ThinkingDelta struct {
	Index     int    `json:"index"`
	Redacted  bool   `json:"redacted,omitempty"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// ThinkingBuilder assembles streamed thinking fragments, by index, into
// thinking blocks. The zero value is ready to use; it allocates only when
// a fragment arrives.
type ThinkingBuilder struct {
	blocks []thinkingParts
}

type thinkingParts struct {
	redacted        bool
	text, signature []byte
}

// MaxThinkingIndexSkip is the most thinking blocks a fragment's index may
// run past the blocks seen (ThinkingBuilder.Add): a stream numbers its
// thinking blocks in order, and one that skips a few leaves them empty (a
// layer left a block out); an index far beyond is a stream that would have
// the builder allocate that many blocks.
const MaxThinkingIndexSkip = 16

// Add adds the thinking fragment of d, if any. A fragment whose index runs
// more than MaxThinkingIndexSkip blocks past the blocks seen is refused
// with a *CallError (KindPermanent), and nothing is added.
func (b *ThinkingBuilder) Add(d *Delta) error {
	f := d.Thinking
	if f == nil || f.Index < 0 {
		return nil
	}
	if f.Index-len(b.blocks) > MaxThinkingIndexSkip {
		return &CallError{Kind: KindPermanent, Message: fmt.Sprintf(
			"the model's stream sent thinking fragment index %d with %d blocks seen: a fragment may skip at most %d blocks",
			f.Index, len(b.blocks), MaxThinkingIndexSkip)}
	}
	for len(b.blocks) <= f.Index {
		b.blocks = append(b.blocks, thinkingParts{})
	}
	p := &b.blocks[f.Index]
	p.redacted = p.redacted || f.Redacted
	p.text = append(p.text, f.Text...)
	p.signature = append(p.signature, f.Signature...)
	return nil
}

// Blocks returns the assembled blocks, PartThinking and
// PartRedactedThinking parts in order (nil when no fragment arrived).
func (b *ThinkingBuilder) Blocks() []ContentPart {
	if len(b.blocks) == 0 {
		return nil
	}
	out := make([]ContentPart, len(b.blocks))
	for i, p := range b.blocks {
		out[i] = ContentPart{Type: PartThinking, Text: string(p.text), Signature: string(p.signature)}
		if p.redacted {
			out[i].Type = PartRedactedThinking
		}
	}
	return out
}

// ToolCallBuilder assembles streamed tool-call fragments, by index, into
// tool calls. The zero value is ready to use; it allocates only when a
// fragment arrives.
type ToolCallBuilder struct {
	calls []toolCallParts
	// at holds the position in calls of each index once there are more
	// than a few calls (nil before), so that an answer of many calls is
	// assembled in linear time.
	at map[int]int
}

type toolCallParts struct {
	index    int
	id, name string
	args     []byte
	custom   bool
}

// Add adds the fragments of d.
func (b *ToolCallBuilder) Add(d *Delta) {
	for i := range d.ToolCalls {
		b.AddFragment(d.ToolCalls[i])
	}
}

// AddFragment adds one fragment.
func (b *ToolCallBuilder) AddFragment(f ToolCallDelta) {
	p := b.find(f.Index)
	if p == nil {
		b.calls = append(b.calls, toolCallParts{index: f.Index})
		if b.at != nil {
			b.at[f.Index] = len(b.calls) - 1
		}
		p = &b.calls[len(b.calls)-1]
	}
	if f.ID != "" {
		p.id = f.ID
	}
	if f.Name != p.name {
		p.name += f.Name
	}
	p.args = append(p.args, f.Arguments...)
	p.custom = p.custom || f.Custom
}

// find returns the call of index, nil when none has begun: the call begun
// last (where a fragment usually goes), else by a scan of a few calls or
// the positions of more.
func (b *ToolCallBuilder) find(index int) *toolCallParts {
	n := len(b.calls)
	if n > 0 && b.calls[n-1].index == index {
		return &b.calls[n-1]
	}
	if n <= 16 {
		for i := range b.calls {
			if b.calls[i].index == index {
				return &b.calls[i]
			}
		}
		return nil
	}
	if b.at == nil {
		b.at = make(map[int]int, n)
		for i, c := range b.calls {
			b.at[c.index] = i
		}
	}
	if i, ok := b.at[index]; ok {
		return &b.calls[i]
	}
	return nil
}

// Len returns the number of calls begun.
func (b *ToolCallBuilder) Len() int { return len(b.calls) }

// ToolCalls returns the assembled calls ordered by index (nil when no
// fragment arrived). A call whose arguments never arrived has the arguments
// {}. The arguments are returned as they arrived, even when they are not
// valid JSON (a stream cut short): ToolUse.Args reports that. A custom
// tool's call has the arguments {"input": TEXT} of the text that arrived.
func (b *ToolCallBuilder) ToolCalls() []ToolUse {
	if len(b.calls) == 0 {
		return nil
	}
	sorted := slices.IsSortedFunc(b.calls, func(x, y toolCallParts) int { return cmp.Compare(x.index, y.index) })
	if !sorted {
		slices.SortStableFunc(b.calls, func(x, y toolCallParts) int { return cmp.Compare(x.index, y.index) })
		b.at = nil // the positions moved
	}
	out := make([]ToolUse, len(b.calls))
	for i, p := range b.calls {
		if p.custom {
			out[i] = ToolUse{ID: p.id, Name: p.name, Arguments: CustomArgs(string(p.args)), Custom: true}
			continue
		}
		args := p.args
		if len(bytes.TrimSpace(args)) == 0 {
			args = []byte("{}")
		}
		out[i] = ToolUse{ID: p.id, Name: p.name, Arguments: json.RawMessage(args)}
	}
	return out
}

// Reset empties the builder.
func (b *ToolCallBuilder) Reset() { b.calls, b.at = nil, nil }

// ToolCallDeltas returns the fragments that stream calls whole: one fragment
// per call, indexed by position (what a layer replaying a recorded response
// emits).
func ToolCallDeltas(calls []ToolUse) []ToolCallDelta {
	if len(calls) == 0 {
		return nil
	}
	out := make([]ToolCallDelta, len(calls))
	for i, t := range calls {
		out[i] = wholeCall(i, t)
	}
	return out
}

// ChatCall is the state of one chat call as it passes through the layers. A
// pointer to it is valid only until the handler it was passed to returns.
//
// The stream fields are maintained by the innermost handler, which counts
// every delta it pushes; a layer that withholds deltas (a buffering layer, see
// Buffer) restores Deltas to its value before next and counts the deltas it
// pushes itself, so that after next returns Deltas is the number of deltas that
// got past the layer. A layer can tell a pre-stream failure (Deltas unchanged)
// from a mid-stream one.
type ChatCall struct {
	// Request is the call's own copy of the request.
	Request ChatRequest
	// Meta is the call's metadata.
	Meta Meta

	// Deltas counts the deltas delivered past the current layer.
	Deltas int
	// Served names the model that produced the delivered deltas (or the
	// successful empty response).
	Served string
	// Usage is the usage reported by the model, summed over the deltas that
	// arrived. When a stream ends without a report, the innermost handler
	// estimates it from the request and the text that arrived; a request
	// cancelled before anything arrived is estimated at its input.
	Usage Usage
	// Discarded is the usage billed by model calls made for this call whose
	// output it never received: the racers a hedge cancelled or that failed,
	// the attempts a retry ran again and the models a fallback moved on
	// from (DiscardAttempt). It is not part of the response's usage; a
	// meter charges it.
	Discarded Usage
	// Charges lists, per model call made for this call (attempts, fallbacks,
	// hedge racers, the lost ones included), the model it went to and the
	// usage it billed, in the order they ended: what Usage and Discarded
	// sum, by model, so a meter prices each at its own model's rates.
	Charges []Charge
	// FinishReason is the last finish reason a delta carried (see the
	// Finish constants); "" when none did.
	FinishReason string
	// StopSequence is the stop sequence the model reported stopping at
	// (Delta.StopSequence); "" when none.
	StopSequence string
	// Stopped is set when the consumer stopped the stream early.
	Stopped bool
	// Annotations are facts layers report about the output (see Annotate);
	// they ride on the ChatResponse. Nil until a layer annotates.
	Annotations map[string]any

	// quarters is the estimate, in quarter tokens (textQuarters), of the
	// text, thinking and tool calls that arrived: zero until some arrived.
	quarters int64
	down     func(Delta) bool
	// tok guards the model-facing yield (see emitToken); it survives
	// recycling.
	tok *emitToken
	// own is set on a call a layer makes of its own (OwnCall).
	own bool
	// digester derives the idempotency key: the pipeline's, keyed with
	// settings.digest_key_env.
	digester Digester
	// askedMaxTokens is the max_tokens of the request as the caller gave
	// it, before the layers rewrote the request.
	askedMaxTokens int
	// owned holds what the model calls made for the own calls of layers
	// billed (ChatResponse.OwnCharges): one for the call they are made
	// for, shared by them, by the own calls they make in turn and by their
	// clones. Nil until one is made or the call cloned.
	owned *ownedCharges
}

// ownedCharges is the list of charges of a call's own calls; their model
// calls may end at once (a hedge's racers).
type ownedCharges struct {
	mu      sync.Mutex
	charges []Charge
}

func (o *ownedCharges) add(ch Charge) {
	o.mu.Lock()
	o.charges = append(o.charges, ch)
	o.mu.Unlock()
}

// list returns a copy of the charges, nil when none.
func (o *ownedCharges) list() []Charge {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.charges)
}

// ownedList returns c's owned charges, making them when c has none.
func (c *ChatCall) ownedList() *ownedCharges {
	if c.owned == nil {
		c.owned = &ownedCharges{}
	}
	return c.owned
}

// Own reports whether c is a call a layer makes of its own (OwnCall: a
// judge's verdict, a summary), whose output goes to that layer, not to the
// caller.
func (c *ChatCall) Own() bool { return c.own }

// IdempotencyKey returns the call's idempotency key, derived from the run id
// and the transcript (keyed with the pipeline's digest key, when it has
// one: the key and the run id, which an audit record or a provider's log
// holds, would otherwise let a reader test guessed prompts) unless the
// caller supplied one.
func (c *ChatCall) IdempotencyKey() string {
	if c.Meta.IdempotencyKey == "" {
		b, _ := json.Marshal(c.Request.Messages)
		c.Meta.IdempotencyKey, c.Meta.keyDerived = digestBy(c.digester, "chat", c.Meta.Run.ID, b), true
	}
	return c.Meta.IdempotencyKey
}

// deltaQuarters is the estimate, in quarter tokens, of the text d carries.
func deltaQuarters(d *Delta) int64 {
	n := textQuarters(d.Text)
	if d.Thinking != nil {
		n += textQuarters(d.Thinking.Text)
	}
	for i := range d.ToolCalls {
		n += textQuarters(d.ToolCalls[i].Name) + textQuarters(d.ToolCalls[i].Arguments)
	}
	return n
}

// emit counts and pushes one delta from the model to the layers above.
func (c *ChatCall) emit(d Delta) bool {
	c.quarters += deltaQuarters(&d)
	c.Usage.Add(d.Usage)
	if d.FinishReason != "" {
		c.FinishReason = d.FinishReason
	}
	if d.StopSequence != "" {
		c.StopSequence = d.StopSequence
	}
	if c.Stopped {
		return false
	}
	c.Deltas++
	if !c.down(d) {
		c.Stopped = true
		return false
	}
	return true
}

// Emit pushes a delta produced by a layer itself (for example a buffering
// layer releasing what it held) to yield, counting it in Deltas and
// recording its finish reason. It returns false when the consumer stopped.
func (c *ChatCall) Emit(yield func(Delta) bool, d Delta) bool {
	if d.FinishReason != "" {
		c.FinishReason = d.FinishReason
	}
	c.Deltas++
	if !yield(d) {
		c.Stopped = true
		return false
	}
	return true
}

// Clone returns a copy of the call for a concurrent attempt (hedge): the
// request and meta are copied, the stream state starts empty.
func (c *ChatCall) Clone() *ChatCall {
	return &ChatCall{Request: c.Request, Meta: c.Meta, own: c.own, owned: c.ownedList(), askedMaxTokens: c.askedMaxTokens, digester: c.digester}
}

// Discard records that a finished clone's output was dropped (a racer that
// lost or failed): what it billed, its usage and its own discarded usage, is
// added to c's Discarded usage.
func (c *ChatCall) Discard(clone *ChatCall) {
	c.Discarded.Add(clone.Usage)
	c.Discarded.Add(clone.Discarded)
	c.Charges = append(c.Charges, clone.Charges...)
}

// DiscardAttempt records that the model calls the inner layers made since
// c's usage was before were an attempt whose output the caller never
// receives (one a retry or a fallback runs again, or moves on from,
// after it failed before its first delta): what they billed moves from
// Usage to Discarded. Usage is then the usage of the attempt that serves
// the call, and a meter outside charges both.
func (c *ChatCall) DiscardAttempt(before Usage) {
	c.Discarded.Add(c.Usage.Sub(before))
	c.Usage = before
}

// Charge is the usage one model call billed, and the model it went to.
type Charge struct {
	// Model is the plan's name of the model.
	Model string
	// Usage is what the call billed, estimated where it reported none.
	Usage Usage
	// Metered marks the charge a meter settled in place of the call's
	// usage when it reported absurd usage: Usage is then the tokens the
	// ledger was charged, and USD the dollars, which need not be Usage at
	// the model's prices (a ledger charged to its ceilings).
	Metered bool
	USD     float64
}

// Adopt copies the stream state of a finished clone (the winner of a race)
// into c. Deltas is left alone: the layer that forwarded the clone's deltas
// counted them with Emit.
func (c *ChatCall) Adopt(clone *ChatCall) {
	c.Served = clone.Served
	c.Usage.Add(clone.Usage)
	c.Discarded.Add(clone.Discarded)
	c.Charges = append(c.Charges, clone.Charges...)
	if clone.FinishReason != "" {
		c.FinishReason = clone.FinishReason
	}
	if clone.StopSequence != "" {
		c.StopSequence = clone.StopSequence
	}
	c.quarters += clone.quarters
	c.Meta.Attempts, c.Meta.modelCalled = clone.Meta.Attempts, clone.Meta.modelCalled
	c.Meta.Cached = c.Meta.Cached || clone.Meta.Cached
	c.Request.Model = clone.Request.Model
	for k, v := range clone.Annotations {
		c.Annotate(k, v)
	}
}

// ChatResponse is the outcome of a chat call.
type ChatResponse struct {
	// Text is the streamed text; only Complete and ChatStream collect it.
	Text string `json:"text,omitempty"`
	// ToolCalls are the tool calls the model requested, assembled from the
	// delivered fragments; like Text, only Complete and ChatStream collect
	// them (a Stream caller assembles them with a ToolCallBuilder).
	ToolCalls []ToolUse `json:"tool_calls,omitempty"`
	// Thinking are the thinking blocks the model returned (PartThinking
	// and PartRedactedThinking parts, in order), collected like Text.
	Thinking []ContentPart `json:"thinking,omitempty"`
	// FinishReason is why the model stopped (see the Finish constants); ""
	// when the stream did not say.
	FinishReason string `json:"finish_reason,omitempty"`
	// StopSequence is the stop sequence the model stopped at, when its
	// provider reported it.
	StopSequence string `json:"stop_sequence,omitempty"`
	// Model is the model that served the call.
	Model string `json:"model,omitempty"`
	// Usage is the reported (or estimated) usage.
	Usage Usage `json:"usage"`
	// Attempts is the number of model calls made (Meta.Attempts): every
	// retry attempt and every model a fallback tried; 1 without either.
	Attempts int `json:"attempts"`
	// Deltas is the number of deltas delivered.
	Deltas int `json:"deltas"`
	// Cached reports a response served from a cache.
	Cached bool `json:"cached,omitempty"`
	// Refusal reports that Text is the model's refusal to answer: text of
	// a delta marked Refusal was collected. Like Text, only Complete and
	// ChatStream set it.
	Refusal bool `json:"refusal,omitempty"`
	// Charges are the usage each model call made for the call billed, by
	// the model it went to (ChatCall.Charges): the attempts, fallbacks and
	// hedge racers whose output was dropped included. It is nil when the
	// model call that served the response is the only one that billed
	// (what it billed is Usage, at Model).
	Charges []Charge `json:"-"`
	// OwnCharges are the usage each model call made for the own calls of
	// layers billed (OwnCall: a judge's verdicts, a summarizing
	// compaction's summaries), by the model it went to; nil when none was
	// made. They are in neither Usage nor Charges: a meter they pass
	// charges them as calls of their own.
	OwnCharges []Charge `json:"-"`
	// Annotations are the facts layers recorded about the output, by key
	// (ChatCall.Annotate); nil when none did.
	Annotations map[string]any `json:"annotations,omitempty"`
}

// ToolInfo is the declaration of a tool in the plan (the CEL variable `tool`).
type ToolInfo struct {
	Name          string
	SideEffecting bool
	RetrySafe     bool
	// URLArg and PathArg are the tool's url_arg and path_arg: an
	// argument name or a JSON pointer into the arguments ("/request/url",
	// "/files/*/path"); URLArgs and PathArgs, when set, list every
	// reference (see URLRefs and PathRefs).
	URLArg            string
	PathArg           string
	URLArgs, PathArgs []string
	// SecretResult reports a tool declared secret_result: its results
	// are secret for the run (a checkpoint never saves them in clear)
	// and no cache may hold them.
	SecretResult bool
	// Declared reports whether the plan declares the tool.
	Declared bool
	// hostEffects is set when the host declared SideEffecting and
	// RetrySafe of a tool the plan does not declare
	// (Pipeline.DeclareToolEffects).
	hostEffects bool
}

// ToolFunc runs one tool call. It reads the arguments from call.Args (numbers
// are float64, and int64 for an integer a float64 cannot hold exactly, above
// 2^53: see DecodeArgs) and should pass call.IdempotencyKey() downstream when
// the tool has effects. The call pointer is valid only until the func
// returns.
type ToolFunc func(ctx context.Context, call *ToolCall) (any, error)

// ToolRequest is one tool call as the caller makes it.
type ToolRequest struct {
	// Name is the tool (a key of Deps.Tools).
	Name string `json:"name"`
	// Args are the arguments as decoded from JSON (DecodeArgs: numbers
	// float64, an integer only int64 holds exactly int64). A number that
	// neither holds exactly (a json.Number of such text) is refused on
	// entry to the tool chain by layer tools.
	Args map[string]any `json:"args"`
	// IdempotencyKey, when set, is used instead of the derived key (for
	// example the key of a redelivered job).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ToolCall is the state of one tool call as it passes through the layers. A
// pointer to it is valid only until the handler it was passed to returns.
type ToolCall struct {
	// Name is the tool called.
	Name string
	// Args are the arguments; layers treat them as read-only.
	Args map[string]any
	// Tool is the tool's declaration.
	Tool *ToolInfo
	// Meta is the call's metadata.
	Meta Meta

	entry     *toolEntry
	digest    string
	digestErr error
	// digester makes the arguments' digest: the pipeline's
	// (settings.digest_key_env), plain when it has no key.
	digester Digester
	// tainted reports that the terminal ran and tainted its raw result.
	tainted bool
	// interrupted is set (atomically: a layer may run the terminal on a
	// goroutine of its own) when the tool's last run returned an error
	// after its context had ended: it was running when the call was
	// cancelled. A tool that answered its own error before that (a refusal,
	// a rate limit) leaves it unset.
	interrupted int32
	// delegated is set (atomically) when the tool, running for this
	// call, ran an agent turn that started a call that would repeat an
	// effect (Delegated): taken, when the tool returns, from the marks of
	// the node its context carried (agentCall.takeMarks).
	delegated int32
	// delegatedRan is set (atomically), so too, when such a call, or one
	// that would repeat an effect that the tool made of its own, reached
	// its tool, or may have (markRan).
	delegatedRan int32
	// seen holds the keys of FirstSeen, the first two in place so that
	// the one meter of a typical chain allocates nothing (callMarks
	// guards both).
	seen     [2]any
	seenMore []any
}

// callMarks guards ToolCall.seen: a layer's attempts of one call may end
// on goroutines of their own.
var callMarks sync.Mutex

// FirstSeen reports whether key is new to c, and records it: a layer that
// a layer outside it (retry) runs again for the same call sees the same
// *ToolCall each time, and can tell an attempt of a call it has seen from
// a new call (a meter charges a retry_safe call once, however many times
// it is run again). A layer uses a key of its own (a pointer to itself).
func (c *ToolCall) FirstSeen(key any) bool {
	callMarks.Lock()
	defer callMarks.Unlock()
	if c.seenLocked(key) {
		return false
	}
	for i := range c.seen {
		if c.seen[i] == nil {
			c.seen[i] = key
			return true
		}
	}
	c.seenMore = append(c.seenMore, key)
	return true
}

// Seen reports whether FirstSeen recorded key for c.
func (c *ToolCall) Seen(key any) bool {
	callMarks.Lock()
	defer callMarks.Unlock()
	return c.seenLocked(key)
}

// seenLocked reports whether FirstSeen recorded key; callMarks is held.
func (c *ToolCall) seenLocked(key any) bool {
	for _, k := range c.seen {
		if k == key {
			return key != nil
		}
	}
	for _, k := range c.seenMore {
		if k == key {
			return true
		}
	}
	return false
}

// Delegated reports whether the tool, running for c, started a call that
// would repeat an effect (side_effecting and not retry_safe, or
// undeclared): through an agent turn it ran (a tool that delegates, at any
// depth), flagged when that call starts, or of its own (Pipeline.Tool from
// inside the tool, at any depth), flagged once that call reached its tool,
// or may have. Run again, the tool would run that turn anew, whose model
// could make the call again, or make its own call again. Such a call is
// side-effecting and not retry_safe, whatever its tool declares: a layer
// that runs a failed call again (retry) must not, unless the failure
// proves it did not run (DidNotRun), which a refusal the tool returns
// after such a call reached its tool does not: the runtime marks it
// MayHaveRun (in doubt). An own call refused before it ran (DidNotRun)
// does not flag the tool's call: run again, the tool makes it anew. It is
// known for every call of the tool chain, an agent turn's, one the host
// makes outside an agent turn (Pipeline.Tool) and one a tool makes of its
// own: the tool's context carries a node for the call, which the agent
// turns and own calls it runs, at any depth, mark, and which the call
// takes its marks from when the tool returns.
func (c *ToolCall) Delegated() bool {
	return atomic.LoadInt32(&c.delegated) != 0 || atomic.LoadInt32(&c.delegatedRan) != 0
}

// ArgsDigest returns the digest of the canonical JSON of the arguments
// (object keys sorted, numbers as jsonnum.Canonical writes them: equal
// numbers alike, 0 and -0, a json.Number 100.0 and the float64 100): the
// hex SHA-256, or, when the pipeline has a digest key
// (settings.digest_key_env), KeyedDigestPrefix and the hex HMAC-SHA256
// under it (Digester.Args). "" when the arguments cannot be canonicalised
// (a NaN or infinite number, a channel or func value): see ArgsDigestErr.
func (c *ToolCall) ArgsDigest() string {
	d, _ := c.ArgsDigestErr()
	return d
}

// ArgsDigestErr returns the arguments' digest (see ArgsDigest), or "" and
// the encoding error when the arguments cannot be canonicalised. Layers that
// key state on the arguments must check the error: such calls have no
// digest and must not share one.
func (c *ToolCall) ArgsDigestErr() (string, error) {
	if c.digest == "" && c.digestErr == nil {
		c.digest, c.digestErr = c.digester.Args(c.Args)
	}
	return c.digest, c.digestErr
}

// Digester returns the Digester of c's digests: the pipeline's, keyed when
// the policy sets settings.digest_key_env.
func (c *ToolCall) Digester() Digester { return c.digester }

// PlainForm returns c as a pipeline without a digest key sees it: a copy
// whose digest is plain and whose idempotency key, when derived, is
// derived from that digest; c itself when its digests are plain. A layer
// looks up with it what it stored of the call before a deployment set the
// key.
func (c *ToolCall) PlainForm() *ToolCall {
	if !c.digester.Keyed() {
		return c
	}
	p := &ToolCall{Name: c.Name, Args: c.Args, Tool: c.Tool, Meta: c.Meta, entry: c.entry}
	if c.Meta.keyDerived {
		p.Meta.IdempotencyKey, p.Meta.keyDerived = "", false
	}
	return p
}

// IdempotencyKey returns the call's idempotency key: the caller's, or one
// derived from the run id, the tool name and the canonical arguments, so that
// the same logical call has the same key across retries and redeliveries.
// When the arguments cannot be canonicalised (ArgsDigestErr) the derived key
// is random: unique to this call (still the same across its retries), never
// shared with another call.
func (c *ToolCall) IdempotencyKey() string {
	if c.Meta.IdempotencyKey == "" {
		d, err := c.ArgsDigestErr()
		if err != nil {
			d = rand.Text()
		}
		c.Meta.IdempotencyKey, c.Meta.keyDerived = digest("tool", c.Meta.Run.ID, []byte(c.Name+"\x00"+d)), true
	}
	return c.Meta.IdempotencyKey
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	// Value is the tool's result.
	Value any `json:"result"`
	// Attempts is the attempt count stamped by retry (1 without retry).
	Attempts int `json:"attempts"`
	// Deduped reports a replayed result (idempotent).
	Deduped bool `json:"deduped"`
	// Cached reports a result served from a cache.
	Cached bool `json:"cached,omitempty"`
}

// TurnFunc runs the body of one agent turn and returns its output text. Chat
// and tool calls made with ctx belong to the turn's run.
type TurnFunc func(ctx context.Context) (string, error)

// TurnRequest is one agent turn: one inbox message.
type TurnRequest struct {
	// Input is the inbox message's text.
	Input string `json:"input"`
	// Session identifies the conversation (the CEL variable `session`).
	Session Session `json:"session,omitzero"`
}

// Session is a conversation.
type Session struct {
	ID   string         `json:"id,omitempty"`
	Meta map[string]any `json:"meta,omitempty"`
}

// TurnCall is the state of one turn as it passes through the layers.
type TurnCall struct {
	// Input is the turn's input text.
	Input string
	// Session is the conversation.
	Session Session
	// Meta is the call's metadata.
	Meta Meta

	fn TurnFunc
	pl *Pipeline
	// parent is the turn, of any pipeline or run, whose body this one
	// runs in (nil: none), which enclosingTurn looks up the chain of.
	parent *TurnCall
	// agent marks RunAgent's own turn (TurnCall.handOver).
	agent bool
	// outermost is the turn holding the run that this one is nested in
	// (Pipeline.Turn in the body of a turn of the same run and pipeline),
	// or this one: the agent turns run in the bodies of them all record
	// one transcript, the run's (holdAgent).
	outermost *TurnCall
	// ends are what the layers asked to do at the turn's end (AtEnd),
	// each with the depth in the chain of the layer that asked; depth is
	// that of the layer running now (attemptAt).
	ends  []turnEnd
	depth int
	// mu guards earlier and withhold, which agent turns nested in the
	// body may add to from goroutines of their own.
	mu      sync.Mutex
	earlier []string
	// body and bodyErr are what the turn's body returned (ran: it ran;
	// runs: the attempts that ran it, TurnResult.Attempts), and withhold
	// what withholds the text of the agent turns run in it (RunAgent's
	// own and those nested in it) when the chain refuses it (refused,
	// onRefused).
	body     string
	bodyErr  error
	ran      bool
	runs     int
	withhold []func()
}

// Earlier returns the text each earlier answer of the turn wrote beside
// its tool calls, in order: RunAgent sets them (every answer of the turn
// but the last, whose text is the output; every answer of a turn whose
// body failed with an error that is not final; the answers that wrote none
// left out) once its body has returned, and a Pipeline.Turn body with
// AddEarlier; a turn nested in the body that its own chain let through
// adds those of its own body once it returned. They reach the host in the
// turn's transcript as the output does, so a layer that reads the output
// to decide what a user may see (content_filter, an after-phase guard)
// reads each of them too, and a refusal withholds them with the output.
// Empty until the body returned.
func (c *TurnCall) Earlier() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.earlier)
}

type turnCallKey struct{}

// AddEarlier adds texts to the texts of the turn's earlier answers
// (TurnCall.Earlier) of the turn whose body ctx is, for a host that runs
// its own turns (Pipeline.Turn) and shows its user more than the output;
// outside a turn's body it does nothing. The texts an agent turn run in
// the body added are kept.
func AddEarlier(ctx context.Context, texts []string) {
	if c, ok := ctx.Value(turnCallKey{}).(*TurnCall); ok {
		c.mu.Lock()
		c.earlier = append(c.earlier, texts...)
		c.mu.Unlock()
	}
}

// AtEnd has fn run once the whole turn chain has returned, with the turn's
// error as the outermost layer returned it: a layer that records the turn
// (a checkpoint's save) then records what every layer decided, a refusal
// by a layer outside it included, and not an output a layer outside it
// refused. The functions run in the order they were added, after a
// refused turn's answers' text was withheld (TurnResult.Withheld); an
// error one returns is joined to the turn's, which no layer of the chain
// sees. A layer that runs the layers inside it again (a host's
// retry) abandons their earlier attempt: what they added during it is
// dropped when they are entered again, so only the ends of the attempt
// that returned run, once each. Attempts run one after another: a layer
// must not run the layers inside it concurrently with one TurnCall. A
// turn run in the body of a turn of the same run and pipeline (a
// scenario's turn step around an agent step, a tool of an agent turn that
// runs an agent turn) is part of that turn: its ends do not run, the
// outer turn's do once it returned.
func (c *TurnCall) AtEnd(fn func(err error) error) {
	c.ends = append(c.ends, turnEnd{fn, c.depth})
}

// turnEnd is a function to run at a turn's end (AtEnd) and the depth in
// the turn chain of the layer that added it.
type turnEnd struct {
	fn    func(err error) error
	depth int
}

// IdempotencyKey returns the turn's idempotency key, derived from the run id
// and the input (keyed with the pipeline's digest key, when it has one)
// unless the caller supplied one.
func (c *TurnCall) IdempotencyKey() string {
	if c.Meta.IdempotencyKey == "" {
		// With a digest key the key is its HMAC: an audit record holds it
		// with the run id, and a short input would be found again by
		// digesting the candidates.
		var d Digester
		if c.pl != nil {
			d = c.pl.digester
		}
		c.Meta.IdempotencyKey, c.Meta.keyDerived = digestBy(d, "turn", c.Meta.Run.ID, []byte(c.Session.ID+"\x00"+c.Input)), true
	}
	return c.Meta.IdempotencyKey
}

// TurnResult is the outcome of a turn.
type TurnResult struct {
	// Output is the turn's output as the turn chain returned it: kept when
	// the turn ended well and only what a layer records at its end failed
	// (Pipeline.Turn's error says so).
	Output string `json:"output"`
	// Attempts is the number of the turn chain's attempts: the times its
	// layers ran the turn's body (a layer that runs the layers inside it
	// again, such as a host's retry, makes one more each time), or the
	// attempt count a layer stamped on the turn's Meta when that is more;
	// 1 for a turn run once (or refused before its body ran).
	Attempts int `json:"attempts"`
	// Withheld reports a turn whose body's outcome the turn chain refused
	// (a content_filter or an after-phase guard refused its output or the
	// text of an earlier answer; a body that failed other than final and
	// was then refused): the text of the answers of the agent turns run in
	// the body (RunAgent), and in the turns nested there that their own
	// chains let through, is withheld from the run's recorded transcript,
	// and a host that keeps a copy of their transcript withholds it from
	// that copy (WithholdAnswerTexts).
	Withheld bool `json:"withheld,omitempty"`
}

// Item is one retrieved grounding item (the CEL variable `item`).
type Item struct {
	// ID identifies the item in grounding records (optional).
	ID       string         `json:"id,omitempty"`
	Content  string         `json:"content"`
	Source   string         `json:"source,omitempty"`
	Score    float64        `json:"score"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Status names the outcome of a call for after-phase predicates (a turn's
// `status`, which an after-phase guard reads only for "ok" and "failed":
// it does not evaluate a turn that ended final), logs and spans: "ok",
// "blocked", "budget", "in_doubt" (a
// side-effecting call that may have had its effect, or ran and whose
// outcome was not recorded: not a failure to try again, a person settles
// it) or "failed".
func Status(err error) string {
	if c := Classify(err); c != ClassFailure {
		return c.String()
	}
	return "failed"
}

func digest(kind, run string, b []byte) string { return digestBy(Digester{}, kind, run, b) }

// digestBy is digest hashed with d: an HMAC-SHA256 under its key when it
// has one.
func digestBy(d Digester, kind, run string, b []byte) string {
	h := d.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(run))
	h.Write([]byte{0})
	h.Write(b)
	var sum [sha256.Size]byte
	return kind + "-" + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// EstimateMessages estimates the input tokens of a transcript: the text of
// each message, its parts and its tool calls' names and arguments, plus a
// small per-message overhead. An image counts the most a provider bills for
// its size, read from the header of its bytes (Data or a base64 data: URL):
// the larger of OpenAI's count (85 tokens plus 170 a 512-pixel tile at high
// detail, or a 32-pixel patch a token times gpt-4.1-nano's 2.46) and
// Anthropic's (width x height / 750, after its resize to 2576 pixels and
// 3.75 megapixels at most); an image known only by an http(s) URL, or whose
// header cannot be read, counts MaxImageTokens. A PDF document counts
// DocumentPageTokens a page, a redacted_thinking block a token every
// RedactedThinkingBytesPerToken bytes of its encrypted data.
func EstimateMessages(msgs []Message) int64 {
	var n int64
	for i := range msgs {
		m := &msgs[i]
		n += EstimateTokens(m.Content) + 4
		for j := range m.Parts {
			switch m.Parts[j].Type {
			case PartImage:
				n += imageTokens(&m.Parts[j])
			case PartDocument:
				n += documentTokens(&m.Parts[j])
			case PartRedactedThinking:
				n += redactedThinkingTokens(&m.Parts[j])
			default:
				n += EstimateTokens(m.Parts[j].Text)
			}
		}
		for j := range m.ToolCalls {
			n += EstimateTokens(m.ToolCalls[j].Name) + EstimateTokens(string(m.ToolCalls[j].Arguments))
		}
	}
	return n
}

// EstimateInput returns the usage the input of req is expected to bill:
// EstimateRequest as input tokens. A request that marks a prompt cache
// breakpoint may write all of its input to the cache, which costs more
// than input: it is estimated as written (CacheWriteInputTokens), and to
// one-hour entries (CacheWrite1hInputTokens) when a breakpoint asks for
// one.
func EstimateInput(req *ChatRequest) Usage {
	u := Usage{InputTokens: EstimateRequest(req)}
	if cached, hour := breakpoints(req); cached {
		u.CacheWriteInputTokens = u.InputTokens
		if hour {
			u.CacheWrite1hInputTokens = u.InputTokens
		}
	}
	return u
}

// breakpoints reports whether req marks a prompt cache breakpoint (at the
// top, on a part, a tool call or a tool), and whether one asks for a
// one-hour entry.
func breakpoints(req *ChatRequest) (cached, hour bool) {
	see := func(cc *CacheControl) {
		if cc != nil {
			cached = true
			hour = hour || cc.TTL == "1h"
		}
	}
	see(req.CacheControl)
	for i := range req.Tools {
		see(req.Tools[i].CacheControl)
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		for j := range m.Parts {
			see(m.Parts[j].CacheControl)
		}
		for j := range m.ToolCalls {
			see(m.ToolCalls[j].CacheControl)
		}
	}
	return cached, hour
}

// EstimateRequest estimates the input tokens of a whole request: its
// messages (EstimateMessages), the tools it offers (names, descriptions,
// parameter schemas and custom tools' grammars) and its response format's schema, all of which the
// provider reads and bills.
func EstimateRequest(req *ChatRequest) int64 {
	n := EstimateMessages(req.Messages)
	for i := range req.Tools {
		t := &req.Tools[i]
		n += EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(t.Parameters))
		if t.Custom != nil {
			n += EstimateTokens(t.Custom.Definition)
		}
	}
	if f := req.ResponseFormat; f != nil {
		n += EstimateTokens(f.Name) + EstimateTokens(string(f.Schema))
	}
	return n
}

// Duration is a duration that decodes from a Go duration string ("250ms",
// "30s") in plan configs and encodes back to one.
type Duration time.Duration

// UnmarshalJSON decodes a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: durationType}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("%q: %w", s, errNegativeDuration)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON encodes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// OwnCall returns a new chat call for a request a layer makes of its own (a
// judge's verdict, a summary), in the run of parent (nil: no run). A layer
// passes it to the next handler of its WrapChat, the chain below its own
// layer: the layers inside it apply to the request as to any call (meters
// charge it, retries retry it, tracing traces it), and the layer never sees
// its own request. The new call's Tools are empty, not the declared tools.
// Its model calls are not the caller's: what their model clients report
// (ReportServedModel, ReportUpstreamRequestID) does not reach the notes of
// the context (IsOwnCall), and what they bill is listed apart, in the
// OwnCharges of parent's response.
func OwnCall(parent *ChatCall, req ChatRequest) *ChatCall {
	c := &ChatCall{Request: req, Meta: Meta{Attempts: 1}, own: true, askedMaxTokens: req.MaxTokens}
	if parent != nil {
		c.Meta.Run = parent.Meta.Run
		c.owned = parent.ownedList()
		c.digester = parent.digester
	}
	return c
}

// URLRefs returns every URL argument reference of the tool (URLArgs, else
// URLArg), nil when it has none.
func (t *ToolInfo) URLRefs() []string { return refs(t.URLArgs, t.URLArg) }

// PathRefs returns every path argument reference of the tool (PathArgs,
// else PathArg), nil when it has none.
func (t *ToolInfo) PathRefs() []string { return refs(t.PathArgs, t.PathArg) }

func refs(list []string, one string) []string {
	if len(list) > 0 {
		return list
	}
	if one != "" {
		return []string{one}
	}
	return nil
}

// ErrRunBusy is in the error of a turn (Pipeline.Turn, RunAgent) refused
// because another turn of its run is under way in the process while the
// run is recorded (a checkpoint layer, or a Checkpointer): two turns of one
// run at once would each record the run's transcript, the later
// overwriting the earlier, and a checkpoint would save a run that lacks a
// turn whose tools ran. Nothing of the refused turn runs (DidNotRun
// holds, as for ErrClosed); it may be tried again once the other returned.
var ErrRunBusy = errors.New("another turn of the run is under way")

// OfferedTools returns the names of the tools a turn of params offers the
// model, which are the only ones its calls may run: none under ToolChoice
// "none", the one a ToolChoice names, else those of params.Tools; nil
// when params.Tools is nil (the policy's declared tools are offered, and
// the tool chain decides what runs, settings.allow_undeclared_tools
// included). A model answer's call to another tool (an injected
// instruction naming the refund tool of a read-only turn) does not run
// (RunAgent), and the gateway does not relay it (serve).
func OfferedTools(params ChatRequest) map[string]bool {
	switch params.ToolChoice {
	case "none":
		return map[string]bool{}
	case "", "auto", "required":
	default:
		return map[string]bool{params.ToolChoice: true}
	}
	if params.Tools == nil {
		return nil
	}
	set := make(map[string]bool, len(params.Tools))
	for _, td := range params.Tools {
		set[td.Name] = true
	}
	return set
}
