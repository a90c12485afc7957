package mask

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
)

// jsonText returns the value text holds when it is a JSON object or array, as a tool result
// handed over as text in a transcript is; ok is false for any other text.
func jsonText(text string) (any, bool) {
	s := strings.TrimLeft(text, " \t\r\n")
	if s == "" || (s[0] != '{' && s[0] != '[') || !json.Valid([]byte(s)) {
		return nil, false
	}
	v, err := jsonvalue.DecodeOrdered(s)
	if err != nil {
		return nil, false
	}
	return v, true
}

// SplitInJSON returns the first item find finds cut across the consecutive strings of an
// array, or values of an object, of the JSON object or array text holds (ReadElements,
// ReadFields), which the text read as it is does not hold whole: the model reads the strings
// one after another, as it reads them in a value. ok is false when text is no such JSON or
// holds no such item. Each run of strings of the document (jsonRuns, in the order written) is
// read on its own, as Value reads it: read together, the end of one run could change what is
// read at the start of the next. The runs are first read all in one reading (those of arrays
// in one, those of objects in another), each apart from the next by runSep, and read one by
// one only when that reading finds an item cut across strings: a document without one costs
// two readings, not two for each run. A string of the document that is itself a JSON object or
// array (JSON text escaped in the JSON around it) is read so too (nestedSplit).
func SplitInJSON(text string, find Find) (Item, bool) {
	if !looksJSON(text) {
		return Item{}, false
	}
	runs, keys := jsonRuns(text)
	if it, ok := splitInRuns(runs, keys, find); ok {
		return it, true
	}
	return nestedSplit(text, find)
}

// nestedSplit returns the first item SplitInJSON finds in a string of the JSON object or array
// text holds that is itself one (not in its keys), alone or among other strings. Such a string
// holds a string of its own, so text holds an escaped quote: a text without one is not decoded.
func nestedSplit(text string, find Find) (Item, bool) {
	if !strings.Contains(text, `\"`) {
		return Item{}, false
	}
	v, ok := jsonText(text)
	if !ok {
		return Item{}, false
	}
	var it Item
	found := false
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if !found && looksJSON(x) {
				it, found = SplitInJSON(x, find)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case jsonvalue.Object:
			for _, e := range x.Values {
				walk(e)
			}
		}
	}
	walk(v)
	return it, found
}

// looksJSON reports whether text starts, after spaces, with "{" or "[".
func looksJSON(text string) bool {
	s := strings.TrimLeft(text, " \t\r\n")
	return s != "" && (s[0] == '{' || s[0] == '[')
}

// splitInRuns is SplitInJSON for the runs of a JSON text.
func splitInRuns(runs []jsonRun, keys [][]string, find Find) (Item, bool) {
	if !cutInRuns(runs, keys, find) {
		return Item{}, false
	}
	for i, run := range runs {
		_, items := readElements(run.strings, find, run.fields, runKeys(keys, i))
		for _, it := range items {
			if it.Elem < 0 {
				return it.Item, true
			}
		}
	}
	return Item{}, false
}

// cutInRuns reports whether find finds an item cut across strings in the runs read in one
// reading, those of arrays and those of objects apart.
func cutInRuns(runs []jsonRun, runsKeys [][]string, find Find) bool {
	for _, fields := range []bool{false, true} {
		var elems, keys []string
		for i, run := range runs {
			if run.fields != fields {
				continue
			}
			if len(elems) > 0 {
				elems = append(elems, runSep)
			}
			if rk := runKeys(runsKeys, i); rk != nil {
				keys = append(padKeys(keys, len(elems)), rk...)
			}
			elems = append(elems, run.strings...)
		}
		if len(elems) == 0 {
			continue
		}
		if keys != nil {
			keys = padKeys(keys, len(elems))
		}
		_, items := readElements(elems, find, fields, keys)
		for _, it := range items {
			if it.Elem < 0 {
				return true
			}
		}
	}
	return false
}

// runKeys returns the keys of the run i of a JSON text (readJSON): keys[i], or nil.
func runKeys(keys [][]string, i int) []string {
	if keys == nil {
		return nil
	}
	return keys[i]
}

// padKeys returns keys with "" (a key not known) appended up to n keys.
func padKeys(keys []string, n int) []string {
	for len(keys) < n {
		keys = append(keys, "")
	}
	return keys
}

// runSep stands between two runs of strings read in one reading by cutInRuns: line breaks
// around a "|", which neither glues the end of one run to the start of the next nor is skipped
// ("\x00", which a reading folding invisible characters skips, let the runs glue). What the
// reading finds over it (a PEM block's lines, say) only costs the runs read one by one; that
// it misses nothing a run read alone holds is checked on random objects
// (TestObjectTextBlockedIsMasked, builtins/pii).
const runSep = "\n|\n"

// jsonRun is a run of strings of a JSON text: of an array, or the values of an object (fields).
type jsonRun struct {
	strings []string
	fields  bool
}

// jsonRuns returns the runs of two or more consecutive strings of the arrays of text, and of
// the values of its objects (their keys left out), in the order written, decoded; text is a
// JSON object or array (its first character other than a space is "{" or "["). It returns nil
// for any other text, or one whose brackets do not pair. It reads the text once, without
// decoding what is not in such a run.
// keys are nil, or, one for one with the runs, the keys of the values of an object's run when
// one of them is of a card group's digits alone (groupDigits), the keys of the others ""
// (ReadFields reads no other's key), and nil for any other run.
func jsonRuns(text string) (runs []jsonRun, keys [][]string) {
	runs, keys, _ = readJSON(text, false)
	return runs, keys
}

// jsonMember is a string of a JSON text and the key it is read with: its own, or, for a string
// in an object or an array that is the value of a key, that key (one level down: a string
// under a key that holds a value, jsonvalue.Holds, or the one element of an array).
type jsonMember struct{ key, value string }

// readJSON returns the runs of text (jsonRuns) and, withMembers, its members (jsonMember), in
// the order written, decoded. It returns nil for a text jsonRuns gives none for.
func readJSON(text string, withMembers bool) ([]jsonRun, [][]string, []jsonMember) {
	s := strings.TrimLeft(text, " \t\r\n")
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, nil, nil
	}
	type open struct {
		c   byte
		key bool // in an object, the next string is a key
		// last is the key read last in an object (without withMembers, as written: quotes and
		// escapes kept); outer the key whose value the object or
		// array is, or "" (withMembers); name and value the strings of an object that names
		// a value in a member of its own (jsonvalue.NamedValue), with named and valued
		last, outer, name, value string
		named, valued            bool
		// only is the string of an array that is the value of outer, read with it when it is
		// the array's one element (strings of them, commas between its elements)
		only            string
		strings, commas int
	}
	var (
		runs    []jsonRun
		run     []string
		keys    [][]string // the keys of runs (jsonRuns), nil until one has them
		rk      []string   // the keys of run, when one of its values is of groupDigits
		stack   []open
		members []jsonMember
	)
	end := func() {
		if len(run) > 1 {
			if rk != nil && keys == nil {
				keys = make([][]string, len(runs), len(runs)+1)
			}
			if keys != nil {
				keys = append(keys, rk)
			}
			runs = append(runs, jsonRun{run, stack[len(stack)-1].c == '{'})
		}
		run, rk = nil, nil
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '{', '[':
			end()
			o := open{c: c, key: c == '{'}
			if n := len(stack); withMembers && n > 0 && stack[n-1].c == '{' {
				o.outer = stack[n-1].last
			}
			stack = append(stack, o)
		case '}', ']':
			end()
			if len(stack) == 0 || stack[len(stack)-1].c != c-2 { // '{'+2 == '}', '['+2 == ']'
				return nil, nil, nil
			}
			if top := stack[len(stack)-1]; top.named && top.valued {
				members = append(members, jsonMember{top.name, top.value})
			} else if top.c == '[' && top.strings == 1 && top.commas == 0 {
				members = append(members, jsonMember{top.outer, top.only})
			}
			stack = stack[:len(stack)-1]
		case ':', ',':
			if n := len(stack); n > 0 && stack[n-1].c == '{' {
				stack[n-1].key = c == ','
			} else if n > 0 && c == ',' {
				stack[n-1].commas++
			}
		case '"':
			j := i + 1
			escaped := false
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, nil, nil
			}
			n := len(stack)
			isKey := n > 0 && stack[n-1].key
			if isKey && !withMembers {
				stack[n-1].last = s[i : j+1]
			}
			if !isKey || withMembers {
				str := s[i+1 : j]
				if escaped {
					var ok bool
					if str, ok = unquote(s[i : j+1]); !ok {
						return nil, nil, nil
					}
				}
				switch {
				case isKey:
					stack[n-1].last = str
				case n > 0:
					run = append(run, str)
					if top := &stack[n-1]; top.c == '{' && (rk != nil || groupDigits(str)) {
						if rk == nil {
							rk = make([]string, len(run)-1, cap(run))
						}
						key := ""
						if groupDigits(str) {
							if key = top.last; !withMembers {
								key, _ = unquote(key)
							}
						}
						rk = append(rk, key)
					}
					if !withMembers {
						break
					}
					if top := &stack[n-1]; top.c == '{' && top.last != "" {
						members = append(members, jsonMember{top.last, str})
						if !top.named && jsonvalue.NameKey(top.last) {
							top.name, top.named = str, true
						} else if !top.valued && jsonvalue.ValueKey(top.last) {
							top.value, top.valued = str, true
						}
					}
					if top := &stack[n-1]; top.outer != "" && top.c == '{' && jsonvalue.Holds(top.last) {
						members = append(members, jsonMember{top.outer, str})
					} else if top.outer != "" && top.c == '[' {
						top.only, top.strings = str, top.strings+1
					}
				}
			}
			i = j
		case ' ', '\t', '\r', '\n':
		default:
			end() // a number, true, false or null ends a run
		}
	}
	if len(stack) != 0 {
		return nil, nil, nil
	}
	return runs, keys, members
}

// unquote returns the JSON string q decoded. Its own variable, not the caller's, is the one
// whose address json.Unmarshal takes, so that a string without escapes costs no allocation.
func unquote(q string) (string, bool) {
	var out string
	if json.Unmarshal([]byte(q), &out) != nil {
		return "", false
	}
	return out, true
}

// AcrossJSON returns text, a JSON object or array, masked as a value (Value: f, with the
// strings of its arrays and the values of its objects read together by find, in the order
// written, as SplitInJSON reads them: its objects are decoded as jsonvalue.Object) and
// written back as JSON, then masked as a text by f, with the number of items masked, when
// its strings hold an item cut across them (SplitInJSON, also in a string that is itself JSON
// text: Value reads such a string as AcrossJSON does) or a member holds one that runs from its
// key into its value (cutInMembers); otherwise it returns text and 0.
// The text written back has JSON's compact layout (the members in the order written, no
// spaces), which the model reads alike.
func AcrossJSON(text string, f Func, find Find) (string, int) {
	if !looksJSON(text) {
		return text, 0
	}
	runs, keys, members := readJSON(text, true)
	if _, ok := splitInRuns(runs, keys, find); !ok && !cutInMembers(members, find) {
		if _, ok := nestedSplit(text, find); !ok {
			return text, 0
		}
	}
	v, ok := jsonText(text)
	if !ok {
		return text, 0
	}
	red, n := Value(v, f, find)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(red) != nil {
		return text, 0
	}
	out, m := f(strings.TrimSuffix(b.String(), "\n"))
	return out, n + m
}
