package predicate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// objectType is one CEL object type served by the provider: either a fixed type backed by a Go
// struct (request, tool, ...) or an args type backed by a JSON object (map[string]any).
type objectType struct {
	name   string
	typ    *types.Type
	fields map[string]*field
	names  []string // sorted field names
	json   bool     // backed by map[string]any decoded from JSON (args types)
}

// field is one field of an objectType.
type field struct {
	name     string
	ft       types.FieldType
	required bool                  // args only: listed in the schema's "required"
	declared *checker.SizeEstimate // size bound declared by the schema (maxLength, maxItems, enum)
	assumed  *checker.SizeEstimate // size assumed for cost estimation when nothing is declared
}

func newObjectType(name string, jsonBacked bool, fields ...*field) *objectType {
	o := &objectType{
		name:   name,
		typ:    types.NewObjectType(name, traits.FieldTesterType, traits.IndexerType),
		fields: make(map[string]*field, len(fields)),
		json:   jsonBacked,
	}
	for _, f := range fields {
		o.fields[f.name] = f
		o.names = append(o.names, f.name)
	}
	slices.Sort(o.names)
	return o
}

// provider is the types.Provider of one environment: the fixed object types of the stages, the
// args types derived from the tool schemas, and the standard registry for everything else.
type provider struct {
	base    *types.Registry
	objects map[string]*objectType
}

func (p *provider) lookup(name string) (*objectType, bool) {
	o, ok := p.objects[name]
	if !ok {
		o, ok = fixedObjects[name]
	}
	return o, ok
}

// EnumValue implements types.Provider.
func (p *provider) EnumValue(enumName string) ref.Val { return p.base.EnumValue(enumName) }

// FindIdent implements types.Provider. The agentc type names resolve to their type values.
func (p *provider) FindIdent(identName string) (ref.Val, bool) {
	if o, ok := p.lookup(identName); ok {
		return o.typ, true
	}
	return p.base.FindIdent(identName)
}

// FindStructType implements types.Provider.
func (p *provider) FindStructType(structType string) (*types.Type, bool) {
	if o, ok := p.lookup(structType); ok {
		return types.NewTypeTypeWithParam(o.typ), true
	}
	return p.base.FindStructType(structType)
}

// FindStructFieldNames implements types.Provider.
func (p *provider) FindStructFieldNames(structType string) ([]string, bool) {
	if o, ok := p.lookup(structType); ok {
		return slices.Clone(o.names), true
	}
	return p.base.FindStructFieldNames(structType)
}

// FindStructFieldType implements types.Provider.
func (p *provider) FindStructFieldType(structType, fieldName string) (*types.FieldType, bool) {
	if o, ok := p.lookup(structType); ok {
		f, ok := o.fields[fieldName]
		if !ok {
			return nil, false
		}
		return &f.ft, true
	}
	return p.base.FindStructFieldType(structType, fieldName)
}

// NewValue implements types.Provider. The agentc object types are inputs only: constructing one
// in an expression is an error.
func (p *provider) NewValue(structType string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.lookup(structType); ok {
		return types.NewErr("cannot construct %s: it is an input type", structType)
	}
	return p.base.NewValue(structType, fields)
}

// adapter converts the Go values of activations into CEL values. It wraps the fixed object types,
// converts json.Number to double, hands JSON objects over as jsonObject (a null member reads as
// absent) and keeps itself as the adapter of nested JSON lists so that numbers and objects deep
// inside dyn values are converted too.
type adapter struct {
	base types.Adapter
}

// NativeToValue implements types.Adapter.
func (a *adapter) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case ref.Val:
		return v
	case map[string]any:
		return jsonObject(v)
	case []any:
		return types.NewDynamicList(a, v)
	case json.Number:
		return jsonNumberValue(v)
	case *string:
		return types.String(*v)
	case *RunInfo:
		return &object{t: runType, v: v}
	case *ChatRequest:
		return &object{t: requestType, v: v}
	case *ChatResponse:
		return &object{t: responseType, v: v}
	case *Usage:
		return &object{t: usageType, v: v}
	case *Message:
		return &object{t: messageType, v: v}
	case Message:
		return &object{t: messageType, v: &v}
	case []Message:
		return objectList(messageType, v)
	case *[]Message:
		return objectList(messageType, *v)
	case *ToolInfo:
		return &object{t: toolType, v: v}
	case *TurnInput:
		return &object{t: inputType, v: v}
	case *SessionInfo:
		return &object{t: sessionType, v: v}
	case *TurnOutput:
		return &object{t: outputType, v: v}
	case *Item:
		return &object{t: itemType, v: v}
	case *Params:
		return &object{t: paramsType, v: v}
	case ToolDef:
		return &object{t: toolDefType, v: &v}
	case *ToolDef:
		return &object{t: toolDefType, v: v}
	case *[]ToolDef:
		return objectList(toolDefType, *v)
	case ToolCall:
		return &object{t: toolCallType, v: &v}
	case *ToolCall:
		return &object{t: toolCallType, v: v}
	case *[]ToolCall:
		return objectList(toolCallType, *v)
	}
	return a.base.NativeToValue(value)
}

// objectList is the CEL list of elems, each an object of type t over its
// element: three allocations for the list, where a list of Go structs
// converted by reflection copies each element it yields into a new object.
// The list reads elems; it does not copy them.
func objectList[T any](t *objectType, elems []T) traits.Lister {
	objs := make([]object, len(elems))
	vals := make([]ref.Val, len(elems))
	for i := range elems {
		objs[i] = object{t: t, v: &elems[i]}
		vals[i] = &objs[i]
	}
	return types.NewRefValList(typeAdapter, vals)
}

// jsonNumberValue reads a JSON number as the runtime decodes one
// (runtime.DecodeArgs): a double when a double holds it exactly, an int
// when it is an integer only an int holds; any other (more digits, an
// exponent out of range, an integer beyond int) is an error, never a
// neighbour.
func jsonNumberValue(n json.Number) ref.Val {
	switch x := jsonnum.Number(n).(type) {
	case float64:
		return types.Double(x)
	case int64:
		return types.Int(x)
	}
	if _, err := strconv.ParseFloat(string(n), 64); err != nil && !errors.Is(err, strconv.ErrRange) {
		return types.NewErr("invalid JSON number %q", clipNumber(n))
	}
	return types.NewErr("the number %s is held exactly by neither a double nor an int", clipNumber(n))
}

// object is the CEL value of a fixed object type. v is a pointer to the Go struct; field access
// goes through the field table of t, the same getters the planner uses for typed selects.
type object struct {
	t *objectType
	v any
}

var (
	_ traits.Indexer     = (*object)(nil)
	_ traits.FieldTester = (*object)(nil)
)

// ConvertToNative implements ref.Val.
func (o *object) ConvertToNative(typeDesc reflect.Type) (any, error) {
	rv := reflect.ValueOf(o.v)
	if rv.Type().AssignableTo(typeDesc) {
		return o.v, nil
	}
	if rv.Elem().Type().AssignableTo(typeDesc) {
		return rv.Elem().Interface(), nil
	}
	return nil, fmt.Errorf("type conversion error from %s to %v", o.t.name, typeDesc)
}

// ConvertToType implements ref.Val.
func (o *object) ConvertToType(typeVal ref.Type) ref.Val {
	switch {
	case typeVal == types.TypeType:
		return o.t.typ
	case typeVal.TypeName() == o.t.name:
		return o
	}
	return types.NewErr("type conversion error from '%s' to '%s'", o.t.name, typeVal.TypeName())
}

// Equal implements ref.Val: two objects are equal when they have the same type and equal fields.
func (o *object) Equal(other ref.Val) ref.Val {
	ov, ok := other.(*object)
	return types.Bool(ok && ov.t == o.t && reflect.DeepEqual(o.v, ov.v))
}

// Type implements ref.Val.
func (o *object) Type() ref.Type { return o.t.typ }

// Value implements ref.Val; it returns the pointer to the Go struct.
func (o *object) Value() any { return o.v }

// fieldAt resolves the field an index names: the field, or the error value
// that Get and IsSet return for an index that is not a string or names no
// field of o.
func (o *object) fieldAt(index ref.Val) (*field, ref.Val) {
	name, ok := index.(types.String)
	if !ok {
		return nil, types.MaybeNoSuchOverloadErr(index)
	}
	f, ok := o.t.fields[string(name)]
	if !ok {
		return nil, types.NewErr("no such field '%s'", string(name))
	}
	return f, nil
}

// Get implements traits.Indexer.
func (o *object) Get(index ref.Val) ref.Val {
	f, errVal := o.fieldAt(index)
	if f == nil {
		return errVal
	}
	v, err := f.ft.GetFrom(o.v)
	if err != nil {
		return types.WrapErr(err)
	}
	if rv, ok := v.(ref.Val); ok {
		return rv
	}
	return typeAdapter.NativeToValue(v)
}

// IsSet implements traits.FieldTester.
func (o *object) IsSet(index ref.Val) ref.Val {
	f, errVal := o.fieldAt(index)
	if f == nil {
		return errVal
	}
	return types.Bool(f.ft.IsSet(o.v))
}

// typeAdapter is the adapter shared by every environment; it holds no per-environment state.
var typeAdapter = &adapter{base: types.DefaultTypeAdapter}
