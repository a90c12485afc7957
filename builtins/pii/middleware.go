package pii

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "pii"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageChat, plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitGuards, runtime.TraitRewritesMessages},
		Doc:    "finds email, phone, SSN, card numbers and IPs in input or tool arguments; blocks or redacts",
		New:    func() runtime.Middleware { return &Middleware{Action: ActionBlock, OnError: "closed"} },
	})
}

// The actions of the pii layer.
const (
	ActionBlock  = "block"
	ActionRedact = "redact"
)

// Middleware is the pii layer; its exported fields are its config
// (schemas/pii.cue).
type Middleware struct {
	// Action is "block" (the default) or "redact".
	Action string `json:"action"`
	// Kinds selects what to detect: "email", "phone", "ssn", "card", "ip"
	// (IPv4 and IPv6); empty means all.
	Kinds []string `json:"kinds,omitempty"`
	// Regions are the regions whose national phone formats are recognised; empty means
	// DefaultRegions.
	Regions []string `json:"regions,omitempty"`
	// OnError is accepted for the schema; the scanner has no failure mode.
	OnError string `json:"on_error"`

	name    string
	scanner *Scanner
}

// Provision builds the scanner once.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	var kinds []Kind
	for _, k := range m.Kinds {
		if k == "ip" {
			kinds = append(kinds, KindIPv4, KindIPv6)
			continue
		}
		kinds = append(kinds, Kind(k))
	}
	s, err := New(Config{Kinds: kinds, Regions: m.Regions})
	if err != nil {
		return err
	}
	m.scanner = s
	return nil
}

// Validate checks action and on_error.
func (m *Middleware) Validate() error {
	if m.Action != ActionBlock && m.Action != ActionRedact {
		return fmt.Errorf(`action must be "block" or "redact", got %q`, m.Action)
	}
	if m.OnError != "closed" && m.OnError != "open" {
		return fmt.Errorf(`on_error must be "closed" or "open", got %q`, m.OnError)
	}
	return nil
}

// kindsOf names the distinct kinds of ms in detection-priority order.
func kindsOf(ms []Match) string {
	var ks []string
	for _, k := range kindOrder {
		for _, m := range ms {
			if m.Kind == k {
				ks = append(ks, string(k))
				break
			}
		}
	}
	return strings.Join(ks, ", ")
}

// WrapChat implements runtime.ChatWrapper. With action "block" the latest
// user message is scanned (its content and text parts) and a match blocks the
// call. With "redact" every user message (content and text parts) and the
// arguments of every tool call an assistant message requested (string values
// and numbers, as in the tool stage; the arguments stay valid JSON) are
// rewritten on the call's own copy of the transcript before the inner layers
// run (the caller's transcript still holds the raw text and resends it with
// the next call, so earlier messages are redacted again); the caller's
// messages are never modified. System messages, assistant text and tool
// results are left alone. Block messages name the kinds found, never the
// data.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	if m.Action == ActionBlock {
		return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
			msgs := c.Request.Messages
			for i := len(msgs) - 1; i >= 0; i-- {
				if msgs[i].Role != "user" {
					continue
				}
				if ms := m.scanner.Find(msgs[i].Text()); len(ms) > 0 {
					return &runtime.BlockedError{Layer: m.name,
						Message: fmt.Sprintf("message %d contains personal data (%s)", i, kindsOf(ms))}
				}
				break
			}
			return next(ctx, c, yield)
		}
	}
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		orig := c.Request.Messages
		var out []runtime.Message
		for i := range orig {
			msg, changed := m.redactMessage(&orig[i])
			if !changed {
				continue
			}
			if out == nil {
				out = slices.Clone(orig)
			}
			out[i] = msg
		}
		if out == nil {
			return next(ctx, c, yield)
		}
		c.Request.Messages = out
		err := next(ctx, c, yield)
		c.Request.Messages = orig
		return err
	}
}

// redactMessage returns msg redacted and whether anything changed; the
// message's slices are copied before they are changed.
func (m *Middleware) redactMessage(msg *runtime.Message) (runtime.Message, bool) {
	out := *msg
	changed := false
	switch msg.Role {
	case "user":
		if red, n := m.scanner.Redact(msg.Content); n > 0 {
			out.Content, changed = red, true
		}
		cloned := false
		for j, p := range msg.Parts {
			if p.Type != runtime.PartText {
				continue
			}
			red, n := m.scanner.Redact(p.Text)
			if n == 0 {
				continue
			}
			if !cloned {
				out.Parts, cloned = slices.Clone(msg.Parts), true
			}
			out.Parts[j].Text, changed = red, true
		}
	case "assistant":
		for j, tc := range msg.ToolCalls {
			args, ok := m.redactArgs(tc.Arguments)
			if !ok {
				continue
			}
			if !changed {
				out.ToolCalls = slices.Clone(msg.ToolCalls)
				changed = true
			}
			out.ToolCalls[j].Arguments = args
		}
	}
	return out, changed
}

// redactArgs redacts the JSON arguments of a tool call; ok is false when
// nothing was found (or they are not JSON).
func (m *Middleware) redactArgs(raw json.RawMessage) (json.RawMessage, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	red, n := m.scanner.RedactValue(v)
	if n == 0 {
		return nil, false
	}
	b, err := json.Marshal(red)
	if err != nil {
		return nil, false
	}
	return b, true
}

// WrapTool implements runtime.ToolWrapper. The arguments are scanned (every
// string, and numbers as their digits; with "block" object keys too); with
// "block" a match blocks the call naming the argument's JSON Pointer (for a
// key, the object's) and kind, with "redact" the inner layers
// and the tool see a redacted copy (the caller's map is never modified, and
// layers outside this one see the original once it returns).
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	if m.Action == ActionBlock {
		return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			if err := m.blockArgs(c); err != nil {
				return nil, err
			}
			return next(ctx, c)
		}
	}
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		orig := c.Args
		red, n := m.scanner.RedactValue(orig)
		if n == 0 {
			return next(ctx, c)
		}
		args, ok := red.(map[string]any)
		if !ok {
			return next(ctx, c)
		}
		c.Args = args
		v, err := next(ctx, c)
		c.Args = orig
		return v, err
	}
}

// blockArgs returns the refusal of action "block" for arguments holding
// personal data, or nil.
func (m *Middleware) blockArgs(c *runtime.ToolCall) error {
	ms := m.scanner.ScanValue(c.Args)
	if len(ms) == 0 {
		return nil
	}
	where := "argument " + ms[0].Path
	if ms[0].Path == "" {
		where = "an argument name" // a key of the arguments themselves
	}
	return &runtime.BlockedError{Layer: m.name,
		Message: fmt.Sprintf("tool %s: %s contains personal data (%s)", c.Name, where, kindsOf(ms))}
}

// AdmitTool implements runtime.ToolAdmitter: with action "block", the
// refusal WrapTool makes; "redact" changes the arguments the tool sees
// and refuses nothing.
func (m *Middleware) AdmitTool(_ context.Context, c *runtime.ToolCall) error {
	if m.Action != ActionBlock {
		return nil
	}
	return m.blockArgs(c)
}

var (
	_ runtime.ChatWrapper  = (*Middleware)(nil)
	_ runtime.ToolWrapper  = (*Middleware)(nil)
	_ runtime.ToolAdmitter = (*Middleware)(nil)
)
