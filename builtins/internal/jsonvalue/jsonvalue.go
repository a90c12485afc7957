package jsonvalue

// MapStrings returns a copy of v with f applied to every string in it, and the
// sum of the counts f returns. It descends into map[string]any, []any,
// map[string]string and []string; map keys are kept as they are. Every other
// value (numbers, booleans, nil, other types) is returned unchanged with a
// count of 0.
//
// v itself is never modified: every container of those four types is copied,
// even when f changes nothing in it. A value of any other type is returned as
// it is, so a container of another type (a map[string]int, a struct) is shared
// with v, not copied.
func MapStrings(v any, f func(string) (string, int)) (any, int) {
	return MapLeaves(v, f, nil)
}

// MapLeaves is MapStrings with a hook for the leaves that are neither strings
// nor containers: other, when not nil, is called with each of them (a number,
// a boolean, nil, a value of any other type) and its result takes the leaf's
// place, its count added to the total. Only values inside map[string]any and
// []any (or v itself) reach other: map[string]string and []string hold only
// strings.
func MapLeaves(v any, f func(string) (string, int), other func(any) (any, int)) (any, int) {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		total := 0
		for k, e := range x {
			r, n := MapLeaves(e, f, other)
			out[k] = r
			total += n
		}
		return out, total
	case []any:
		out := make([]any, len(x))
		total := 0
		for i, e := range x {
			r, n := MapLeaves(e, f, other)
			out[i] = r
			total += n
		}
		return out, total
	case map[string]string:
		out := make(map[string]string, len(x))
		total := 0
		for k, e := range x {
			r, n := f(e)
			out[k] = r
			total += n
		}
		return out, total
	case []string:
		out := make([]string, len(x))
		total := 0
		for i, e := range x {
			r, n := f(e)
			out[i] = r
			total += n
		}
		return out, total
	default:
		if other != nil {
			return other(v)
		}
		return v, 0
	}
}
