package mask

import "strings"

// memberSep joins a key and its value as the model reads an object's member: `"password":
// "hunter2"`.
const memberSep = `": `

// memberProbe stands for a value after a key: letters, digits and "=", which a rule that
// starts with a key word ("password", "api_key", "aws_secret_access_key") takes for the secret
// it masks, and which holds no run of base64 long enough to be decoded (the probe costs one
// plain reading).
var memberProbe = strings.Repeat("Aa0=", 11)

// Members returns the function jsonvalue.MapTextJoined reads an object's members with: the
// value of a key is read after it, as the model reads the member (`"password": "hunter2"`,
// `"aws_secret_access_key": "..."`), and an item find finds there that starts in the key and
// masks a part of the value has that part of the value replaced by its placeholder (the key,
// read on its own, is left to the reading of the keys). Only the keys from which an item can
// run on into a value are read so: find is first tried on each key once, followed by a probe
// value, and a key no item runs from is not read with its values. Nil for a nil find.
func Members(find Find) func(key, value string) (string, int) {
	if find == nil {
		return nil
	}
	keyed := map[string]bool{}
	return func(key, value string) (string, int) {
		if key == "" || value == "" {
			return value, 0
		}
		runs, ok := keyed[key]
		if !ok {
			runs = len(memberItems(find, key, memberProbe)) > 0
			keyed[key] = runs
		}
		if !runs {
			return value, 0
		}
		items := memberItems(find, key, value)
		if len(items) == 0 {
			return value, 0
		}
		var b strings.Builder
		last, start := 0, len(key)+len(memberSep)
		for _, it := range items {
			s, e := max(it.Start-start, 0), it.End-start
			if s < last {
				continue
			}
			b.WriteString(value[last:s])
			b.WriteString(it.With)
			last = e
		}
		b.WriteString(value[last:])
		return b.String(), len(items)
	}
}

// memberItems returns the items find finds in key and value read as a member that start in
// the key and mask a part of the value.
func memberItems(find Find, key, value string) []Item {
	start := len(key) + len(memberSep)
	var out []Item
	for _, it := range find(key + memberSep + value) {
		if it.From < len(key) && it.End > start && it.End <= start+len(value) {
			out = append(out, it)
		}
	}
	return out
}
