package predicate

import (
	"bytes"
	"fmt"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// Default size hints used by the static cost estimate where nothing declares a bound. They are
// assumptions, documented in doc.go; the runtime cost limit does not rely on them.
const (
	// DefaultStringSize is the size assumed for a string without a declared maxLength.
	DefaultStringSize = 32 << 10
	// DefaultListSize is the size assumed for a list without a declared maxItems (including
	// messages).
	DefaultListSize = 256
	// DefaultMapSize is the size assumed for the meta and metadata maps.
	DefaultMapSize = 64
	// DefaultContentSize is the size assumed for a message's content: DefaultListSize messages
	// of it make 4 MiB, the largest request body agentc serve admits by default (-maxbody), so
	// a scan of the transcript is estimated at what a scan of the largest one the gateway
	// passes on costs, however it is split into messages.
	DefaultContentSize = (4 << 20) / DefaultListSize
)

var (
	assumedString  = &checker.SizeEstimate{Min: 0, Max: DefaultStringSize}
	assumedList    = &checker.SizeEstimate{Min: 0, Max: DefaultListSize}
	assumedMap     = &checker.SizeEstimate{Min: 0, Max: DefaultMapSize}
	assumedContent = &checker.SizeEstimate{Min: 0, Max: DefaultContentSize}
)

// The type names of the fixed object types. They live under the "agentc." prefix, which is no
// variable, so a type name can never shadow a field selection such as request.model.
var (
	runType      = newObjectType("agentc.run", false, runFields()...)
	messageType  = newObjectType("agentc.message", false, messageFields()...)
	requestType  = newObjectType("agentc.request", false, requestFields()...)
	usageType    = newObjectType("agentc.usage", false, usageFields()...)
	responseType = newObjectType("agentc.response", false, responseFields()...)
	toolType     = newObjectType("agentc.tool", false, toolFields()...)
	inputType    = newObjectType("agentc.input", false, stringField[TurnInput]("text", func(v *TurnInput) string { return v.Text }))
	sessionType  = newObjectType("agentc.session", false, sessionFields()...)
	outputType   = newObjectType("agentc.output", false, stringField[TurnOutput]("text", func(v *TurnOutput) string { return v.Text }),
		boolField[TurnOutput]("final", func(v *TurnOutput) bool { return v.Final }))
	itemType     = newObjectType("agentc.item", false, itemFields()...)
	toolDefType  = newObjectType("agentc.tool_def", false, toolDefFields()...)
	paramsType   = newObjectType("agentc.params", false, paramsFields()...)
	toolCallType = newObjectType("agentc.tool_call", false, toolCallFields()...)

	fixedObjects = map[string]*objectType{}

	metaType      = types.NewMapType(types.StringType, types.DynType)
	messagesType  = types.NewListType(messageType.typ)
	toolDefsType  = types.NewListType(toolDefType.typ)
	toolCallsType = types.NewListType(toolCallType.typ)
	stringsType   = types.NewListType(types.StringType)
	stringMapType = types.NewMapType(types.StringType, types.StringType)
)

func init() {
	for _, o := range []*objectType{runType, messageType, requestType, usageType, responseType,
		toolType, inputType, sessionType, outputType, itemType, toolDefType, paramsType, toolCallType} {
		fixedObjects[o.name] = o
	}
}

// fixedGetter returns a field getter over *T. get returns a ref.Val (so the adapter has no
// work left) or a Go value the adapter converts.
func fixedGetter[T any](get func(*T) any) func(any) (any, error) {
	return func(target any) (any, error) {
		p, ok := target.(*T)
		if !ok {
			return nil, fmt.Errorf("expected %T, got %T", (*T)(nil), target)
		}
		return get(p), nil
	}
}

// fixedTester returns a presence test over *T: has() on a fixed type is true when the field
// holds a non-zero value, as for proto3 scalars.
func fixedTester[T any](set func(*T) bool) func(any) bool {
	return func(target any) bool {
		p, ok := target.(*T)
		return ok && set(p)
	}
}

func stringField[T any](name string, get func(*T) string) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type:    types.StringType,
			GetFrom: fixedGetter(func(p *T) any { return types.String(get(p)) }),
			IsSet:   fixedTester(func(p *T) bool { return get(p) != "" }),
		},
		assumed: assumedString,
	}
}

// withAssumed sets the size f is assumed to have.
func withAssumed(f *field, size *checker.SizeEstimate) *field {
	f.assumed = size
	return f
}

func intField[T any](name string, get func(*T) int64) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type:    types.IntType,
			GetFrom: fixedGetter(func(p *T) any { return types.Int(get(p)) }),
			IsSet:   fixedTester(func(p *T) bool { return get(p) != 0 }),
		},
	}
}

func doubleField[T any](name string, get func(*T) float64) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type:    types.DoubleType,
			GetFrom: fixedGetter(func(p *T) any { return types.Double(get(p)) }),
			IsSet:   fixedTester(func(p *T) bool { return get(p) != 0 }),
		},
	}
}

func boolField[T any](name string, get func(*T) bool) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type:    types.BoolType,
			GetFrom: fixedGetter(func(p *T) any { return types.Bool(get(p)) }),
			IsSet:   fixedTester(get),
		},
	}
}

func metaField[T any](name string, get func(*T) map[string]any) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type:    metaType,
			GetFrom: fixedGetter(func(p *T) any { return jsonObject(get(p)) }),
			IsSet:   fixedTester(func(p *T) bool { return jsonObject(get(p)).size() != 0 }),
		},
		assumed: assumedMap,
	}
}

func objectField[T, F any](name string, o *objectType, get func(*T) *F) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type:    o.typ,
			GetFrom: fixedGetter(func(p *T) any { return get(p) }),
			IsSet:   fixedTester(func(*T) bool { return true }),
		},
	}
}

func runFields() []*field {
	return []*field{
		stringField[RunInfo]("id", func(v *RunInfo) string { return v.ID }),
		stringField[RunInfo]("agent", func(v *RunInfo) string { return v.Agent }),
		metaField[RunInfo]("meta", func(v *RunInfo) map[string]any { return v.Meta }),
	}
}

func messageFields() []*field {
	return []*field{
		stringField[Message]("role", func(v *Message) string { return v.Role }),
		withAssumed(stringField[Message]("content", func(v *Message) string { return v.Content }), assumedContent),
		stringField[Message]("name", func(v *Message) string { return v.Name }),
		stringField[Message]("tool_call_id", func(v *Message) string { return v.ToolCallID }),
		listField[Message]("tool_calls", toolCallsType, func(p *Message) any { return &p.ToolCalls },
			func(p *Message) bool { return len(p.ToolCalls) != 0 }),
	}
}

func requestFields() []*field {
	return []*field{
		stringField[ChatRequest]("model", func(v *ChatRequest) string { return v.Model }),
		{
			name: "messages",
			ft: types.FieldType{
				Type:    messagesType,
				GetFrom: fixedGetter(func(p *ChatRequest) any { return &p.Messages }),
				IsSet:   fixedTester(func(p *ChatRequest) bool { return len(p.Messages) != 0 }),
			},
			assumed: assumedList,
		},
		intField[ChatRequest]("max_tokens", func(v *ChatRequest) int64 { return v.MaxTokens }),
		listField[ChatRequest]("tools", toolDefsType, func(p *ChatRequest) any { return &p.Tools },
			func(p *ChatRequest) bool { return len(p.Tools) != 0 }),
		objectField[ChatRequest, Params]("params", paramsType, func(v *ChatRequest) *Params { return &v.Params }),
	}
}

// listField is a field of a list type; get returns what the adapter turns into the list.
func listField[T any](name string, t *types.Type, get func(*T) any, set func(*T) bool) *field {
	return &field{
		name:    name,
		ft:      types.FieldType{Type: t, GetFrom: fixedGetter(get), IsSet: fixedTester(set)},
		assumed: assumedList,
	}
}

func toolDefFields() []*field {
	return []*field{
		stringField[ToolDef]("name", func(v *ToolDef) string { return v.Name }),
		stringField[ToolDef]("description", func(v *ToolDef) string { return v.Description }),
	}
}

// optionalField is a scalar field backed by a pointer: has() is true when it is set, a read
// of an unset one is the zero value.
func optionalField[T, V any](name string, t *types.Type, get func(*T) *V, val func(V) ref.Val) *field {
	return &field{
		name: name,
		ft: types.FieldType{
			Type: t,
			GetFrom: fixedGetter(func(p *T) any {
				if v := get(p); v != nil {
					return val(*v)
				}
				var zero V
				return val(zero)
			}),
			IsSet: fixedTester(func(p *T) bool { return get(p) != nil }),
		},
	}
}

func paramsFields() []*field {
	double := func(f float64) ref.Val { return types.Double(f) }
	return []*field{
		optionalField[Params]("temperature", types.DoubleType, func(v *Params) *float64 { return v.Temperature }, double),
		optionalField[Params]("top_p", types.DoubleType, func(v *Params) *float64 { return v.TopP }, double),
		optionalField[Params]("seed", types.IntType, func(v *Params) *int64 { return v.Seed },
			func(n int64) ref.Val { return types.Int(n) }),
		listField[Params]("stop", stringsType, func(p *Params) any { return p.Stop },
			func(p *Params) bool { return len(p.Stop) != 0 }),
		stringField[Params]("tool_choice", func(v *Params) string { return v.ToolChoice }),
		stringField[Params]("response_format", func(v *Params) string { return v.ResponseFormat }),
		{
			name: "metadata",
			ft: types.FieldType{
				Type:    stringMapType,
				GetFrom: fixedGetter(func(p *Params) any { return p.Metadata }),
				IsSet:   fixedTester(func(p *Params) bool { return len(p.Metadata) != 0 }),
			},
			assumed: assumedMap,
		},
	}
}

func toolCallFields() []*field {
	return []*field{
		stringField[ToolCall]("id", func(v *ToolCall) string { return v.ID }),
		stringField[ToolCall]("name", func(v *ToolCall) string { return v.Name }),
		{
			name: "args",
			ft: types.FieldType{
				Type:    metaType,
				GetFrom: fixedGetter(func(p *ToolCall) any { return decodeToolArgs(p) }),
				IsSet:   fixedTester(func(p *ToolCall) bool { return len(bytes.TrimSpace(p.Arguments)) > 2 }),
			},
			assumed: assumedMap,
		},
	}
}

// decodeToolArgs decodes a tool call's arguments for `args`: empty arguments are an empty map,
// anything but a JSON object an evaluation error.
func decodeToolArgs(p *ToolCall) ref.Val {
	args := map[string]any{}
	if len(bytes.TrimSpace(p.Arguments)) > 0 {
		if err := jsonnum.Decode(p.Arguments, &args); err != nil || args == nil {
			return types.NewErr("tool call %q (%s): arguments are not a JSON object", p.ID, p.Name)
		}
	}
	return jsonObject(args)
}

func usageFields() []*field {
	return []*field{
		intField[Usage]("input_tokens", func(v *Usage) int64 { return v.InputTokens }),
		intField[Usage]("output_tokens", func(v *Usage) int64 { return v.OutputTokens }),
		intField[Usage]("cached_input_tokens", func(v *Usage) int64 { return v.CachedInputTokens }),
		intField[Usage]("cache_write_input_tokens", func(v *Usage) int64 { return v.CacheWriteInputTokens }),
		intField[Usage]("cache_write_1h_input_tokens", func(v *Usage) int64 { return v.CacheWrite1hInputTokens }),
		intField[Usage]("reasoning_tokens", func(v *Usage) int64 { return v.ReasoningTokens }),
	}
}

func responseFields() []*field {
	return []*field{
		stringField[ChatResponse]("text", func(v *ChatResponse) string { return v.Text }),
		stringField[ChatResponse]("model", func(v *ChatResponse) string { return v.Model }),
		objectField[ChatResponse, Usage]("usage", usageType, func(v *ChatResponse) *Usage { return &v.Usage }),
		listField[ChatResponse]("tool_calls", toolCallsType, func(p *ChatResponse) any { return &p.ToolCalls },
			func(p *ChatResponse) bool { return len(p.ToolCalls) != 0 }),
		stringField[ChatResponse]("finish_reason", func(v *ChatResponse) string { return v.FinishReason }),
		boolField[ChatResponse]("refusal", func(v *ChatResponse) bool { return v.Refusal }),
	}
}

func toolFields() []*field {
	return []*field{
		stringField[ToolInfo]("name", func(v *ToolInfo) string { return v.Name }),
		boolField[ToolInfo]("side_effecting", func(v *ToolInfo) bool { return v.SideEffecting }),
		boolField[ToolInfo]("retry_safe", func(v *ToolInfo) bool { return v.RetrySafe }),
		stringField[ToolInfo]("url_arg", func(v *ToolInfo) string { return v.URLArg }),
		stringField[ToolInfo]("path_arg", func(v *ToolInfo) string { return v.PathArg }),
	}
}

func sessionFields() []*field {
	return []*field{
		stringField[SessionInfo]("id", func(v *SessionInfo) string { return v.ID }),
		metaField[SessionInfo]("meta", func(v *SessionInfo) map[string]any { return v.Meta }),
	}
}

func itemFields() []*field {
	return []*field{
		stringField[Item]("id", func(v *Item) string { return v.ID }),
		stringField[Item]("content", func(v *Item) string { return v.Content }),
		stringField[Item]("source", func(v *Item) string { return v.Source }),
		doubleField[Item]("score", func(v *Item) float64 { return v.Score }),
		metaField[Item]("metadata", func(v *Item) map[string]any { return v.Metadata }),
	}
}

// variable is one CEL variable of a stage.
type variable struct {
	name    string
	typ     *types.Type
	assumed *checker.SizeEstimate
}

// stageVariables lists the variables of a stage and phase, args excluded (it depends on the
// schemas).
func stageVariables(s Stage, p Phase) []variable {
	run := variable{name: "run", typ: runType.typ}
	switch s {
	case Chat:
		vs := []variable{run,
			{name: "request", typ: requestType.typ},
			{name: "messages", typ: messagesType, assumed: assumedList},
		}
		if p == After {
			vs = append(vs, variable{name: "response", typ: responseType.typ})
		}
		return vs
	case Tool:
		vs := []variable{run, {name: "tool", typ: toolType.typ}}
		if p == After {
			vs = append(vs, variable{name: "result", typ: types.DynType})
		}
		return vs
	case Turn:
		vs := []variable{run,
			{name: "input", typ: inputType.typ},
			{name: "session", typ: sessionType.typ},
		}
		if p == After {
			vs = append(vs,
				variable{name: "output", typ: outputType.typ},
				variable{name: "status", typ: types.StringType, assumed: &checker.SizeEstimate{Max: 64}})
		}
		return vs
	case Admit:
		return []variable{{name: "item", typ: itemType.typ}}
	case State:
		// value and state are typed from the fields' schemas (newEnv).
		return []variable{run, {name: "field", typ: types.StringType, assumed: &checker.SizeEstimate{Max: 256}}}
	}
	return nil
}

var _ ref.Val = (*object)(nil)
