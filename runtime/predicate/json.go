package predicate

import (
	"errors"
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// jsonObject is the CEL value of a JSON object (args, a tool result, run.meta, session.meta,
// item.metadata, a tool call's arguments, and every object inside them): a map(string, dyn) in
// which a member whose value is null reads as absent. has() is false for it, an optional read
// (m.?k, m[?'k']) is empty, 'k' in m is false, m.k and m['k'] are "no such key" errors, and
// size, iteration and equality skip it.
//
// cel-go reads a Go map[string]any by a plain lookup that sees the null, so no such map reaches
// an evaluation: the activations, field getters and the adapter hand objects over as a
// jsonObject. A map is one pointer, so the conversion allocates nothing.
type jsonObject map[string]any

var (
	_ traits.Mapper = jsonObject(nil)
	_ traits.Zeroer = jsonObject(nil)
)

// asObject returns the JSON object a value holds, as a Go map: a map[string]any or a
// jsonObject.
func asObject(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case jsonObject:
		return m, true
	}
	return nil, false
}

// jsonValue hands a JSON value decoded by encoding/json to an evaluation: an object as a
// jsonObject, an array as a CEL list whose objects are jsonObjects, anything else as it is.
func jsonValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return jsonObject(x)
	case []any:
		return types.NewDynamicList(typeAdapter, x)
	}
	return v
}

// present returns m without its null members; m itself when it has none.
func (m jsonObject) present() map[string]any {
	n := m.size()
	if n == len(m) {
		return m
	}
	out := make(map[string]any, n)
	for k, v := range m {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// size counts the members that are not null.
func (m jsonObject) size() int {
	n := 0
	for _, v := range m {
		if v != nil {
			n++
		}
	}
	return n
}

// ConvertToNative implements ref.Val: the map without its null members.
func (m jsonObject) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return types.NewStringInterfaceMap(typeAdapter, m.present()).ConvertToNative(typeDesc)
}

// ConvertToType implements ref.Val.
func (m jsonObject) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, typeVal)
}

// Equal implements ref.Val: maps are equal when their members that are not null are.
func (m jsonObject) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if n, ok := o.Size().(types.Int); !ok || int(n) != m.size() {
		return types.False
	}
	for k, v := range m {
		if v == nil {
			continue
		}
		ov, found := o.Find(types.String(k))
		if !found {
			return types.False
		}
		if eq := typeAdapter.NativeToValue(v).Equal(ov); eq != types.True {
			return types.False
		}
	}
	return types.True
}

// Type implements ref.Val.
func (m jsonObject) Type() ref.Type { return types.MapType }

// Value implements ref.Val; it is the Go map, nulls included.
func (m jsonObject) Value() any { return map[string]any(m) }

// IsZeroValue implements traits.Zeroer.
func (m jsonObject) IsZeroValue() bool { return m.size() == 0 }

// Contains implements traits.Container: 'k' in m.
func (m jsonObject) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found && v != nil {
		return v // a key that is no string
	}
	return types.Bool(found)
}

// Get implements traits.Indexer: m['k'].
func (m jsonObject) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Find implements traits.Mapper: a member that is null is not found.
func (m jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.ValOrErr(key, "no such key: %v", key), false
	}
	switch v := m[string(k)].(type) {
	case nil:
		return nil, false
	case string: // the kinds encoding/json decodes to, without the adapter's type switch
		return types.String(v), true
	case float64:
		return types.Double(v), true
	case bool:
		return types.Bool(v), true
	case map[string]any:
		return jsonObject(v), true
	default:
		return typeAdapter.NativeToValue(v), true
	}
}

// Iterator implements traits.Iterable: the keys whose values are not null.
func (m jsonObject) Iterator() traits.Iterator {
	keys := make([]ref.Val, 0, len(m))
	for k, v := range m {
		if v != nil {
			keys = append(keys, types.String(k))
		}
	}
	return &keyIterator{keys: keys}
}

// Size implements traits.Sizer: the members that are not null.
func (m jsonObject) Size() ref.Val { return types.Int(m.size()) }

// keyIterator iterates over the keys of a jsonObject.
type keyIterator struct {
	keys []ref.Val
	i    int
}

var _ traits.Iterator = (*keyIterator)(nil)

func (it *keyIterator) HasNext() ref.Val { return types.Bool(it.i < len(it.keys)) }

func (it *keyIterator) Next() ref.Val {
	if it.i >= len(it.keys) {
		return nil
	}
	k := it.keys[it.i]
	it.i++
	return k
}

func (it *keyIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("type conversion on iterators not supported")
}

func (it *keyIterator) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("type conversion on iterators not supported")
}

func (it *keyIterator) Equal(ref.Val) ref.Val {
	return types.NewErr("equality on iterators not supported")
}

func (it *keyIterator) Type() ref.Type { return types.IteratorType }

func (it *keyIterator) Value() any { return nil }
