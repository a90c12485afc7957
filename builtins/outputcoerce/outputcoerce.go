package outputcoerce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/resultjson"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "output_coerce"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitGuards},
		Doc:     "validates model output against a JSON Schema (a retry outside it re-asks with the diagnostics), or tool results against the tools' result_schema",
		New:     func() runtime.Middleware { return &Coerce{Mode: ModeEnforce} },
	})
}

// The modes.
const (
	ModeEnforce  = "enforce"
	ModeAnnotate = "annotate"
)

// Coerce is the output_coerce layer; its exported fields are its config
// (schemas/output_coerce.cue).
type Coerce struct {
	// Schema is the JSON Schema, as a JSON object (the compiler reads a
	// schema file into the object). A string holding a JSON object is
	// accepted too.
	Schema json.RawMessage `json:"schema"`
	// Mode is "enforce" or "annotate".
	Mode string `json:"mode"`
	// SetResponseFormat sets the schema as the response_format of a request
	// that has none.
	SetResponseFormat bool `json:"set_response_format,omitempty"`
	// Partial streams the output while it is parsed (chat stage): deltas
	// are forwarded as they arrive and a prefix that can no longer become
	// valid fails the call at once.
	Partial bool `json:"partial,omitempty"`

	name   string
	schema *jsonschema.Schema
	format *runtime.ResponseFormat
	// results are the compiled result schemas per tool (tool stage).
	results map[string]*jsonschema.Schema
	logger  interface {
		WarnContext(ctx context.Context, msg string, args ...any)
	}
}

// Provision compiles the schema once. In the tool stage it compiles the
// result_schema of every declared tool instead (or `schema`, when set, for
// every tool).
func (c *Coerce) Provision(b *runtime.BuildContext) error {
	c.name = b.Name()
	c.logger = b.Logger
	if b.Stage == plan.StageTool {
		if c.Partial {
			return errors.New("partial applies to the chat stage only")
		}
		return c.provisionTool(b)
	}
	if len(bytes.TrimSpace(c.Schema)) == 0 {
		return errors.New("schema is required in the chat stage")
	}
	s, err := Compile(c.Schema)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	c.schema = s
	if c.SetResponseFormat {
		raw, err := schemaJSON(c.Schema)
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		c.format = &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: formatName(c.name), Schema: raw}
	}
	return nil
}

// schemaJSON returns the schema as compact JSON (a JSON string holding the
// schema is unwrapped).
func schemaJSON(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = json.RawMessage(s)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// formatName turns a layer name into a response format name as providers
// accept it: letters, digits, _ and -, at most 64 bytes.
func formatName(name string) string {
	b := []byte(name)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}

// Validate checks the mode.
func (c *Coerce) Validate() error {
	if c.Mode != ModeEnforce && c.Mode != ModeAnnotate {
		return fmt.Errorf(`mode must be "enforce" or "annotate", got %q`, c.Mode)
	}
	return nil
}

// Compile compiles a JSON Schema (draft 2020-12). A JSON string holding
// the schema's text is unwrapped; remote references are refused.
func Compile(raw json.RawMessage) (*jsonschema.Schema, error) { return resultjson.Compile(raw) }

// Diagnostic is one reason the output does not match the schema.
type Diagnostic struct {
	// Path is the JSON Pointer of the offending value in the output ("" for
	// the whole output).
	Path string `json:"path"`
	// Message says what is wrong.
	Message string `json:"message"`
}

func (d Diagnostic) String() string {
	p := d.Path
	if p == "" {
		p = "(root)"
	}
	return p + ": " + d.Message
}

// Annotation is what annotate mode records on the response.
type Annotation struct {
	// Valid reports output that parsed and matched the schema.
	Valid bool `json:"valid"`
	// Value is the parsed output (numbers as json.Number); nil when the
	// output is not JSON.
	Value any `json:"value,omitempty"`
	// Diagnostics say why invalid output is invalid, sorted.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// AnnotationOf returns the annotation that the output_coerce layer named
// layer recorded on resp. A response replayed from a cache (memoize outside
// the layer) carries the annotation in its JSON-decoded form, a
// map[string]any: it is decoded into an Annotation, with the value's numbers
// as json.Number as on a fresh response.
func AnnotationOf(resp runtime.ChatResponse, layer string) (Annotation, bool) {
	switch a := resp.Annotations[layer].(type) {
	case Annotation:
		return a, true
	case map[string]any:
		if _, ok := a["valid"].(bool); !ok {
			return Annotation{}, false
		}
		b, err := json.Marshal(a)
		if err != nil {
			return Annotation{}, false
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var out Annotation
		if err := dec.Decode(&out); err != nil {
			return Annotation{}, false
		}
		return out, true
	}
	return Annotation{}, false
}

// CoercionError is output that does not match the schema (enforce mode). It
// unwraps to an unclassified *runtime.CallError naming the layer, so that
// runtime.LayerOf names it and runtime.IsTransient lets a retry re-ask, and
// it implements runtime.RetryFeedbacker.
type CoercionError struct {
	// Layer names the output_coerce layer.
	Layer string
	// Diagnostics are sorted by path, then message.
	Diagnostics []Diagnostic
	// Output is the rejected output text.
	Output string

	call *runtime.CallError
}

func newCoercionError(layer, output string, diags []Diagnostic) *CoercionError {
	e := &CoercionError{Layer: layer, Diagnostics: diags, Output: output}
	e.call = &runtime.CallError{Layer: layer, Message: e.summary()}
	return e
}

func (e *CoercionError) summary() string {
	parts := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		parts[i] = d.String()
	}
	return "output does not match the schema: " + strings.Join(parts, "; ")
}

// Error returns "<layer>: output does not match the schema: <path>: <message>; ...".
func (e *CoercionError) Error() string { return e.Layer + ": " + e.summary() }

// Unwrap returns the *runtime.CallError that classifies the failure.
func (e *CoercionError) Unwrap() error { return e.call }

// maxEcho bounds the rejected output quoted back to the model.
const maxEcho = 2000

// RetryFeedback tells the model what was wrong with its output.
func (e *CoercionError) RetryFeedback() string {
	var b strings.Builder
	out := e.Output
	if len(out) > maxEcho {
		n := maxEcho
		for n > 0 && !utf8.RuneStart(out[n]) {
			n-- // cut on a character boundary, not inside a UTF-8 sequence
		}
		out = out[:n] + "..."
	}
	b.WriteString("Your previous reply was rejected because it does not match the required JSON Schema.\n")
	b.WriteString("Previous reply:\n")
	b.WriteString(out)
	b.WriteString("\nProblems:\n")
	for _, d := range e.Diagnostics {
		b.WriteString("- ")
		b.WriteString(d.String())
		b.WriteString("\n")
	}
	b.WriteString("Reply again with only the corrected JSON value, without markdown fences or commentary.")
	return b.String()
}

// StripFences returns the content of the first markdown code fence in text,
// or text trimmed when it has none. The fence closes at the first three
// backticks outside a JSON string, so a value whose strings hold a fence of
// their own ("```py" in a code field) is kept whole, as the partial check
// reads it; a raw newline ends a string, which JSON strings never span, so
// prose with an odd quote still closes at a fence on its own line.
func StripFences(text string) string {
	t := strings.TrimSpace(text)
	i := strings.Index(t, "```")
	if i < 0 {
		return t
	}
	rest := t[i+3:]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 {
		return t // a fence without a body
	}
	body := rest[nl+1:]
	if j := closingFence(body); j >= 0 {
		body = body[:j]
	}
	return strings.TrimSpace(body)
}

// closingFence returns the index of the first "```" of body outside a JSON
// string, or -1.
func closingFence(body string) int {
	inString, escaped := false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && inString:
			escaped = true
		case c == '"':
			inString = !inString
		case c == '\n':
			inString = false
		case c == '`' && !inString && strings.HasPrefix(body[i:], "```"):
			return i
		}
	}
	return -1
}

// Check strips fences from text, parses it and validates it against the
// layer's schema. It returns the stripped text, the parsed value and the
// sorted diagnostics (none when valid).
func (c *Coerce) Check(text string) (string, any, []Diagnostic) {
	clean := StripFences(text)
	v, err := parseJSON(clean)
	if err != nil {
		return clean, nil, []Diagnostic{{Message: err.Error()}}
	}
	return clean, v, validate(c.schema, v)
}

// parseJSON parses text as one JSON value (numbers as json.Number).
func parseJSON(text string) (any, error) { return resultjson.Parse(text) }

// validate returns the sorted diagnostics of v against s (none when valid).
func validate(s *jsonschema.Schema, v any) []Diagnostic {
	err := s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Diagnostic{{Message: err.Error()}}
	}
	return diagnostics(ve)
}

// diagnostics flattens a validation error into its leaves, sorted and
// without duplicates.
func diagnostics(ve *jsonschema.ValidationError) []Diagnostic {
	var out []Diagnostic
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, Diagnostic{Path: e.InstanceLocation, Message: e.Message})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Message < out[j].Message
	})
	dedup := out[:0]
	for i, d := range out {
		if i > 0 && d == out[i-1] {
			continue
		}
		dedup = append(dedup, d)
	}
	return dedup
}

// holdsRefusal reports whether held holds the model's refusal: text of a delta
// marked runtime.Delta.Refusal.
func holdsRefusal(held []runtime.Delta) bool {
	for i := range held {
		if held[i].Refusal && held[i].Text != "" {
			return true
		}
	}
	return false
}

// holdsPause reports whether held ends a turn the provider paused
// (runtime.FinishPauseTurn): the text so far is not the answer, and the
// client continues the turn by sending the response back.
func holdsPause(held []runtime.Delta) bool {
	for i := range held {
		if held[i].FinishReason == runtime.FinishPauseTurn {
			return true
		}
	}
	return false
}

// WrapChat implements runtime.ChatWrapper. A response that requests tool
// calls is not the final output: it is released unchecked (the model answers
// once it has the results). Nor is a refusal an output: it is released as
// it came, marked, unchecked. Nor is a turn the provider paused
// (runtime.FinishPauseTurn, a long-running server tool): it is released
// unchecked and not annotated, and no retry re-asks the model, which would
// start again the turn the client is to continue. With set_response_format a request without a
// response_format carries the schema on the call's own copy.
func (c *Coerce) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, call *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		if call.Own() {
			// A judge's verdict, a summary: the output of a layer's own
			// call is that layer's, in the form it asks for, not the
			// answer the schema describes.
			return next(ctx, call, yield)
		}
		if c.format != nil && call.Request.ResponseFormat == nil {
			call.Request.ResponseFormat = c.format
			defer func() { call.Request.ResponseFormat = nil }()
		}
		if c.Partial {
			return c.stream(ctx, call, next, yield)
		}
		buf, err := runtime.Buffer(ctx, call, next)
		if err != nil {
			return err
		}
		if len(buf.ToolCalls) > 0 || holdsRefusal(buf.Held) || holdsPause(buf.Held) {
			buf.Release(call, yield)
			return nil
		}
		full := buf.Text
		clean, v, diags := c.Check(full)
		if c.Mode == ModeAnnotate {
			call.Annotate(c.name, Annotation{Valid: len(diags) == 0, Value: v, Diagnostics: diags})
			buf.Release(call, yield)
			return nil
		}
		if len(diags) > 0 {
			return newCoercionError(c.name, full, diags)
		}
		if clean == full {
			buf.Release(call, yield)
			return nil
		}
		call.Emit(yield, runtime.Delta{Text: clean, Usage: buf.Usage(), FinishReason: call.FinishReason})
		return nil
	}
}

var (
	_ runtime.ChatWrapper     = (*Coerce)(nil)
	_ runtime.RetryFeedbacker = (*CoercionError)(nil)
)
