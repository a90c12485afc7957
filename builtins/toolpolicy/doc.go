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
// as they are, not escaped; a number as Go writes the float64 or int64 that
// holds it, so a host's json.Number 1e4 is 10000 and -0 is 0) and to each string and object key inside it, so
// that "^/etc/" also blocks ["/etc/passwd"]. An argument that is absent
// matches nothing; one whose value has no JSON form (a host's Go value
// holding NaN or an infinity) cannot be checked and blocks the call. Deny wins over allow. Block
// messages name the tool and the argument, never the argument's value.
package toolpolicy
