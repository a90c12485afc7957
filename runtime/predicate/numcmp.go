package predicate

import (
	"math"

	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// exactComparisons is a program decorator: ==, !=, <, <=, > and >= compare
// an int with a double as the numbers they are, and `in` compares a list's
// elements so. CEL rounds the int to a double first, so 9007199254740993
// (an int64 argument or result, above 2^53) equals 9007199254740992.0, and
// 9223372036854775807 equals 9223372036854775808.0: a guard would decide
// on a neighbour of the number the call carries. Other operands compare as
// CEL compares them.
func exactComparisons(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || len(call.Args()) != 2 {
		return i, nil
	}
	switch call.Function() {
	case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals, operators.In:
	default:
		return i, nil
	}
	return &exactComparison{InterpretableCall: call, lhs: call.Args()[0], rhs: call.Args()[1]}, nil
}

// exactComparison is one comparison exactComparisons decorates. It answers
// the call from its operands' values, evaluated once.
type exactComparison struct {
	interpreter.InterpretableCall
	lhs, rhs interpreter.InterpretableV2
}

// Eval implements interpreter.Interpretable.
func (c *exactComparison) Eval(a interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(a))
}

// Exec implements interpreter.InterpretableV2: the operands are evaluated
// left to right, an error or unknown is the result, as for CEL's own
// operators.
func (c *exactComparison) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	l := c.lhs.Exec(frame)
	if types.IsError(l) {
		return l
	}
	r := c.rhs.Exec(frame)
	if types.IsError(r) {
		return r
	}
	var unk *types.Unknown
	unk, _ = types.MaybeMergeUnknowns(l, unk)
	unk, _ = types.MaybeMergeUnknowns(r, unk)
	if unk != nil {
		return unk
	}
	fn := c.Function()
	if fn == operators.In {
		return in(l, r)
	}
	cmp, mixed := compareIntDouble(l, r)
	switch fn {
	case operators.Equals:
		if mixed {
			return types.Bool(cmp == 0)
		}
		return types.Equal(l, r)
	case operators.NotEquals:
		if mixed {
			return types.Bool(cmp != 0)
		}
		eq, ok := types.Equal(l, r).(types.Bool)
		if !ok {
			return types.NoSuchOverloadErr()
		}
		return !eq
	}
	if !mixed {
		if isNaN(l) || isNaN(r) {
			return types.False
		}
		cmpr, ok := l.(traits.Comparer)
		if !ok {
			return types.MaybeNoSuchOverloadErr(l)
		}
		v := cmpr.Compare(r)
		c, ok := v.(types.Int)
		if !ok {
			return v // an error: no comparison of these operands
		}
		cmp = int(c)
	} else if cmp == unordered {
		return types.False
	}
	switch fn {
	case operators.Less:
		return types.Bool(cmp < 0)
	case operators.LessEquals:
		return types.Bool(cmp <= 0)
	case operators.Greater:
		return types.Bool(cmp > 0)
	default: // operators.GreaterEquals
		return types.Bool(cmp >= 0)
	}
}

// in is CEL's `in` with a list's elements compared as == compares them:
// an int is not in a list holding only the double next to it.
func in(elem, container ref.Val) ref.Val {
	list, ok := container.(traits.Lister)
	if !ok {
		if c, ok := container.(traits.Container); ok {
			return c.Contains(elem)
		}
		return types.ValOrErr(container, "no such overload")
	}
	for it := list.Iterator(); it.HasNext() == types.True; {
		e := it.Next()
		if cmp, mixed := compareIntDouble(elem, e); mixed {
			if cmp == 0 {
				return types.True
			}
		} else if types.Equal(elem, e) == types.True {
			return types.True
		}
	}
	return types.False
}

// unordered is the comparison of a number with NaN.
const unordered = 2

// isNaN reports whether v is a double NaN.
func isNaN(v ref.Val) bool {
	d, ok := v.(types.Double)
	return ok && math.IsNaN(float64(d))
}

// compareIntDouble compares an int with a double (either order) exactly:
// -1, 0 or 1 as l is below, equal to or above r, unordered when the double
// is NaN; mixed is false for any other pair of operands.
func compareIntDouble(l, r ref.Val) (cmp int, mixed bool) {
	switch x := l.(type) {
	case types.Int:
		if d, ok := r.(types.Double); ok {
			return intVsDouble(int64(x), float64(d)), true
		}
	case types.Double:
		if i, ok := r.(types.Int); ok {
			c := intVsDouble(int64(i), float64(x))
			if c == unordered {
				return c, true
			}
			return -c, true
		}
	}
	return 0, false
}

// intVsDouble compares i with d exactly: -1, 0 or 1, or unordered for a
// NaN.
func intVsDouble(i int64, d float64) int {
	switch {
	case math.IsNaN(d):
		return unordered
	case d < -(1 << 63):
		return 1
	case d >= 1<<63:
		return -1
	}
	// -2^63 <= d < 2^63: its integer part is an int64, exactly.
	t := math.Trunc(d)
	ti := int64(t)
	switch {
	case i < ti:
		return -1
	case i > ti:
		return 1
	case d > t:
		return -1
	case d < t:
		return 1
	}
	return 0
}
