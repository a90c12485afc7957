package wire

import (
	"math"
	"strconv"
)

// Count is a token count of a provider's usage report. It decodes as an
// int64 does, but for a number beyond the int64 range (1e300,
// 9223372036854775808), which is absurd usage rather than none: it decodes
// as the nearest int64 (math.MaxInt64, math.MinInt64), so that the meter
// refuses it as absurd usage (a negative count is absurd too:
// runtime.Usage.Add) instead of reading it as zero, a cheap call. An integer in
// exponent form (1e2) is that integer. A value that is not an integer (2.5,
// a string, an object) reads as zero, as the SDKs read a field of another
// type, and the rest of the value is still decoded.
type Count int64

// UnmarshalJSON decodes a JSON number as a count.
func (c *Count) UnmarshalJSON(data []byte) error {
	s := string(data)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*c = Count(n)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if ne, ok := err.(*strconv.NumError); err != nil && (!ok || ne.Err != strconv.ErrRange) || f != math.Trunc(f) {
		return nil // not a number (null, a string), or a number with a fraction
	}
	switch {
	case f >= math.MaxInt64:
		*c = math.MaxInt64
	case f <= math.MinInt64:
		*c = math.MinInt64
	default:
		*c = Count(f)
	}
	return nil
}
