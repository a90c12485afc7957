// Package toolpolicy implements the tool_policy builtin (stage tool): tool
// allow and deny lists and blocked argument patterns.
//
// A call is blocked, before the inner layers run, with a *runtime.BlockedError
// naming the layer when the tool is on `deny`, when `allow` is given and the
// tool is not on it, or when an `arg_patterns` entry matches: the entry's
// `arg` names a top-level argument (in any case: "CMD" is checked as "cmd",
// since a tool may decode its arguments case-insensitively), and its `pattern` (RE2, matched anywhere
// in the value unless anchored) is applied to the argument's string value, or
// to the JSON text of any other value (a number, a list, an object; <, > and &
// as they are, not escaped) and to each string, number and object key inside
// it, so that "^/etc/" also blocks ["/etc/passwd"] and "^[0-9]{10,}$" blocks
// [1, 12345678901]. A number is matched in plain decimal form, the number it
// is digit for digit, however the client or host spells or holds it: no
// exponent, no trailing zero after the point, no point for an integer, -0 as
// 0. So 1e21 (a float64, which JSON writes 1e+21) is matched as
// 1000000000000000000000, 1e-7 as 0.0000001, a host's json.Number 1e4 or
// 10000.0 as 10000, an int64 as its digits. An argument that is absent
// matches nothing; one whose value has no JSON form (a host's Go value
// holding NaN or an infinity), or that holds a number longer than 1024
// characters so written (a host's json.Number 1e999999), cannot be checked
// and blocks the call. Deny wins over allow. Block messages name the tool
// and the argument, never the argument's value.
package toolpolicy
