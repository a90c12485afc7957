package runtime

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// RunStatus is where a run stands, as a checkpoint records it.
type RunStatus string

// The run statuses. Done, failed and cancelled are terminal: a run in one
// of them is never resumed.
const (
	RunRunning   RunStatus = "running"
	RunDone      RunStatus = "done"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Terminal reports whether the status ends the run.
func (s RunStatus) Terminal() bool {
	return s == RunDone || s == RunFailed || s == RunCancelled
}

// ToolRecord is one tool result of a run, as a checkpoint saves it.
type ToolRecord struct {
	// Tool is the tool's name and Result what the tool chain returned
	// (Error its failure's text instead).
	Tool   string `json:"tool"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// Call names the agent turn's tool call the record answers (RunAgent):
	// the index of the assistant message in the transcript, the call's id
	// and the first 16 hex digits of the SHA-256 of its arguments' JSON
	// text as a checkpoint writes it (compact, whatever spaces the model
	// streamed), "4:call_1:9f86d081884c7d65"; with settings.digest_key_env
	// of their HMAC-SHA256 under the key, after KeyedDigestPrefix,
	// "4:call_1:hmac-sha256:1c0e5a0b6d2f9e47" (a resumed turn with the key
	// still reads the records of a run saved before it was set, under
	// their plain names, and writes none); a call of an agent turn run
	// by a tool call of an agent turn of the same run has that call's
	// name, a "/" and its own. A resumed turn answers the call from the
	// record instead of running it again, when the record was made after
	// its turn recorded the call (CallIntent.Records): a call made before
	// under the same name never answers it. Empty for a call made outside
	// RunAgent, and for a call the tool of an agent turn's call made
	// through the tool chain (it is the tool's, not the turn's call).
	Call string `json:"call,omitempty"`
	// InDoubt is set when the call may have had its effect but its outcome
	// is not known or not recorded (an *InDoubtError,
	// ErrOutcomeUnrecorded): a resumed turn ends in doubt on it instead of
	// answering the model from it.
	InDoubt bool `json:"in_doubt,omitempty"`
	// Class is the class of the call's failure (Classify: "blocked",
	// "budget", "in_doubt" or "failure"; empty for a result), Layer the
	// layer it names (LayerOf) and Reason a refusal's message (class
	// "blocked"), so that a resumed turn answers the call as the live turn
	// did (a refusal as a refusal). A record saved without them (by an
	// earlier version) is answered as a failure.
	Class  string `json:"class,omitempty"`
	Layer  string `json:"layer,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// UnmarshalJSON decodes a record as encoding/json does, but its Result as
// DecodeArgs decodes numbers: a tool's integer above 2^53 reads back as
// the int64 it returned, not as a float64 neighbour, and a resumed turn
// answers the model with the number the live turn gave it. A property
// this build does not know is an error, as for the checkpoint holding the
// record (UnmarshalCheckpoint).
func (r *ToolRecord) UnmarshalJSON(b []byte) error {
	type plain ToolRecord
	v := struct {
		*plain
		Result json.RawMessage `json:"result,omitempty"`
	}{plain: (*plain)(r)}
	r.Result = nil
	if err := decodeKnown(b, &v); err != nil {
		return err
	}
	if len(v.Result) == 0 || string(v.Result) == "null" {
		return nil
	}
	return DecodeArgs(v.Result, &r.Result)
}

// decodeKnown decodes the JSON b into v as encoding/json does, a property
// v does not know an error.
func decodeKnown(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// minTaint is the shortest secret string a checkpoint looks for: shorter
// ones (a digit, "ok") would refuse saves of unrelated text.
const minTaint = 4

// addTaint records the strings and the JSON text of the numbers of a
// secret value (of minTaint characters or more), so that no copy of them
// is persisted. An object key is recorded when it reads as data rather
// than as a field name (dataKey): a token, an address or an id used as a
// key ({"tok_8f2a91c4": true}) is secret like a value; a field name
// ("token", "address2") names the structure, which a redacted result keeps.
// findTaint searches keys for every secret recorded.
func addTaint(taint map[string]struct{}, v any) {
	switch x := v.(type) {
	case string:
		if s := strings.TrimSpace(x); len(s) >= minTaint {
			taint[s] = struct{}{}
		}
	case float64, int64, json.Number:
		// An int64 or a json.Number (a number a float64 does not hold
		// exactly) is recorded as written and as the float64 neighbour a
		// value decoded by encoding/json holds (a state field's).
		for _, s := range numberTexts(x) {
			if len(s) >= minTaint {
				taint[s] = struct{}{}
			}
		}
	case []any:
		for _, e := range x {
			addTaint(taint, e)
		}
	case map[string]any:
		for k, e := range x {
			if s := strings.TrimSpace(k); len(s) >= minTaint && dataKey(s) {
				taint[s] = struct{}{}
			}
			addTaint(taint, e)
		}
	}
}

// dataKey reports whether an object key reads as data: it holds 4 digits
// or more, a character no field name has (anything but ASCII letters,
// digits, "_", "-", "." and spaces: "@", "+", ":", "/"...), or is 32
// characters or longer.
func dataKey(k string) bool {
	if len(k) >= 32 {
		return true
	}
	digits := 0
	for i := 0; i < len(k); i++ {
		switch b := k[i]; {
		case b >= '0' && b <= '9':
			digits++
		case (b|0x20) >= 'a' && (b|0x20) <= 'z', b == '_', b == '-', b == '.', b == ' ':
		default:
			return true
		}
	}
	return digits >= 4
}

// numberText is the JSON text of a number, as a checkpoint writes it.
func numberText(x float64) string {
	b, err := json.Marshal(x)
	if err != nil {
		return ""
	}
	return string(b)
}

// scalarText is the JSON text of a number of a JSON value (a float64, an
// int64 or a json.Number, as exactJSONValue decodes them); "" for any
// other value.
func scalarText(v any) string {
	switch x := v.(type) {
	case float64:
		return numberText(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case json.Number:
		return string(x)
	}
	return ""
}

// numberTexts returns the texts addTaint records for the number v: its
// JSON text, and that of the float64 encoding/json would decode it to when
// that is another.
func numberTexts(v any) []string {
	s := scalarText(v)
	out := []string{s}
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(x), 64); err != nil {
			return out
		}
	default:
		return out
	}
	if t := numberText(f); t != s {
		out = append(out, t)
	}
	return out
}

// secretClean reports whether v, what the handlers made of the secret
// original, holds none of it in clear: a redact handler changed it, no
// string or number of the original (as addTaint records them) is found in
// it, and no number or boolean of the original survives unchanged.
func secretClean(original, v any, redacted bool) bool {
	if !redacted {
		return false
	}
	taint := map[string]struct{}{}
	addTaint(taint, original)
	if findTaint(v, "", slices.Sorted(maps.Keys(taint))) != "" {
		return false
	}
	scalars := map[any]struct{}{}
	collectScalars(original, scalars)
	return !hasScalar(v, scalars)
}

// collectScalars adds the numbers and booleans of v to set.
func collectScalars(v any, set map[any]struct{}) {
	switch x := v.(type) {
	case float64, bool, int64, json.Number:
		set[x] = struct{}{}
	case []any:
		for _, e := range x {
			collectScalars(e, set)
		}
	case map[string]any:
		for _, e := range x {
			collectScalars(e, set)
		}
	}
}

// hasScalar reports whether a number or boolean of v is in set.
func hasScalar(v any, set map[any]struct{}) bool {
	switch x := v.(type) {
	case float64, bool, int64, json.Number:
		_, ok := set[x]
		return ok
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return hasScalar(e, set) })
	case map[string]any:
		for _, e := range x {
			if hasScalar(e, set) {
				return true
			}
		}
	}
	return false
}

// jsonEqual reports whether two JSON values are equal.
func jsonEqual(a, b any) bool { return reflect.DeepEqual(a, b) }
