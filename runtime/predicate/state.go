package predicate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// The type names of the state stage's schema-typed variables.
const (
	valueRootName = "agentc.value"
	stateRootName = "agentc.state"
)

// stateVariables declares the state stage's `value` (typed from ValueSchema: any JSON type) and
// `state` (typed from StateSchema, an object whose properties are the fields; a field that is
// not set is absent, so `has(state.x)` tests it).
func (e *Env) stateVariables(cfg EnvConfig) ([]cel.EnvOption, error) {
	at := &argsTypes{objects: e.prov.objects}
	vnode := dynNode
	if raw := bytes.TrimSpace(cfg.ValueSchema); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		n, err := parseSchemaNode(raw, 0, "")
		if err != nil {
			return nil, fmt.Errorf("value %w", err)
		}
		vnode = n
	}
	e.valueType = at.build(vnode, valueRootName)
	e.valueConv = converter(vnode)
	addSchemaHints(e.hints, "value", vnode, 0)
	stateType := types.NewMapType(types.StringType, types.DynType)
	snode, typed, err := parseArgsSchema(cfg.StateSchema)
	if err != nil {
		return nil, fmt.Errorf("state %w", err)
	}
	if typed {
		stateType = at.build(snode, stateRootName)
		addSchemaHints(e.hints, "state", snode, 0)
	}
	return []cel.EnvOption{cel.Variable("value", e.valueType), cel.Variable("state", stateType)}, nil
}

// StateVars is the activation of the state stage. Value is the value set (or the element
// appended) and State the run's state fields, both as decoded from JSON; they are read, never
// modified.
type StateVars struct {
	Run   RunInfo
	Field string
	Value any
	State map[string]any
}

// ResolveName implements interpreter.Activation.
func (v *StateVars) ResolveName(name string) (any, bool) {
	switch name {
	case "value":
		return jsonValue(v.Value), true
	case "state":
		return jsonObject(v.State), true
	case "field":
		return v.Field, true
	case "run":
		return &v.Run, true
	}
	return nil, false
}

// Parent implements interpreter.Activation; it is always nil.
func (v *StateVars) Parent() Activation { return nil }

// StateActivation returns the activation of a state-stage program over a JSON value: value is
// converted to the type the field's schema gives it (a JSON number to int for an integer
// field), so that arithmetic on it is typed as the checker saw it. A value that does not have
// the schema's type is an error.
func (p *Program) StateActivation(run RunInfo, field string, value any, state map[string]any) (*StateVars, error) {
	if conv := p.checked.env.valueConv; conv != nil && value != nil {
		c, err := conv(value)
		if err != nil {
			return nil, &EvalError{Source: p.checked.Source, Err: fmt.Errorf("value: %w", err)}
		}
		value = c
	}
	if state == nil {
		state = map[string]any{}
	}
	return &StateVars{Run: run, Field: field, Value: value, State: state}, nil
}

// EvalValue evaluates a program checked with EnvConfig.Value (a state `set` transform) and
// returns its result as a JSON value: nil, bool, float64 (every number a float64 holds; an int
// it does not, such as 9007199254740993, is an int64, as runtime.DecodeArgs decodes it),
// string, []any or map[string]any. Errors are *EvalError, as for Eval.
func (p *Program) EvalValue(ctx context.Context, vars Activation) (any, error) {
	out, err := p.eval(ctx, vars)
	if err != nil {
		return nil, err
	}
	v, err := jsonOf(out, 0)
	if err != nil {
		return nil, &EvalError{Source: p.checked.Source, Err: err}
	}
	return v, nil
}

// exactInt is an int's JSON form as runtime.DecodeArgs decodes a number: a
// float64 when a float64 holds it, else the int64 itself (9007199254740993).
func exactInt(i int64) any {
	if f := float64(i); f < 1<<63 && int64(f) == i {
		return f
	}
	return i
}

// jsonOf converts a CEL value to its JSON form.
func jsonOf(v ref.Val, depth int) (any, error) {
	if depth > maxSchemaDepth*4 {
		return nil, fmt.Errorf("result nests deeper than %d levels", maxSchemaDepth*4)
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return exactInt(int64(x)), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("the uint %d is beyond int64", uint64(x))
		}
		return exactInt(int64(x)), nil
	case types.Double:
		return float64(x), nil
	case types.String:
		return string(x), nil
	case jsonObject:
		// Every member is kept, nulls included: a value set whole is not changed.
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == nil {
				out[k] = nil
				continue
			}
			j, err := jsonOf(typeAdapter.NativeToValue(e), depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = j
		}
		return out, nil
	case *object:
		// A schema-typed object is its JSON map; a fixed object (run) its Go value.
		if m, ok := x.v.(map[string]any); ok {
			return m, nil
		}
		b, err := json.Marshal(x.v)
		if err != nil {
			return nil, err
		}
		var out any
		return out, jsonnum.Decode(b, &out)
	}
	if l, ok := v.(traits.Lister); ok {
		n, _ := l.Size().(types.Int)
		out := make([]any, 0, int(n))
		for it := l.Iterator(); it.HasNext() == types.True; {
			e, err := jsonOf(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("result has a map key of type %s, want string", k.Type().TypeName())
			}
			e, err := jsonOf(m.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	if err, ok := v.(*types.Err); ok {
		return nil, err
	}
	return nil, fmt.Errorf("result of type %s is not JSON", v.Type().TypeName())
}

// describeValueType names a value type for messages: the schema's objects
// as "an object of the schema", other types as cel-go prints them.
func describeValueType(t *types.Type) string {
	if t.Kind() == types.StructKind {
		return "an object of that shape"
	}
	return t.String()
}
