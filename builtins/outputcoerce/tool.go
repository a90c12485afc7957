package outputcoerce

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/resultjson"
	"github.com/agentc-dev/agentc/runtime"
)

// provisionTool compiles the result schemas of the tool stage: `schema` for
// every tool when it is set, else each declared tool's result_schema.
func (c *Coerce) provisionTool(b *runtime.BuildContext) error {
	if c.SetResponseFormat {
		return fmt.Errorf("set_response_format applies to the chat stage only")
	}
	c.results = map[string]*jsonschema.Schema{}
	if len(bytes.TrimSpace(c.Schema)) > 0 {
		s, err := Compile(c.Schema)
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		c.schema = s
		return nil
	}
	names := make([]string, 0, len(b.Plan.Tools))
	for name := range b.Plan.Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := b.Plan.Tools[name].ResultSchema
		if len(raw) == 0 {
			continue
		}
		s, err := Compile(raw)
		if err != nil {
			return fmt.Errorf("tools.%s.result_schema: %w", name, err)
		}
		c.results[name] = s
	}
	return nil
}

// encodedValue checks the value a string result encodes when the schema
// refused the string (its diagnostics diags, its JSON text): a tool that
// answers JSON as text (an MCP server without an outputSchema, whose result
// is text contents only) is checked by what it means, so a result schema
// of type "object" can be written for it. It returns no diagnostics when
// str is the JSON text of a value other than a string that s accepts. When
// that value fails too, its diagnostics are returned (with str as the
// rejected result) if the schema refused the string by its type alone,
// else diags and text are.
func encodedValue(s *jsonschema.Schema, str string, diags []Diagnostic, text string) ([]Diagnostic, string) {
	v, ok := resultjson.Encoded(str)
	if !ok {
		return diags, text
	}
	enc := validate(s, v)
	if len(enc) == 0 {
		return nil, text
	}
	for _, d := range diags {
		if d.Path != "" || !strings.HasPrefix(d.Message, "expected ") || !strings.HasSuffix(d.Message, ", but got string") {
			return diags, text
		}
	}
	return enc, str
}

// ResultError is a tool result that does not match the tool's result
// schema (enforce mode). It unwraps to a permanent *runtime.CallError
// naming the layer and to runtime.ErrRan: the tool ran, and running it
// again (it may have side effects) would not make its result valid. So an
// idempotent layer outside keeps it as the call's outcome, an audit layer
// records the decision "ran" and a meter charges the call.
type ResultError struct {
	// Layer names the output_coerce layer; Tool the tool.
	Layer, Tool string
	// Diagnostics are sorted by path, then message.
	Diagnostics []Diagnostic
	// Result is the rejected result as JSON text.
	Result string

	call *runtime.CallError
}

func (e *ResultError) summary() string {
	parts := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		parts[i] = d.String()
	}
	return "result of tool " + e.Tool + " does not match its result_schema: " + strings.Join(parts, "; ")
}

// Error returns "<layer>: result of tool <tool> does not match its result_schema: ...".
func (e *ResultError) Error() string { return e.Layer + ": " + e.summary() }

// Unwrap returns the *runtime.CallError that classifies the failure and
// runtime.ErrRan.
func (e *ResultError) Unwrap() []error { return []error{e.call, runtime.ErrRan} }

// WrapTool implements runtime.ToolWrapper: a successful result of a tool
// with a result schema is validated. Enforce mode fails the call with a
// *ResultError; annotate mode logs a warning and returns the result.
func (c *Coerce) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, call *runtime.ToolCall) (any, error) {
		v, err := next(ctx, call)
		if err != nil {
			return v, err
		}
		s := c.schema
		if s == nil {
			s = c.results[call.Name]
		}
		if s == nil {
			return v, nil
		}
		data, text, perr := resultjson.Data(v)
		var diags []Diagnostic
		if perr != nil {
			diags = []Diagnostic{{Message: "not valid JSON: " + strings.TrimPrefix(perr.Error(), "json: ")}}
		} else if diags = validate(s, data); len(diags) > 0 {
			if str, ok := data.(string); ok {
				diags, text = encodedValue(s, str, diags, text)
			}
		}
		if len(diags) == 0 {
			return v, nil
		}
		e := &ResultError{Layer: c.name, Tool: call.Name, Diagnostics: diags, Result: text}
		if c.Mode == ModeAnnotate {
			c.logger.WarnContext(ctx, "output_coerce: "+e.summary(), "tool", call.Name)
			return v, nil
		}
		e.call = &runtime.CallError{Kind: runtime.KindPermanent, Layer: c.name, Message: e.summary()}
		return nil, e
	}
}

var _ runtime.ToolWrapper = (*Coerce)(nil)
