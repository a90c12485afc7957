package jsonnum

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		text string
		want any
	}{
		{"5", float64(5)},
		{"-5", float64(-5)},
		{"0", float64(0)},
		{"-0", float64(0)},
		{"0.1", 0.1},
		{"1.50", 1.5},
		{"1e2", float64(100)},
		{"1E+2", float64(100)},
		{"12.5e-1", 1.25},
		{"1e300", 1e300},
		{"0e999999999999999999999", float64(0)},
		{"5e-324", 5e-324},
		{"100000000000000000000", 1e20},
		{"9007199254740992", float64(9007199254740992)},
		{"9007199254740993", int64(9007199254740993)},
		{"-9007199254740993", int64(-9007199254740993)},
		{"9223372036854775807", int64(9223372036854775807)},
		{"1152921504606846976", int64(1152921504606846976)},
		{"9223372036854775808", json.Number("9223372036854775808")},
		{"9223372036854775809", json.Number("9223372036854775809")},
		{"123456789012345678901234567890", json.Number("123456789012345678901234567890")},
		{"9007199254740993.0", json.Number("9007199254740993.0")},
		{"0.1000000000000000055511151231257827", json.Number("0.1000000000000000055511151231257827")},
		{"1e400", json.Number("1e400")},
		{"-1e400", json.Number("-1e400")},
		{"1e-400", json.Number("1e-400")},
		{"1e-99999999999999999999999", json.Number("1e-99999999999999999999999")},
		{"3e-324", json.Number("3e-324")},
	} {
		got := Number(json.Number(tc.text))
		assert.Equal(t, tc.want, got, tc.text)
		_, inexact := tc.want.(json.Number)
		assert.Equal(t, !inexact, Exact(json.Number(tc.text)), tc.text)
	}
}

func TestDecode(t *testing.T) {
	var m map[string]any
	require.NoError(t, Decode([]byte(`{"a": [1, 9007199254740993, {"b": 1e400}], "c": "x"}`), &m))
	assert.Equal(t, map[string]any{"a": []any{float64(1), int64(9007199254740993), map[string]any{"b": json.Number("1e400")}}, "c": "x"}, m)
	var paths []string
	Inexact(m, "args", func(p string, n json.Number) bool { paths = append(paths, p+"="+string(n)); return true })
	assert.Equal(t, []string{"args.a.2.b=1e400"}, paths)

	var v any
	require.NoError(t, Decode([]byte(` 12 `), &v))
	assert.Equal(t, float64(12), v)
	for _, bad := range []string{``, `{`, `{} {}`, `{}]`, `[1,]`} {
		assert.Error(t, Decode([]byte(bad), &v), bad)
	}
}

// TestShortcutAgreesWithTheDigits: the shortcut for numbers of at most 15
// significant digits decides as comparing the digits does.
func TestShortcutAgreesWithTheDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		digits := 1 + r.IntN(20)
		point := r.IntN(digits + 1)
		for i := range digits {
			if i == point && i > 0 {
				b.WriteByte('.')
			}
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		if r.IntN(2) == 0 {
			b.WriteString("e" + strconv.Itoa(r.IntN(660)-330))
		}
		s := b.String()
		f, ok := exactFloat(s)
		pf, err := strconv.ParseFloat(s, 64)
		if err != nil {
			require.False(t, ok, s)
			continue
		}
		require.Equal(t, sameDecimal(s, pf), ok, s)
		if ok {
			require.Equal(t, pf, f, s)
		}
	}
}

func TestCanonical(t *testing.T) {
	negZero := math.Copysign(0, -1)
	in := map[string]any{"a": json.Number("100.0"), "b": []any{negZero, json.Number("-0"), "x"},
		"c": map[string]any{"d": json.Number("9007199254740993"), "e": json.Number("1e400")}, "f": 2.5}
	got := Canonical(in)
	assert.Equal(t, map[string]any{"a": 100.0, "b": []any{0.0, 0.0, "x"},
		"c": map[string]any{"d": int64(9007199254740993), "e": json.Number("1e400")}, "f": 2.5}, got)
	assert.False(t, math.Signbit(got.(map[string]any)["b"].([]any)[0].(float64)))
	assert.Equal(t, json.Number("100.0"), in["a"], "v is not changed")
	assert.True(t, math.Signbit(in["b"].([]any)[0].(float64)))

	plain := map[string]any{"a": 1.0, "b": []any{int64(9007199254740993), "x", map[string]any{"c": 0.0}}}
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		if Canonical(plain) == nil {
			t.Fatal("nil")
		}
	}), "a value holding nothing to change is returned as it is")
}

// TestDecodeOfPlainNumbersCostsWhatEncodingJSONDoes: arguments whose
// numbers a float64 holds at a glance (at most 15 digits, no exponent)
// were decoded through json.Number strings, 10 allocations more than
// encoding/json for a small call; they are decoded as encoding/json
// decodes them.
func TestDecodeOfPlainNumbersCostsWhatEncodingJSONDoes(t *testing.T) {
	data := []byte(`{"order_id":"A1234","amount":50.25,"items":[{"sku":"X1","qty":2,"price":10.5},{"qty":-1,"price":0.001}],"note":"9007199254740993e5"}`)
	std := testing.AllocsPerRun(50, func() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m))
	})
	ours := testing.AllocsPerRun(50, func() {
		var m map[string]any
		require.NoError(t, Decode(data, &m))
	})
	assert.Equal(t, std, ours)
	var m map[string]any
	require.NoError(t, Decode([]byte(`{"a": 9007199254740993, "b": "x"}`), &m))
	assert.Equal(t, map[string]any{"a": int64(9007199254740993), "b": "x"}, m, "a long number takes the long way")
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"0", "0"}, {"-0", "0"}, {"-0.0e5", "0"}, {"5", "5"}, {"-5", "-5"},
		{"100.0", "100"}, {"1e2", "100"}, {"1e+21", "1000000000000000000000"}, {"-1E21", "-1000000000000000000000"},
		{"1e-7", "0.0000001"}, {"1.5e-7", "0.00000015"}, {"0.1", "0.1"}, {"12.3400", "12.34"},
		{"123456789012345678901234", "123456789012345678901234"}, {"1.2345e3", "1234.5"}, {"1.2345e2", "123.45"},
		{"1.2345e-1", "0.12345"}, {"0.1000000000000000055511151231257827", "0.1000000000000000055511151231257827"},
		{"9007199254740993", "9007199254740993"},
	} {
		got, ok := Plain(json.Number(tc.text), 400)
		require.True(t, ok, tc.text)
		assert.Equal(t, tc.want, got, tc.text)
	}
	got, ok := Plain("1e400", 401)
	require.True(t, ok)
	assert.Equal(t, "1"+strings.Repeat("0", 400), got)
	for _, bad := range []string{"", "x", "1e", "+1", "0012", " 1", "1 ", `"1"`, "true", "1e401", "1e-400", "1e999999999999999999", "1e9223372036854775807", "-1e-9223372036854775807"} {
		_, ok := Plain(json.Number(bad), 400)
		assert.False(t, ok, bad)
	}
	// The plain form of every float64's shortest text is the number
	// FormatFloat writes without exponent.
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		got, ok := Plain(json.Number(strconv.FormatFloat(f, 'g', -1, 64)), 400)
		require.True(t, ok, f)
		want := strconv.FormatFloat(f, 'f', -1, 64)
		if want == "-0" {
			want = "0"
		}
		assert.Equal(t, want, got)
	}
}

// TestPlainText: a number is read in plain decimal form where it has one
// within MaxPlain, as written otherwise.
func TestPlainText(t *testing.T) {
	for in, want := range map[string]string{
		"4.111111111111111e15": "4111111111111111", "1e-7": "0.0000001", "-0.0": "0", "1.50": "1.5",
		"1e999999": "1e999999",
	} {
		assert.Equal(t, want, PlainText(json.Number(in)), in)
	}
}
