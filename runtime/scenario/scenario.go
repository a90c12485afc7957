// Package scenario runs `agentc run` scenarios (docs/scenarios.md): JSON
// documents that script fake models and tools and list the calls to make
// through a compiled plan's pipeline.
//
// Parse decodes and checks a scenario; Run builds the plan's pipeline over
// fakes that follow the scripts, with in-memory state, makes the calls in
// order and returns a Result that marshals to the documented JSON:
//
//	{"steps": [...], "executions": {"models": {...}, "tools": {...}},
//	 "audit": [...], "meter": {...}}
//
// Script items. A model item streams `text` as one delta or each element of
// `deltas` as its own delta, then each of its `tool_calls` ({name, args},
// optional id) as two tool-call fragments (the id, the name and the first
// half of the JSON arguments, then the rest). It reports `usage` and its
// `finish_reason` ("tool_calls" by default when it calls tools, none
// otherwise) on the last delta, and with `fail_after` N fails after N deltas
// (without a usage report). An item with
// `error` ("transient", "rate_limited" with `retry_after_ms`, "timeout",
// "permanent") fails before the first delta. `delay_ms` (an extension) waits
// before the first delta, respecting cancellation, which lets hedge races be
// scripted; delays pass on the run's clock (a virtual one unless the caller
// gives another), so a scenario never sleeps. A tool item returns `result`
// or fails with `error`; `crash` (an extension) stands for the process dying
// while the tool runs: the tool has run, nothing is written durably any more
// (the audit sink takes no further record), the step ends "crash" and the
// remaining steps do not run. Each call
// consumes the next item of its model or tool; a call past the end of a
// script fails permanently.
//
// Steps. `chat` sends {model, messages, max_tokens, tools, tool_choice,
// temperature, top_p, stop, seed, response_format, metadata} and with
// `consume` N abandons the stream after N deltas; its result carries the
// delivered text, tool calls and finish reason. `tool` calls {name, args}.
// `agent` runs one function-calling agent turn (runtime.Pipeline.RunAgent)
// over the scripted models and tools. `admit`
// filters {items} with the plan's admission predicate; with a grounding
// section it also renders and records them as retrieved for {query}. `turn` runs {input,
// steps} through the turn chain: its nested steps run in order until one does
// not end ok (its error ends the turn), and the turn's output is the text of
// its last chat or agent step. `parallel` (an extension) runs its nested steps
// concurrently, as duplicate deliveries of a call would; it ends ok when all
// of them did, else with the outcome of the first that did not.
//
// Retrieval. With a grounding section and a `retrieval` script, the model
// calls retrieve as a host's would (runtime.Deps.Retriever): each retrieval
// takes the next item, which returns its `items` or fails with `error`; a
// retrieval past the end of the script fails permanently. Executions count
// those that took an item under `retrievals`, and a grounding audit record shows its items
// under `grounding`.
//
// DNS. Host names (egress's URL check) resolve from the scenario's `dns`
// stub, a name it does not list is not found: no lookup reaches a DNS
// server. A stub under a pipeline none of whose layers asked for the
// resolver (runtime.Pipeline.AsksResolver) is refused: nothing would read
// it.
//
// Every step's result lists the `requests` its fake models received, in
// order of arrival, as the models saw them: after every layer of the chat
// chain (compaction, redaction, fallback's model), with the tools offered
// and the parameters.
package scenario

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/runtime"
)

// Scenario is a parsed scenario.
type Scenario struct {
	// RunID is the run id of every call (default "run-1").
	RunID string `json:"run_id,omitempty"`
	// Models scripts the fake models by name.
	Models map[string][]ModelItem `json:"models,omitempty"`
	// Tools scripts the fake tools by name.
	Tools map[string][]ToolItem `json:"tools,omitempty"`
	// Retrieval scripts the host's retrieval (runtime.Deps.Retriever) of a
	// policy with a grounding section: each retrieval takes the next item.
	// Without it, nothing is retrieved.
	Retrieval []RetrievalItem `json:"retrieval,omitempty"`
	// Steps are the calls to make, in order.
	Steps []Step `json:"steps"`
	// HoldBackground holds the state's background sinks until the steps
	// are done (runtime.Deps.StateHold): events past the queue's capacity
	// are dropped, deterministically.
	HoldBackground bool `json:"hold_background,omitempty"`
	// DNS stubs the host names the layers look up (egress): each name's
	// addresses. A name it does not list is not found; no lookup reaches a
	// real DNS server.
	DNS map[string][]string `json:"dns,omitempty"`

	// src is the JSON text the scenario was parsed from, which places
	// the problems Run finds (nil for an evaluated scenario).
	src []byte
}

// The fake error kinds.
const (
	ErrTransient   = "transient"
	ErrRateLimited = "rate_limited"
	ErrTimeout     = "timeout"
	ErrPermanent   = "permanent"
	// ErrRefused is the provider's refusal to serve (a rejected key, an
	// account without credit: a 401): permanent, and marked
	// runtime.ErrProviderRefused, so a fallback falls over on it.
	ErrRefused = "refused"
)

// ModelItem is one scripted model response.
type ModelItem struct {
	Text   *string  `json:"text,omitempty"`
	Deltas []string `json:"deltas,omitempty"`
	// Refusal is the model's refusal to answer, streamed as one delta
	// marked runtime.Delta.Refusal (OpenAI's refusal); it excludes Text,
	// Deltas and ToolCalls, and the finish reason defaults to
	// content_filter, as the providers report one.
	Refusal string `json:"refusal,omitempty"`
	// ToolCalls are the tool calls the response requests, streamed after
	// the text as tool-call fragments.
	ToolCalls []ScriptedCall `json:"tool_calls,omitempty"`
	// FinishReason rides on the last delta ("tool_calls" when ToolCalls
	// are set and it is empty, "content_filter" with Refusal).
	FinishReason string         `json:"finish_reason,omitempty"`
	Usage        *runtime.Usage `json:"usage,omitempty"`
	Error        string         `json:"error,omitempty"`
	RetryAfterMS int            `json:"retry_after_ms,omitempty"`
	FailAfter    *int           `json:"fail_after,omitempty"`
	DelayMS      int            `json:"delay_ms,omitempty"`
}

// ScriptedCall is a tool call a fake model requests.
type ScriptedCall struct {
	// ID identifies the call (default "call_<model>_<n>_<i>": the model,
	// its call number from 1 and the call's index in the response).
	ID string `json:"id,omitempty"`
	// Name is the tool.
	Name string `json:"name"`
	// Args are the arguments (default {}); any JSON value is sent as it is
	// encoded.
	Args any `json:"args,omitempty"`
}

// The finish reasons a model item may script.
var finishReasons = []string{runtime.FinishStop, runtime.FinishLength, runtime.FinishToolCalls, runtime.FinishContentFilter, runtime.FinishPauseTurn}

// ToolItem is one scripted tool response.
type ToolItem struct {
	Result       any    `json:"result,omitempty"`
	Error        string `json:"error,omitempty"`
	Crash        bool   `json:"crash,omitempty"`
	RetryAfterMS int    `json:"retry_after_ms,omitempty"`
	DelayMS      int    `json:"delay_ms,omitempty"`
}

// RetrievalItem is one scripted retrieval: the items found, or an error
// kind.
type RetrievalItem struct {
	Items        []runtime.Item `json:"items,omitempty"`
	Error        string         `json:"error,omitempty"`
	RetryAfterMS int            `json:"retry_after_ms,omitempty"`
}

// Step is one call; exactly one field is set.
type Step struct {
	Chat     *ChatStep  `json:"chat,omitempty"`
	Tool     *ToolStep  `json:"tool,omitempty"`
	Admit    *AdmitStep `json:"admit,omitempty"`
	Turn     *TurnStep  `json:"turn,omitempty"`
	Agent    *AgentStep `json:"agent,omitempty"`
	Parallel []Step     `json:"parallel,omitempty"`
	// State sets, appends or reads a state field.
	State *StateStep `json:"state,omitempty"`
	// Checkpoint saves the run (or finishes it); Crash kills the process
	// and starts another over the same stores; Resume restores the run
	// from its latest checkpoint.
	Checkpoint *CheckpointStep `json:"checkpoint,omitempty"`
	Crash      *struct{}       `json:"crash,omitempty"`
	Resume     *ResumeStep     `json:"resume,omitempty"`
}

// ChatStep is a model call.
type ChatStep struct {
	Model     string            `json:"model"`
	Messages  []runtime.Message `json:"messages"`
	MaxTokens int               `json:"max_tokens,omitempty"`
	// Tools are the tools offered (absent: the policy's declared tools;
	// an empty list: none).
	Tools []runtime.ToolDef `json:"tools,omitempty"`
	// ToolChoice, Temperature, TopP, Stop, Seed, ResponseFormat and
	// Metadata are the request's parameters (runtime.ChatRequest).
	ToolChoice     string                  `json:"tool_choice,omitempty"`
	Temperature    *float64                `json:"temperature,omitempty"`
	TopP           *float64                `json:"top_p,omitempty"`
	Stop           []string                `json:"stop,omitempty"`
	Seed           *int64                  `json:"seed,omitempty"`
	ResponseFormat *runtime.ResponseFormat `json:"response_format,omitempty"`
	Metadata       map[string]string       `json:"metadata,omitempty"`
	// ParallelToolCalls, CacheControl, Betas, Thinking and ReasoningEffort
	// are the provider-specific parameters (runtime.ChatRequest).
	ParallelToolCalls *bool                 `json:"parallel_tool_calls,omitempty"`
	CacheControl      *runtime.CacheControl `json:"cache_control,omitempty"`
	Betas             []string              `json:"betas,omitempty"`
	Thinking          *runtime.Thinking     `json:"thinking,omitempty"`
	ReasoningEffort   string                `json:"reasoning_effort,omitempty"`
	// Effort and ContextEdits are Anthropic's output_config.effort and
	// context_management.edits (runtime.ChatRequest).
	Effort       string                `json:"effort,omitempty"`
	ContextEdits []runtime.ContextEdit `json:"context_edits,omitempty"`
	// Verbosity is OpenAI's verbosity of the answer (runtime.ChatRequest).
	Verbosity string `json:"verbosity,omitempty"`
	// FrequencyPenalty, PresencePenalty, LogitBias, TopK,
	// SafetyIdentifier and PromptCacheKey are the provider-specific
	// sampling parameters and hints (runtime.ChatRequest).
	FrequencyPenalty *float64       `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64       `json:"presence_penalty,omitempty"`
	LogitBias        map[string]int `json:"logit_bias,omitempty"`
	TopK             *int           `json:"top_k,omitempty"`
	SafetyIdentifier string         `json:"safety_identifier,omitempty"`
	PromptCacheKey   string         `json:"prompt_cache_key,omitempty"`
	// Consume, when set, abandons the stream after that many deltas.
	Consume *int `json:"consume,omitempty"`
}

// request returns the chat request the step sends.
func (cs *ChatStep) request() runtime.ChatRequest {
	return runtime.ChatRequest{Model: cs.Model, Messages: cs.Messages, MaxTokens: cs.MaxTokens, Tools: cs.Tools,
		ToolChoice: cs.ToolChoice, Temperature: cs.Temperature, TopP: cs.TopP, Stop: cs.Stop, Seed: cs.Seed,
		ResponseFormat: cs.ResponseFormat, Metadata: cs.Metadata, ParallelToolCalls: cs.ParallelToolCalls,
		CacheControl: cs.CacheControl, Betas: cs.Betas, Thinking: cs.Thinking, ReasoningEffort: cs.ReasoningEffort,
		FrequencyPenalty: cs.FrequencyPenalty, PresencePenalty: cs.PresencePenalty, LogitBias: cs.LogitBias, TopK: cs.TopK,
		SafetyIdentifier: cs.SafetyIdentifier, PromptCacheKey: cs.PromptCacheKey, Effort: cs.Effort, ContextEdits: cs.ContextEdits,
		Verbosity: cs.Verbosity}
}

// AgentStep is one function-calling agent turn (runtime.AgentRequest): the
// model is called with the transcript, the tools it calls run through the
// tool chain, their results go back to it, until it answers without tool
// calls or max_steps model calls were made.
type AgentStep struct {
	Model    string            `json:"model"`
	Messages []runtime.Message `json:"messages,omitempty"`
	// Input, when set, is appended as a user message.
	Input   *string         `json:"input,omitempty"`
	Session runtime.Session `json:"session,omitzero"`
	// Params is the template of every model call (tools, tool_choice,
	// sampling parameters, max_tokens...); its model and messages are
	// ignored.
	Params *ChatStep `json:"params,omitempty"`
	// MaxSteps bounds the model calls (absent: 8), MaxParallel the tool
	// calls of one step running at once (absent: 4), MaxToolCalls the tool
	// calls of one answer (absent: 64); each is at least 1.
	MaxSteps     *int `json:"max_steps,omitempty"`
	MaxParallel  *int `json:"max_parallel,omitempty"`
	MaxToolCalls *int `json:"max_tool_calls,omitempty"`
	// OnBlock is "tell_model" (default) or "end_turn".
	OnBlock string `json:"on_block,omitempty"`
	// Continue starts from the run's recorded transcript (after a resume,
	// the checkpoint's), before Messages and Input.
	Continue bool `json:"continue,omitempty"`
}

// ToolStep is a tool call.
type ToolStep struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
}

// AdmitStep filters grounding items; with a grounding section it also
// renders and records them as retrieved for Query (runtime.Pipeline.Ground).
type AdmitStep struct {
	Items []runtime.Item `json:"items"`
	Query string         `json:"query,omitempty"`
}

// TurnStep is an agent turn wrapping nested steps.
type TurnStep struct {
	Input   string          `json:"input"`
	Session runtime.Session `json:"session,omitzero"`
	Steps   []Step          `json:"steps"`
}

// Parse decodes a JSON scenario strictly (unknown fields are errors) and
// checks it. Errors name the offending place, for example
// "steps[1].tool: name is required" or
// `line 3, col 5: steps[1].tool: unknown field "nme"; did you mean "name"?`.
func Parse(data []byte) (*Scenario, error) { return parse(data, true) }

// ParseEvaluated is Parse for a scenario evaluated from another source (a
// CUE file, a case of a test file): its errors name the place by path
// only, since a line and column would count in the generated JSON.
func ParseEvaluated(data []byte) (*Scenario, error) { return parse(data, false) }

func parse(data []byte, positions bool) (*Scenario, error) {
	src := data
	if !positions {
		src = nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		var te *json.UnmarshalTypeError
		if strings.HasPrefix(err.Error(), "json: unknown field ") || errors.As(err, &te) {
			if us := findUnknown(data); len(us) > 0 {
				e := &Error{}
				for _, u := range us {
					p := Problem{Message: u.message()}
					if positions {
						p.Line, p.Col = lineColOf(data, int(u.off))
					}
					e.Problems = append(e.Problems, p)
				}
				return nil, e
			}
		}
		p := jsonError(data, dec, err)
		if !positions {
			p.Line, p.Col = 0, 0
		}
		return nil, &Error{Problems: []Problem{p}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Problems: []Problem{{Message: "trailing data after the scenario object"}}}
	}
	if positions {
		if p := repeatedKey(data); p != nil {
			return nil, &Error{Problems: []Problem{*p}}
		}
	}
	exactNumbers(reflect.ValueOf(&s))
	if errs := s.check(); len(errs) > 0 {
		return nil, problems(src, errs)
	}
	s.src = src
	return &s, nil
}

// exactNumbers turns each json.Number decoded into a free-form value of v
// (tool arguments, scripted calls and results, metadata) into the value a
// real call's arguments decode to (runtime.DecodeArgs): a float64, as
// encoding/json gives it, where float64 holds the number exactly; an int64
// for an integer only int64 holds; else the json.Number, which the tool
// chain refuses as it refuses such a number in a real call. A scenario
// runs with the numbers it writes, never a float64 neighbour of one.
func exactNumbers(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			exactNumbers(v.Elem())
		}
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			switch x := v.Interface().(type) {
			case json.Number, map[string]any, []any:
				v.Set(reflect.ValueOf(jsonnum.Convert(x)))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				exactNumbers(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if holdsAny(v.Type().Elem()) {
			for i := range v.Len() {
				exactNumbers(v.Index(i))
			}
		}
	case reflect.Map:
		if m, ok := v.Interface().(map[string]any); ok {
			jsonnum.Convert(m)
			return
		}
		if !holdsAny(v.Type().Elem()) {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			exactNumbers(e)
			v.SetMapIndex(k, e)
		}
	}
}

// holdsAny reports whether a value of t may hold a free-form value (an
// interface, or a pointer, struct, slice, array or map that may hold one).
func holdsAny(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Struct, reflect.Slice, reflect.Array, reflect.Map:
		return true
	}
	return false
}

// repeatedKey returns the first key of data that repeats a key of the same
// object, placed at it: encoding/json keeps the last of two, so a script's
// first answers or a step's first field would be dropped unseen.
func repeatedKey(data []byte) *Problem {
	var p *Problem
	w := jsonwalk.Walker{Repeat: func(_ []byte, key string, start, _ int64) bool {
		line, col := jsonwalk.Position(data, start)
		p = &Problem{Line: line, Col: col, Message: fmt.Sprintf("key %q repeats a key of the same object (only the last would count)", key)}
		return false
	}}
	_ = w.Walk(data) // the text decoded: it is one JSON value
	return p
}

// jsonError places a decoding error at a line and column.
func jsonError(data []byte, dec *json.Decoder, err error) Problem {
	off := -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = int(se.Offset)
	case errors.As(err, &te):
		off = int(te.Offset)
		if te.Field != "" {
			err = fmt.Errorf("%s: cannot use %s as %s", te.Field, te.Value, te.Type)
		}
	default:
		off = int(dec.InputOffset())
	}
	p := Problem{Message: strings.TrimPrefix(err.Error(), "json: ")}
	if off >= 0 && off <= len(data) {
		p.Line, p.Col = lineColOf(data, off)
	}
	return p
}

// check returns the scenario's problems, in the scenario's order.
func (s *Scenario) check() []error {
	var errs []error
	for name, items := range s.Models {
		for i, it := range items {
			if err := it.check(); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", fieldpath.Join("models", name), i, err))
			}
		}
	}
	for name, items := range s.Tools {
		for i, it := range items {
			if err := checkError(it.Error, it.RetryAfterMS); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", fieldpath.Join("tools", name), i, err))
			} else if it.Error == ErrRefused {
				errs = append(errs, fmt.Errorf("%s[%d]: error %q is a model provider's; a tool fails with transient, rate_limited, timeout or permanent", fieldpath.Join("tools", name), i, ErrRefused))
			}
			if it.Error != "" && it.Result != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: result and error exclude each other", fieldpath.Join("tools", name), i))
			}
			if it.Crash && (it.Error != "" || it.Result != nil) {
				errs = append(errs, fmt.Errorf("%s[%d]: crash excludes result and error", fieldpath.Join("tools", name), i))
			}
			if it.DelayMS < 0 {
				errs = append(errs, fmt.Errorf("%s[%d]: delay_ms must not be negative", fieldpath.Join("tools", name), i))
			}
		}
	}
	for i, it := range s.Retrieval {
		if err := checkError(it.Error, it.RetryAfterMS); err != nil {
			errs = append(errs, fmt.Errorf("retrieval[%d]: %w", i, err))
		} else if it.Error == ErrRefused {
			errs = append(errs, fmt.Errorf("retrieval[%d]: error %q is a model provider's; a retrieval fails with transient, rate_limited, timeout or permanent", i, ErrRefused))
		}
		if it.Error != "" && it.Items != nil {
			errs = append(errs, fmt.Errorf("retrieval[%d]: items and error exclude each other", i))
		}
	}
	for _, host := range slices.Sorted(maps.Keys(s.DNS)) {
		addrs := s.DNS[host]
		if host == "" || strings.ContainsAny(host, "/:@ ") {
			errs = append(errs, fmt.Errorf("dns: %q is not a host name", host))
		}
		if len(addrs) == 0 {
			errs = append(errs, fmt.Errorf("%s: at least one address is required (a name the stub does not list is not found)", fieldpath.Join("dns", host)))
		}
		for i, a := range addrs {
			if _, err := netip.ParseAddr(a); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %q is not an IP address", fieldpath.Join("dns", host), i, a))
			}
		}
	}
	if len(s.Steps) == 0 {
		errs = append(errs, errors.New("steps: at least one step is required"))
	}
	errs = append(errs, checkSteps("steps", s.Steps)...)
	sortErrors(errs)
	return errs
}

func (it ModelItem) check() error {
	if err := checkError(it.Error, it.RetryAfterMS); err != nil {
		return err
	}
	streams := it.Text != nil || it.Deltas != nil || it.ToolCalls != nil
	switch {
	case it.Text != nil && it.Deltas != nil:
		return errors.New("text and deltas exclude each other")
	case it.Refusal != "" && streams:
		return errors.New("refusal excludes text, deltas and tool_calls")
	}
	streams = streams || it.Refusal != ""
	switch {
	case it.Error == "" && !streams:
		return errors.New("one of text, deltas, refusal, tool_calls or error is required")
	case it.Error != "" && streams && it.FailAfter == nil:
		return errors.New("error with text, deltas, refusal or tool_calls needs fail_after (an error alone fails before the first delta)")
	case it.FailAfter != nil && !streams:
		return errors.New("fail_after needs text, deltas, refusal or tool_calls")
	case it.FinishReason != "" && !slices.Contains(finishReasons, it.FinishReason):
		return fmt.Errorf("finish_reason %q is not one of %s%s", it.FinishReason, strings.Join(finishReasons, ", "), didYouMean(it.FinishReason, finishReasons))
	case it.FinishReason != "" && it.Error != "" && it.FailAfter == nil:
		return errors.New("finish_reason needs a response (an error alone fails before the first delta)")
	case it.Usage != nil && it.Error != "" && it.FailAfter == nil:
		return errors.New("usage needs a response (an error alone fails before the first delta, reporting none)")
	case it.FailAfter != nil && (it.Usage != nil || it.FinishReason != ""):
		// The stream fails where its last delta would carry them.
		return errors.New("fail_after fails the stream instead of ending it: usage and finish_reason are never reported")
	case it.FailAfter != nil && *it.FailAfter < 0:
		return errors.New("fail_after must not be negative")
	case it.DelayMS < 0:
		return errors.New("delay_ms must not be negative")
	}
	for i, c := range it.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("tool_calls[%d]: name is required", i)
		}
		if _, err := json.Marshal(c.Args); err != nil {
			return fmt.Errorf("tool_calls[%d]: args: %w", i, err)
		}
	}
	if it.FailAfter != nil {
		n := it.deltaCount()
		if *it.FailAfter > n {
			return fmt.Errorf("fail_after %d is past the %d deltas", *it.FailAfter, n)
		}
	}
	return nil
}

// deltaCount is the number of deltas the item streams: its text deltas,
// then two per tool call.
func (it ModelItem) deltaCount() int {
	n := len(it.Deltas)
	if it.Text != nil || it.Refusal != "" {
		n = 1
	}
	return n + 2*len(it.ToolCalls)
}

func checkError(kind string, retryAfter int) error {
	switch kind {
	case "", ErrTransient, ErrTimeout, ErrPermanent, ErrRefused:
		if retryAfter != 0 {
			return errors.New(`retry_after_ms needs error "rate_limited"`)
		}
	case ErrRateLimited:
		if retryAfter < 0 {
			return errors.New("retry_after_ms must not be negative")
		}
	default:
		kinds := []string{ErrTransient, ErrRateLimited, ErrTimeout, ErrPermanent, ErrRefused}
		return fmt.Errorf("error %q is not one of %s%s", kind, strings.Join(kinds, ", "), didYouMean(kind, kinds))
	}
	return nil
}

func checkSteps(path string, steps []Step) []error {
	var errs []error
	for i, st := range steps {
		p := fmt.Sprintf("%s[%d]", path, i)
		n := 0
		for _, set := range []bool{st.Chat != nil, st.Tool != nil, st.Admit != nil, st.Turn != nil, st.Agent != nil, st.Parallel != nil,
			st.State != nil, st.Checkpoint != nil, st.Crash != nil, st.Resume != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("%s: a step has exactly one of %s (found %d)", p, stepKinds, n))
			continue
		}
		switch {
		case st.Chat != nil:
			errs = append(errs, checkRequest(p+".chat", st.Chat)...)
			if st.Chat.Consume != nil && *st.Chat.Consume < 0 {
				errs = append(errs, fmt.Errorf("%s.chat: consume must not be negative", p))
			}
			if st.Chat.MaxTokens < 0 {
				errs = append(errs, fmt.Errorf("%s.chat: max_tokens must not be negative", p))
			}
		case st.Tool != nil:
			if st.Tool.Name == "" {
				errs = append(errs, fmt.Errorf("%s.tool: name is required", p))
			}
		case st.Agent != nil:
			errs = append(errs, checkAgent(p+".agent", st.Agent)...)
		case st.Turn != nil:
			if len(st.Turn.Steps) == 0 {
				errs = append(errs, fmt.Errorf("%s.turn: steps: at least one step is required", p))
			}
			errs = append(errs, checkSteps(p+".turn.steps", st.Turn.Steps)...)
		case st.Parallel != nil:
			if len(st.Parallel) == 0 {
				errs = append(errs, fmt.Errorf("%s.parallel: at least one step is required", p))
			}
			errs = append(errs, checkSteps(p+".parallel", st.Parallel)...)
		case st.State != nil:
			if err := st.State.check(); err != nil {
				errs = append(errs, fmt.Errorf("%s.state: %w", p, err))
			}
		case st.Checkpoint != nil:
			if err := st.Checkpoint.check(); err != nil {
				errs = append(errs, fmt.Errorf("%s.checkpoint: %w", p, err))
			}
		}
		if (st.Crash != nil || st.Resume != nil) && path != "steps" {
			errs = append(errs, fmt.Errorf("%s: crash and resume are top-level steps (a process dies between calls, not inside one)", p))
		}
	}
	return errs
}

func checkAgent(p string, a *AgentStep) []error {
	var errs []error
	if a.Model == "" {
		errs = append(errs, fmt.Errorf("%s: model is required", p))
	}
	if (a.Input == nil || *a.Input == "") && len(a.Messages) == 0 && !a.Continue {
		if a.Input != nil {
			errs = append(errs, fmt.Errorf("%s.input: the input is empty, and the step has no messages: write the user's message", p))
		} else {
			errs = append(errs, fmt.Errorf("%s: input or messages is required", p))
		}
	}
	// The runtime reads 0 as its default: a turn of no model call, of no
	// tool call at once, or of no tool call an answer, would silently be
	// one of 8, 4 or 64.
	for _, b := range []struct {
		field string
		v     *int
		dflt  int
	}{{"max_steps", a.MaxSteps, runtime.DefaultAgentMaxSteps}, {"max_parallel", a.MaxParallel, runtime.DefaultAgentMaxParallel},
		{"max_tool_calls", a.MaxToolCalls, runtime.DefaultAgentMaxToolCalls}} {
		if b.v != nil && *b.v < 1 {
			errs = append(errs, fmt.Errorf("%s.%s: %d is not a bound (at least 1; leave it out for the default of %d)", p, b.field, *b.v, b.dflt))
		}
	}
	switch a.OnBlock {
	case "", runtime.OnBlockTellModel, runtime.OnBlockEndTurn:
	default:
		errs = append(errs, fmt.Errorf("%s: on_block %q is not %q or %q", p, a.OnBlock, runtime.OnBlockTellModel, runtime.OnBlockEndTurn))
	}
	errs = append(errs, checkMessages(p+".messages", a.Messages)...)
	if a.Params != nil {
		errs = append(errs, checkRequest(p+".params", a.Params)...)
	}
	if pr := a.Params; pr != nil {
		switch {
		case pr.Model != "" || pr.Messages != nil:
			errs = append(errs, fmt.Errorf("%s.params: model and messages are the agent step's own", p))
		case pr.Consume != nil:
			errs = append(errs, fmt.Errorf("%s.params: consume does not apply to an agent step", p))
		case pr.MaxTokens < 0:
			errs = append(errs, fmt.Errorf("%s.params: max_tokens must not be negative", p))
		}
	}
	return errs
}

// The roles of a message, and the types of its parts and of a response
// format: a value outside them (a misspelt "usr") would reach no layer that
// looks for the real one.
var (
	roles       = []string{"system", "user", "assistant", "tool"}
	partTypes   = []string{runtime.PartText, runtime.PartImage, runtime.PartToolResult, runtime.PartThinking, runtime.PartRedactedThinking, runtime.PartDocument}
	formatTypes = []string{runtime.FormatText, runtime.FormatJSONObject, runtime.FormatJSONSchema}
)

// checkRequest checks the messages and the response format of a chat step
// or an agent step's params.
func checkRequest(p string, cs *ChatStep) []error {
	errs := checkMessages(p+".messages", cs.Messages)
	if rf := cs.ResponseFormat; rf != nil && !slices.Contains(formatTypes, rf.Type) {
		hint := didYouMean(rf.Type, formatTypes)
		if rf.Type == "json" {
			// Too short for the distance, but json_object is meant.
			hint = fmt.Sprintf("; did you mean %q?", runtime.FormatJSONObject)
		}
		errs = append(errs, fmt.Errorf("%s.response_format: type %q is not one of %s%s", p, rf.Type, strings.Join(formatTypes, ", "), hint))
	}
	return errs
}

func checkMessages(p string, msgs []runtime.Message) []error {
	var errs []error
	for i, m := range msgs {
		if !slices.Contains(roles, m.Role) {
			errs = append(errs, fmt.Errorf("%s[%d]: role %q is not one of %s%s", p, i, m.Role, strings.Join(roles, ", "), didYouMean(m.Role, roles)))
		}
		for j, part := range m.Parts {
			if !slices.Contains(partTypes, part.Type) {
				errs = append(errs, fmt.Errorf("%s[%d].parts[%d]: type %q is not one of %s%s", p, i, j, part.Type, strings.Join(partTypes, ", "), didYouMean(part.Type, partTypes)))
			}
		}
	}
	return errs
}

// sortErrors orders errs by their text, numbers by value: steps[5] comes
// before steps[13], as in the scenario.
func sortErrors(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int { return naturalCompare(a.Error(), b.Error()) })
}

// naturalCompare compares a and b as strings whose runs of digits compare
// as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digitRun is the length of the run of ASCII digits s starts with.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
