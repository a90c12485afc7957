package predicate

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// exactNumbers is a program decorator: comparisons and conversions of
// numbers decide on the numbers they are (exactComparison,
// exactConversion), where CEL rounds an int to a double.
func exactNumbers(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	switch args := call.Args(); {
	case len(args) == 2 && comparison(call.Function()):
		return &exactComparison{InterpretableCall: call, lhs: args[0], rhs: args[1]}, nil
	case len(args) == 1 && (call.Function() == overloads.TypeConvertString || call.Function() == overloads.TypeConvertDouble):
		return &exactConversion{InterpretableCall: call, arg: args[0]}, nil
	}
	return i, nil
}

// comparison reports the functions exactComparison answers.
func comparison(fn string) bool {
	switch fn {
	case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals, operators.In:
		return true
	}
	return false
}

// exactComparison is one comparison exactNumbers decorates: ==, !=, <, <=,
// > and >= compare an int with a double as the numbers they are, and `in`
// compares a list's elements so. CEL rounds the int to a double first, so
// 9007199254740993 (an int64 argument or result, above 2^53) equals
// 9007199254740992.0, and 9223372036854775807 equals
// 9223372036854775808.0: a guard would decide on a neighbour of the number
// the call carries. Other operands compare as CEL compares them. It
// answers the call from its operands' values, evaluated once.
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
	switch fn {
	case operators.Equals:
		return exactEqual(l, r)
	case operators.NotEquals:
		eq, ok := exactEqual(l, r).(types.Bool)
		if !ok {
			return types.NoSuchOverloadErr()
		}
		return !eq
	}
	cmp, mixed := compareIntDouble(l, r)
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
		if exactEqual(elem, it.Next()) == types.True {
			return types.True
		}
	}
	return types.False
}

// exactEqual is CEL's == with an int and a double compared as the numbers
// they are, also as elements of two lists or values of two maps at any
// depth: CEL compares those as it compares two numbers alone, the int
// rounded to a double, so [9007199254740993] would equal
// [9007199254740992.0].
func exactEqual(l, r ref.Val) ref.Val {
	if cmp, mixed := compareIntDouble(l, r); mixed {
		return types.Bool(cmp == 0)
	}
	switch x := l.(type) {
	case traits.Lister:
		y, ok := r.(traits.Lister)
		if !ok {
			break
		}
		if x.Size() != y.Size() {
			return types.False
		}
		n, _ := x.Size().(types.Int)
		for i := types.Int(0); i < n; i++ {
			if eq := exactEqual(x.Get(i), y.Get(i)); eq != types.True {
				return eq
			}
		}
		return types.True
	case traits.Mapper:
		y, ok := r.(traits.Mapper)
		if !ok {
			break
		}
		if x.Size() != y.Size() {
			return types.False
		}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			v, found := y.Find(k)
			if !found {
				return types.False
			}
			if eq := exactEqual(x.Get(k), v); eq != types.True {
				return eq
			}
		}
		return types.True
	}
	return types.Equal(l, r)
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

// exactConversion is one conversion to string or double exactNumbers
// decorates: string() of a double writes it in plain decimal form, the
// number it is digit for digit (1000000, not 1e+06; 0.0000001; -0 as 0), as
// tool_policy's arg_patterns read a number, so a guard reading a number's
// digits reads the digits the call carries; and double() of an int, a uint
// or a decimal string a double does not hold exactly (9007199254740993,
// "100.000000000000001") is an evaluation error, never the neighbour CEL
// rounds it to. Other conversions are CEL's.
type exactConversion struct {
	interpreter.InterpretableCall
	arg interpreter.InterpretableV2
}

// Eval implements interpreter.Interpretable.
func (c *exactConversion) Eval(a interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(a))
}

// Exec implements interpreter.InterpretableV2: every overload of string()
// and double() converts its operand (ref.Val.ConvertToType), or returns it.
func (c *exactConversion) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	v := c.arg.Exec(frame)
	if types.IsUnknownOrError(v) {
		return v
	}
	if c.Function() == overloads.TypeConvertString {
		if d, ok := v.(types.Double); ok && !math.IsNaN(float64(d)) && !math.IsInf(float64(d), 0) {
			if d == 0 {
				return types.String("0")
			}
			return types.String(strconv.FormatFloat(float64(d), 'f', -1, 64))
		}
		return v.ConvertToType(types.StringType)
	}
	switch x := v.(type) {
	case types.Int:
		if f := float64(x); f >= 1<<63 || int64(f) != int64(x) {
			return types.NewErr("double(%d): a double does not hold this int exactly", int64(x))
		}
	case types.Uint:
		if f := float64(x); f >= 1<<64 || uint64(f) != uint64(x) {
			return types.NewErr("double(%du): a double does not hold this uint exactly", uint64(x))
		}
	case types.String:
		if n, ok := decimalNumber(string(x)); ok {
			if _, exact := jsonnum.ExactFloat(n); !exact {
				return types.NewErr("double(%q): a double does not hold this number exactly", clipNumber(n))
			}
		}
	}
	return v.ConvertToType(types.DoubleType)
}

// decimalNumber returns s, a decimal number as strconv.ParseFloat reads
// one (a sign, digits with a point and an exponent, either side of the
// point empty), as a JSON number: "+.5" as 0.5, "007." as 7. False for any
// other text (hexadecimal, "inf", "NaN").
func decimalNumber(s string) (json.Number, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	digits := func(s string) (string, string) {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return s[:i], s[i:]
	}
	intPart, rest := digits(s)
	var frac, exp string
	if strings.HasPrefix(rest, ".") {
		frac, rest = digits(rest[1:])
	}
	if intPart == "" && frac == "" {
		return "", false
	}
	if rest != "" && (rest[0] == 'e' || rest[0] == 'E') {
		sign := ""
		rest = rest[1:]
		if rest != "" && (rest[0] == '+' || rest[0] == '-') {
			sign, rest = rest[:1], rest[1:]
		}
		var e string
		if e, rest = digits(rest); e == "" {
			return "", false
		}
		exp = "e" + sign + e
	}
	if rest != "" {
		return "", false
	}
	if intPart = strings.TrimLeft(intPart, "0"); intPart == "" {
		intPart = "0"
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(intPart)
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	b.WriteString(exp)
	return json.Number(b.String()), true
}
