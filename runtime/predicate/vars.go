package predicate

import (
	"encoding/json"

	"github.com/google/cel-go/interpreter"
)

// Activation supplies the variables of one evaluation. ChatVars, ToolVars, TurnVars and
// AdmitVars are the activations of the four stages; any interpreter.Activation works.
type Activation = interpreter.Activation

// RunInfo is the CEL variable `run`: the agent run a call belongs to.
type RunInfo struct {
	ID    string         // run.id
	Agent string         // run.agent
	Meta  map[string]any // run.meta, map(string, dyn)
}

// Message is one transcript entry, the element type of `messages` and `request.messages`.
type Message struct {
	Role       string // role
	Content    string // content
	Name       string // name
	ToolCallID string // tool_call_id
	// ToolCalls are an assistant message's tool calls (tool_calls): what
	// the model asked for earlier in the conversation.
	ToolCalls []ToolCall
}

// ChatRequest is the CEL variable `request` of the chat stage.
type ChatRequest struct {
	Model     string    // request.model
	Messages  []Message // request.messages; also the variable `messages`
	MaxTokens int64     // request.max_tokens
	Tools     []ToolDef // request.tools: the tools offered to the model
	Params    Params    // request.params
}

// ToolDef is a tool offered to the model, the element type of `request.tools`.
type ToolDef struct {
	Name        string // name
	Description string // description
}

// Params is the CEL object `request.params`: the request's sampling and output parameters.
// has() on temperature, top_p and seed is true when the request sets them (even to zero).
type Params struct {
	Temperature    *float64          // temperature (0.0 when unset)
	TopP           *float64          // top_p (0.0 when unset)
	Stop           []string          // stop, list(string)
	Seed           *int64            // seed (0 when unset)
	ToolChoice     string            // tool_choice: "", auto, none, required or a tool name
	ResponseFormat string            // response_format: the format's type, "" when unset
	Metadata       map[string]string // metadata, map(string, string)
}

// ToolCall is a tool call the model requested, the element type of `response.tool_calls`.
// Arguments is decoded when `args` is read (map(string, dyn)); arguments that are not a JSON
// object make the read an evaluation error.
type ToolCall struct {
	ID        string          // id
	Name      string          // name
	Arguments json.RawMessage // args
}

// Usage is the token usage of a model response.
type Usage struct {
	InputTokens           int64 // input_tokens
	OutputTokens          int64 // output_tokens
	CachedInputTokens     int64 // cached_input_tokens, part of input_tokens read from the prompt cache
	CacheWriteInputTokens int64 // cache_write_input_tokens, part of input_tokens written to the prompt cache
	// cache_write_1h_input_tokens, part of cache_write_input_tokens written
	// to one-hour cache entries
	CacheWrite1hInputTokens int64
	ReasoningTokens         int64 // reasoning_tokens, part of output_tokens
}

// ChatResponse is the CEL variable `response` of the chat stage, after phase.
type ChatResponse struct {
	Text         string     // response.text
	Model        string     // response.model
	Usage        Usage      // response.usage
	ToolCalls    []ToolCall // response.tool_calls
	FinishReason string     // response.finish_reason: stop, length, tool_calls, content_filter, pause_turn or ""
	Refusal      bool       // response.refusal: the text is the model's refusal to answer
}

// ToolInfo is the CEL variable `tool`: the declaration of the called tool.
type ToolInfo struct {
	Name          string // tool.name
	SideEffecting bool   // tool.side_effecting
	RetrySafe     bool   // tool.retry_safe
	URLArg        string // tool.url_arg (the first reference of a list)
	PathArg       string // tool.path_arg
}

// TurnInput is the CEL variable `input` of the turn stage.
type TurnInput struct {
	Text string // input.text
}

// SessionInfo is the CEL variable `session` of the turn stage.
type SessionInfo struct {
	ID   string         // session.id
	Meta map[string]any // session.meta, map(string, dyn)
}

// TurnOutput is the CEL variable `output` of the turn stage, after phase: the turn's output,
// or the text an earlier answer of the turn wrote beside its tool calls, which an after-phase
// guard reads as an output too.
type TurnOutput struct {
	Text string // output.text
	// Final is output.final: true when Text is the turn's output (its final answer's text, ""
	// for a turn that failed), false when it is an earlier answer's text.
	Final bool
}

// Item is the CEL variable `item` of the admit stage: one retrieved grounding item.
type Item struct {
	ID       string         // item.id ("" when the host gave none)
	Content  string         // item.content
	Source   string         // item.source
	Score    float64        // item.score
	Metadata map[string]any // item.metadata, map(string, dyn)
}

// ChatVars is the activation of the chat stage. `messages` resolves to Request.Messages.
// `response` resolves only when HasResponse is set (after phase); reading it otherwise is an
// evaluation error. Pass it by pointer; ResolveName allocates nothing.
type ChatVars struct {
	Run         RunInfo
	Request     ChatRequest
	Response    ChatResponse
	HasResponse bool
}

// ResolveName implements interpreter.Activation.
func (v *ChatVars) ResolveName(name string) (any, bool) {
	switch name {
	case "request":
		return &v.Request, true
	case "messages":
		return &v.Request.Messages, true
	case "run":
		return &v.Run, true
	case "response":
		if v.HasResponse {
			return &v.Response, true
		}
	}
	return nil, false
}

// Parent implements interpreter.Activation; it is always nil.
func (v *ChatVars) Parent() Activation { return nil }

// ToolVars is the activation of the tool stage. Args is the call's arguments as decoded from
// JSON (numbers as float64 or json.Number); it is read, never modified. `result` resolves only
// when HasResult is set (after phase).
type ToolVars struct {
	Run       RunInfo
	Tool      ToolInfo
	Args      map[string]any
	Result    any
	HasResult bool
}

// ResolveName implements interpreter.Activation.
func (v *ToolVars) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		return jsonObject(v.Args), true
	case "tool":
		return &v.Tool, true
	case "run":
		return &v.Run, true
	case "result":
		if v.HasResult {
			return jsonValue(v.Result), true
		}
	}
	return nil, false
}

// Parent implements interpreter.Activation; it is always nil.
func (v *ToolVars) Parent() Activation { return nil }

// TurnVars is the activation of the turn stage. `output` and `status` resolve only when
// HasOutput is set (after phase).
type TurnVars struct {
	Run       RunInfo
	Input     TurnInput
	Session   SessionInfo
	Output    TurnOutput
	Status    string
	HasOutput bool
}

// ResolveName implements interpreter.Activation.
func (v *TurnVars) ResolveName(name string) (any, bool) {
	switch name {
	case "input":
		return &v.Input, true
	case "session":
		return &v.Session, true
	case "run":
		return &v.Run, true
	case "output":
		if v.HasOutput {
			return &v.Output, true
		}
	case "status":
		if v.HasOutput {
			return &v.Status, true
		}
	}
	return nil, false
}

// Parent implements interpreter.Activation; it is always nil.
func (v *TurnVars) Parent() Activation { return nil }

// AdmitVars is the activation of the admit stage.
type AdmitVars struct {
	Item Item
}

// ResolveName implements interpreter.Activation.
func (v *AdmitVars) ResolveName(name string) (any, bool) {
	if name == "item" {
		return &v.Item, true
	}
	return nil, false
}

// Parent implements interpreter.Activation; it is always nil.
func (v *AdmitVars) Parent() Activation { return nil }
