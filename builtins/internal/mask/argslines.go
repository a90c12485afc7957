package mask

import (
	"encoding/json"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// argToken is a key, a string or a number of a JSON value decoded as written
// (jsonvalue.DecodeOrdered): key points at an object's key, slot at the value of an object or
// an element of an array.
type argToken struct {
	key  *string
	slot *any
	text string
}

// AsLines returns v, a JSON value decoded as written, with the items find finds in its keys
// and strings read one a line in the order written, followed by its numbers one a line in plain
// decimal form (as a detector reads the arguments of a tool call: scanned.ArgsText) masked, and their number: a
// value begun in a key and ended in its value or in the next key (`{"4111 1111 1111":
// "1111"}`), and one the lines around a key or a string make of it (a phone number read so
// and not alone). The placeholder takes the place of the masked part of an item in the first
// key or string it starts in, its parts in the others are removed (a number it runs over
// becomes a string). When the lines write out a JSON document whose strings hold an item cut
// across them, every key and string is masked. v is modified in place.
func AsLines(v any, find Find) (any, int) {
	var strs, nums []argToken
	var walk func(slot *any)
	walk = func(slot *any) {
		switch x := (*slot).(type) {
		case jsonvalue.Object:
			for i := range x.Keys {
				strs = append(strs, argToken{key: &x.Keys[i], text: x.Keys[i]})
				walk(&x.Values[i])
			}
		case []any:
			for i := range x {
				walk(&x[i])
			}
		case string:
			strs = append(strs, argToken{slot: slot, text: x})
		case json.Number:
			nums = append(nums, argToken{slot: slot, text: jsonnum.PlainText(x)})
		}
	}
	walk(&v)
	tokens := append(strs, nums...)
	if len(tokens) < 2 {
		return v, 0
	}
	pieces := make([]string, len(tokens))
	for i, tk := range tokens {
		pieces[i] = tk.text
	}
	total := 0
	for range maxElementPasses {
		var found []Item
		pieces, found = maskJoined(pieces, "\n", find, true)
		if len(found) == 0 {
			break
		}
		total += len(found)
	}
	if text := strings.Join(pieces, "\n"); looksJSON(text) {
		// The lines write out a JSON document of their own (a string ending in `"4111 1111",`,
		// the next starting with `"b": "1111 1111"}`), which a detector reading them as JSON
		// text reads so (SplitInJSON): when it holds an item cut across its strings, which no
		// offset of the lines places, every key and string is masked, the placeholder in the
		// first.
		if it, ok := SplitInJSON(text, find); ok {
			with := it.With
			for i := range pieces {
				if i < len(strs) && pieces[i] != "" {
					pieces[i], with = with, ""
				}
			}
			total++
		}
	}
	if total == 0 {
		return v, 0
	}
	for i, tk := range tokens {
		if pieces[i] == tk.text {
			continue
		}
		if tk.key != nil {
			*tk.key = pieces[i]
		} else {
			*tk.slot = pieces[i]
		}
	}
	return v, total
}
