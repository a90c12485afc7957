// Package jsonnum decodes JSON so that each number is the value its text
// spells, never a neighbour: encoding/json rounds every number to a
// float64, so 9007199254740993 decodes as 9007199254740992 and
// 0.1000000000000000055511151231257827 as 0.1, and a check that decides on
// the decoded value decides on another number than the text carries.
//
// A number float64 holds exactly decodes as a float64, as with
// encoding/json: one whose text spells the same number as the float64's
// shortest decimal form (5, 0.1, 1.50, 1e300, 100000000000000000000), the
// form encoding/json writes it back in. An integer written without
// fraction or exponent that float64 cannot hold so (9007199254740993,
// 1152921504606846976) but int64 can decodes as an int64. Any other number
// (more significant digits than float64 holds, an exponent out of its
// range, an integer beyond int64) stays a json.Number of its text, which
// Inexact reports.
package jsonnum

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
)

// Decode decodes data into v (a pointer, as for json.Unmarshal), numbers
// as the package says, and refuses data after the value as json.Unmarshal
// does.
func Decode(data []byte, v any) error {
	switch v.(type) {
	case *any, *map[string]any, *[]any:
		// Numbers of at most 15 digits and no exponent are all held
		// exactly by the float64 encoding/json decodes them to: decoded
		// so, at its cost (the text is not read twice into json.Number
		// strings). Invalid text takes the long way, for its error.
		if plainNumbers(data) && json.Unmarshal(data, v) == nil {
			return nil
		}
	}
	return decode(data, v)
}

// plainNumbers reports whether every number of the JSON text data (outside
// its strings) has at most 15 digits and no exponent: a float64 holds each
// exactly (see exactFloat). It allocates nothing.
func plainNumbers(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		if c != '-' && (c < '0' || c > '9') {
			continue
		}
		digits := 0
		for ; i < len(data); i++ {
			c = data[i]
			if c >= '0' && c <= '9' {
				digits++
			} else if c == 'e' || c == 'E' || c == '+' {
				return false
			} else if c != '.' && c != '-' {
				break
			}
		}
		if digits > 15 {
			return false
		}
		i-- // the byte after the number is read again
	}
	return true
}

// decode is Decode reading every number as a json.Number first.
func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid character after top-level value")
	}
	switch p := v.(type) {
	case *any:
		*p = Convert(*p)
	case *map[string]any:
		Convert(*p)
	case *[]any:
		Convert(*p)
	}
	return nil
}

// Convert replaces, in place, each json.Number in the maps and slices of
// v by its value (Number), and returns v with its own number converted.
func Convert(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				x[k] = Convert(e)
			}
		}
	case []any:
		for i, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				x[i] = Convert(e)
			}
		}
	case json.Number:
		return Number(x)
	}
	return v
}

// Number returns the value of n: a float64 when float64 holds it exactly
// (see the package documentation), an int64 when it is an integer that
// int64 holds and float64 does not, else n itself.
func Number(n json.Number) any {
	s := string(n)
	if f, ok := exactFloat(s); ok {
		return f
	}
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
	}
	return n
}

// Exact reports whether n is a number Number converts (float64 or int64
// hold it exactly).
func Exact(n json.Number) bool {
	_, ok := Number(n).(json.Number)
	return !ok
}

// ExactFloat returns the float64 of n and whether it is exactly the number
// n spells.
func ExactFloat(n json.Number) (float64, bool) { return exactFloat(string(n)) }

// HasInexact reports whether v holds a json.Number that Exact refuses, in
// its maps and slices at any depth. It allocates nothing.
func HasInexact(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if HasInexact(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if HasInexact(e) {
				return true
			}
		}
	case json.Number:
		return !Exact(x)
	}
	return false
}

// Inexact calls yield with the path (root, then .KEY or .INDEX per level)
// and the text of each json.Number in v that Exact refuses, until yield
// returns false. Map members are visited in no particular order.
func Inexact(v any, root string, yield func(path string, n json.Number) bool) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !Inexact(e, root+"."+k, yield) {
				return false
			}
		}
	case []any:
		for i, e := range x {
			if !Inexact(e, root+"."+strconv.Itoa(i), yield) {
				return false
			}
		}
	case json.Number:
		if !Exact(x) {
			return yield(root, x)
		}
	}
	return true
}

// Canonical returns v with each number in the form that encodes equal
// numbers alike, for a value keyed on its JSON text (a digest, an
// idempotency key): a json.Number as Number converts it (100.0 and 1e2 as
// 100), a negative zero as zero. v is returned itself when it holds
// neither, else a copy of its maps and slices; v is never changed.
func Canonical(v any) any {
	if !uncanonical(v) {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Canonical(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Canonical(e)
		}
		return out
	case json.Number:
		n := Number(x)
		if _, ok := n.(json.Number); ok {
			return x // neither float64 nor int64 holds it: its text
		}
		return Canonical(n)
	}
	return 0.0 // a negative zero
}

// uncanonical reports whether v holds a number Canonical changes. It
// allocates nothing.
func uncanonical(v any) bool {
	switch x := v.(type) {
	case float64:
		return x == 0 && math.Signbit(x)
	case map[string]any:
		for _, e := range x {
			if uncanonical(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if uncanonical(e) {
				return true
			}
		}
	case json.Number:
		return true
	}
	return false
}

// exactFloat parses the JSON number s and reports whether the float64 is
// the number s spells: its shortest decimal form has the same digits and
// exponent.
func exactFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	// Two decimals of at most 15 significant digits are further apart
	// than a float64's spacing, so one that parses to a normal float64
	// (or to zero, written as zero) is that float64's shortest form.
	switch n := significant(s); {
	case n == 0:
		return f, true
	case n <= 15 && math.Abs(f) >= smallestNormal:
		return f, true
	}
	return f, sameDecimal(s, f)
}

// sameDecimal reports whether the JSON number s spells the same number as
// the shortest decimal form of f.
func sameDecimal(s string, f float64) bool {
	want, ok := decimal(s)
	if !ok {
		return false
	}
	got, _ := decimal(strconv.FormatFloat(f, 'e', -1, 64))
	return want == got
}

// smallestNormal is the smallest positive normal float64: below it a
// float64 holds fewer digits.
const smallestNormal = 0x1p-1022

// significant counts the significant digits of the JSON number s, leading
// and trailing zeros left out.
func significant(s string) int {
	n, zeros, started := 0, 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 'e' || c == 'E':
			return n - zeros
		case c < '0' || c > '9':
		case c == '0' && !started:
		case c == '0':
			n++
			zeros++
		default:
			started = true
			n++
			zeros = 0
		}
	}
	return n - zeros
}

// dec is a decimal number: digits (no leading or trailing zero) times ten
// to exp, negated when neg; zero is the zero dec.
type dec struct {
	neg    bool
	digits string
	exp    int
}

// decimal returns the decimal number of s, a JSON number or a number
// formatted by strconv in the 'e' format; false when its exponent does not
// fit an int.
func decimal(s string) (dec, bool) {
	var d dec
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return dec{}, true
	}
	e := 0
	if exp != "" {
		var err error
		if e, err = strconv.Atoi(exp); err != nil {
			return dec{}, false
		}
	}
	d.digits = trimmed
	d.exp = e - len(frac) + len(digits) - len(trimmed)
	return d, true
}

// Plain returns the JSON number n in plain decimal form: no exponent, no
// leading zero before the point but one, no trailing zero after it, no
// point when it is an integer, and a negative zero as 0 (1e+21 as
// 1000000000000000000000, 1E-7 as 0.0000001, 100.0 as 100). It is the
// number n spells, digit for digit. False when n is not a JSON number or
// the form would be longer than limit bytes (1e999999999).
func Plain(n json.Number, limit int) (string, bool) {
	s := string(n)
	if !json.Valid([]byte(s)) || (s[0] != '-' && !isDigit(s[0])) || !isDigit(s[len(s)-1]) {
		return "", false // not a number, or one with white space around it
	}
	d, ok := decimal(s)
	if !ok || d.exp > limit || d.exp < -limit {
		return "", false
	}
	if d.digits == "" {
		return "0", true
	}
	sign := ""
	if d.neg {
		sign = "-"
	}
	var size int
	switch point := len(d.digits) + d.exp; {
	case d.exp >= 0:
		size = len(sign) + len(d.digits) + d.exp
	case point > 0:
		size = len(sign) + len(d.digits) + 1
	default:
		size = len(sign) + 2 - point + len(d.digits)
	}
	if size > limit {
		return "", false
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(sign)
	switch point := len(d.digits) + d.exp; {
	case d.exp >= 0:
		b.WriteString(d.digits)
		b.WriteString(strings.Repeat("0", d.exp))
	case point > 0:
		b.WriteString(d.digits[:point])
		b.WriteByte('.')
		b.WriteString(d.digits[point:])
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -point))
		b.WriteString(d.digits)
	}
	return b.String(), true
}

// MaxPlain bounds a number's plain decimal form where a reader takes it
// (PlainText): every float64's (at most 309 digits before the point, 324
// after it) fits it.
const MaxPlain = 1024

// PlainText returns the JSON number n in plain decimal form (Plain), the
// number a pattern or a detector reads whatever its spelling, or n's text
// as written when that form is longer than MaxPlain (1e999999, a number
// the tool chain refuses: neither float64 nor int64 holds it).
func PlainText(n json.Number) string {
	if s, ok := Plain(n, MaxPlain); ok {
		return s
	}
	return string(n)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
