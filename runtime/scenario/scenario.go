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
// `deltas` as its own delta, reports `usage` on the last delta, and with
// `fail_after` N fails after N deltas (without a usage report). An item with
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
// Steps. `chat` sends {model, messages, max_tokens} and with `consume` N
// abandons the stream after N deltas. `tool` calls {name, args}. `admit`
// filters {items} with the plan's admission predicate. `turn` runs {input,
// steps} through the turn chain: its nested steps run in order until one does
// not end ok (its error ends the turn), and the turn's output is the text of
// its last chat step. `parallel` (an extension) runs its nested steps
// concurrently, as duplicate deliveries of a call would; it ends ok when all
// of them did, else with the outcome of the first that did not.
package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

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
	// Steps are the calls to make, in order.
	Steps []Step `json:"steps"`
}

// The fake error kinds.
const (
	ErrTransient   = "transient"
	ErrRateLimited = "rate_limited"
	ErrTimeout     = "timeout"
	ErrPermanent   = "permanent"
)

// ModelItem is one scripted model response.
type ModelItem struct {
	Text         *string        `json:"text,omitempty"`
	Deltas       []string       `json:"deltas,omitempty"`
	Usage        *runtime.Usage `json:"usage,omitempty"`
	Error        string         `json:"error,omitempty"`
	RetryAfterMS int            `json:"retry_after_ms,omitempty"`
	FailAfter    *int           `json:"fail_after,omitempty"`
	DelayMS      int            `json:"delay_ms,omitempty"`
}

// ToolItem is one scripted tool response.
type ToolItem struct {
	Result       any    `json:"result,omitempty"`
	Error        string `json:"error,omitempty"`
	Crash        bool   `json:"crash,omitempty"`
	RetryAfterMS int    `json:"retry_after_ms,omitempty"`
	DelayMS      int    `json:"delay_ms,omitempty"`
}

// Step is one call; exactly one field is set.
type Step struct {
	Chat     *ChatStep  `json:"chat,omitempty"`
	Tool     *ToolStep  `json:"tool,omitempty"`
	Admit    *AdmitStep `json:"admit,omitempty"`
	Turn     *TurnStep  `json:"turn,omitempty"`
	Parallel []Step     `json:"parallel,omitempty"`
}

// ChatStep is a model call.
type ChatStep struct {
	Model     string            `json:"model"`
	Messages  []runtime.Message `json:"messages"`
	MaxTokens int               `json:"max_tokens,omitempty"`
	// Consume, when set, abandons the stream after that many deltas.
	Consume *int `json:"consume,omitempty"`
}

// ToolStep is a tool call.
type ToolStep struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
}

// AdmitStep filters grounding items.
type AdmitStep struct {
	Items []runtime.Item `json:"items"`
}

// TurnStep is an agent turn wrapping nested steps.
type TurnStep struct {
	Input   string          `json:"input"`
	Session runtime.Session `json:"session,omitzero"`
	Steps   []Step          `json:"steps"`
}

// Parse decodes a JSON scenario strictly (unknown fields are errors) and
// checks it. Errors name the offending place, for example
// "steps[1].tool: name is required" or "line 3, col 5: ...".
func Parse(data []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenario: %s", jsonError(data, dec, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("scenario: trailing data after the scenario object")
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return &s, nil
}

// jsonError places a decoding error at a line and column.
func jsonError(data []byte, dec *json.Decoder, err error) string {
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
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if off < 0 || off > len(data) {
		return msg
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, col %d: %s", line, col, msg)
}

func (s *Scenario) check() error {
	var errs []error
	for name, items := range s.Models {
		for i, it := range items {
			if err := it.check(); err != nil {
				errs = append(errs, fmt.Errorf("models.%s[%d]: %w", name, i, err))
			}
		}
	}
	for name, items := range s.Tools {
		for i, it := range items {
			if err := checkError(it.Error, it.RetryAfterMS); err != nil {
				errs = append(errs, fmt.Errorf("tools.%s[%d]: %w", name, i, err))
			}
			if it.Error != "" && it.Result != nil {
				errs = append(errs, fmt.Errorf("tools.%s[%d]: result and error exclude each other", name, i))
			}
			if it.Crash && (it.Error != "" || it.Result != nil) {
				errs = append(errs, fmt.Errorf("tools.%s[%d]: crash excludes result and error", name, i))
			}
			if it.DelayMS < 0 {
				errs = append(errs, fmt.Errorf("tools.%s[%d]: delay_ms must not be negative", name, i))
			}
		}
	}
	if len(s.Steps) == 0 {
		errs = append(errs, errors.New("steps: at least one step is required"))
	}
	errs = append(errs, checkSteps("steps", s.Steps)...)
	sortErrors(errs)
	return errors.Join(errs...)
}

func (it ModelItem) check() error {
	if err := checkError(it.Error, it.RetryAfterMS); err != nil {
		return err
	}
	streams := it.Text != nil || it.Deltas != nil
	switch {
	case it.Text != nil && it.Deltas != nil:
		return errors.New("text and deltas exclude each other")
	case it.Error == "" && !streams:
		return errors.New("one of text, deltas or error is required")
	case it.Error != "" && streams && it.FailAfter == nil:
		return errors.New("error with text or deltas needs fail_after (an error alone fails before the first delta)")
	case it.FailAfter != nil && !streams:
		return errors.New("fail_after needs text or deltas")
	case it.FailAfter != nil && *it.FailAfter < 0:
		return errors.New("fail_after must not be negative")
	case it.DelayMS < 0:
		return errors.New("delay_ms must not be negative")
	}
	if it.FailAfter != nil {
		n := len(it.Deltas)
		if it.Text != nil {
			n = 1
		}
		if *it.FailAfter > n {
			return fmt.Errorf("fail_after %d is past the %d deltas", *it.FailAfter, n)
		}
	}
	return nil
}

func checkError(kind string, retryAfter int) error {
	switch kind {
	case "", ErrTransient, ErrTimeout, ErrPermanent:
		if retryAfter != 0 {
			return errors.New(`retry_after_ms needs error "rate_limited"`)
		}
	case ErrRateLimited:
		if retryAfter < 0 {
			return errors.New("retry_after_ms must not be negative")
		}
	default:
		return fmt.Errorf("error %q is not one of transient, rate_limited, timeout, permanent", kind)
	}
	return nil
}

func checkSteps(path string, steps []Step) []error {
	var errs []error
	for i, st := range steps {
		p := fmt.Sprintf("%s[%d]", path, i)
		n := 0
		for _, set := range []bool{st.Chat != nil, st.Tool != nil, st.Admit != nil, st.Turn != nil, st.Parallel != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("%s: a step has exactly one of chat, tool, admit, turn, parallel (found %d)", p, n))
			continue
		}
		switch {
		case st.Chat != nil:
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
		case st.Turn != nil:
			if len(st.Turn.Steps) == 0 {
				errs = append(errs, fmt.Errorf("%s.turn: steps: at least one step is required", p))
			}
			errs = append(errs, checkSteps(p+".turn.steps", st.Turn.Steps)...)
		case st.Parallel != nil:
			errs = append(errs, checkSteps(p+".parallel", st.Parallel)...)
		}
	}
	return errs
}

func sortErrors(errs []error) {
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Error() < errs[j-1].Error(); j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}
