package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// The Append functions encode the JSON of a request body into a byte slice,
// as encoding/json would encode the same values (but for HTML characters,
// which they leave unescaped): a provider writes its request body with
// them instead of the SDK's reflective encoding of its parameter types.

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendInt appends n in decimal.
func AppendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// errNotFinite is the error of a NaN or infinite number.
var errNotFinite = errors.New("not a finite number")

// AppendFloat appends f as encoding/json does; NaN and infinities, which
// JSON cannot hold, are an error.
func AppendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, errNotFinite
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// AppendRaw appends the JSON document raw, compacted; invalid JSON is an
// error.
func AppendRaw(b []byte, raw []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, err
	}
	return buf.Bytes(), nil
}

// IsObject reports whether the JSON document raw is an object (its first
// byte other than white space is '{').
func IsObject(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// AppendSampling appends the members temperature and top_p of a request
// body, those that are set; a number that is not finite is an error.
func AppendSampling(b []byte, temperature, topP *float64) ([]byte, error) {
	var err error
	if temperature != nil {
		b = append(b, `,"temperature":`...)
		if b, err = AppendFloat(b, *temperature); err != nil {
			return b, fmt.Errorf("temperature: %w", err)
		}
	}
	if topP != nil {
		b = append(b, `,"top_p":`...)
		if b, err = AppendFloat(b, *topP); err != nil {
			return b, fmt.Errorf("top_p: %w", err)
		}
	}
	return b, nil
}

// AppendStrings appends the JSON array of ss.
func AppendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}
