package jsonnum

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// jsonNumber is the grammar of a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzNumber checks Number against exact arithmetic: a float64 only when
// its shortest decimal form is the number written, an int64 only for an integer written without
// fraction or exponent that no float64 holds, the json.Number otherwise.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "0.1", "1e2", "9007199254740993", "9007199254740993.0", "9223372036854775808",
		"-9223372036854775808", "1e400", "1e-400", "5e-324", "3e-324", "2.2250738585072011e-308", "0.1000000000000000055511151231257827",
		"1.7976931348623157e308", "1.7976931348623159e308", "100000000000000000000", "123456789012345.6", "0e-99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !jsonNumber.MatchString(s) {
			return
		}
		got := Number(json.Number(s))
		if e := exponent(s); e < -2000 || e > 2000 || len(s) > 400 {
			return // exact arithmetic on it is too costly
		}
		want, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("%s: big.Rat does not read it", s)
		}
		// A float64 holds the number when its shortest decimal form (the
		// text encoding/json writes it back as) is that number.
		fl, err := strconv.ParseFloat(s, 64)
		short, _ := new(big.Rat).SetString(strconv.FormatFloat(fl, 'e', -1, 64))
		exactFloat := err == nil && short.Cmp(want) == 0
		plainInt := !strings.ContainsAny(s, ".eE") && want.IsInt() && want.Num().IsInt64()
		switch v := got.(type) {
		case float64:
			if !exactFloat || v != fl {
				t.Fatalf("%s: float64 %v, which is not the number written", s, v)
			}
		case int64:
			if exactFloat || !plainInt || want.Num().Int64() != v {
				t.Fatalf("%s: int64 %d (a float64 holds it: %v)", s, v, exactFloat)
			}
		case json.Number:
			if exactFloat || plainInt {
				t.Fatalf("%s: kept as text, though a float64 (%v) or an int64 (%v) holds it", s, exactFloat, plainInt)
			}
		default:
			t.Fatalf("%s: %T", s, got)
		}
		if Exact(json.Number(s)) != !isNumber(got) {
			t.Fatalf("%s: Exact disagrees with Number", s)
		}
	})
}

func isNumber(v any) bool { _, ok := v.(json.Number); return ok }

// exponent returns the exponent written in the JSON number s (0 when none
// or when it does not fit an int: those are skipped as too large).
func exponent(s string) int {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return 0
	}
	e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	if err != nil {
		return 1 << 30
	}
	return e
}

// FuzzDecode: any text decodes or fails without a panic, as
// encoding/json accepts or refuses it, and what decodes holds only
// float64, int64 and the json.Number Number keeps.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a": [1, 9007199254740993, {"b": 1e400}], "c": "x"}`, `-0`, `[1e999999999]`, `{"a":1}{}`, `[`, `"x"`,
		`{"a": "\\"1234567890123456", "b": 123456789012345}`, `[0.00000000000001, -0.5, 1.5e1]`, `{"a": 1}  `, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v, slow any
		err := Decode(data, &v)
		if (err == nil) != json.Valid(data) {
			t.Fatalf("%q: Decode error %v, json.Valid %v", data, err, json.Valid(data))
		}
		// The shortcut for plain numbers decodes as reading each number
		// as a json.Number first does.
		serr := decode(data, &slow)
		if fmt.Sprint(err) != fmt.Sprint(serr) || !reflect.DeepEqual(v, slow) {
			t.Fatalf("%q: Decode %#v (%v), every number read as text %#v (%v)", data, v, err, slow, serr)
		}
		if err != nil {
			return
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case json.Number:
				if Exact(x) {
					t.Fatalf("%q: %s left a json.Number though it is exact", data, x)
				}
			case nil, bool, string, float64, int64:
			default:
				t.Fatalf("%q: %T", data, v)
			}
		}
		walk(v)
		_ = Canonical(v)
	})
}
