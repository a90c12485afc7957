// Package fieldpath writes and reads the paths messages name a field by,
// as CUE writes them: labels joined by dots, a list index in brackets, and
// a label that is not a plain identifier quoted (models."gpt-4.1".provider,
// steps[1].tool).
package fieldpath

import (
	"strconv"
	"strings"
)

// Label returns name as a path writes it: as it is when it is a plain
// identifier (letters, digits and underscores, not starting with a digit,
// a definition's # before it), else quoted.
func Label(name string) string {
	if isIdent(name) {
		return name
	}
	return strconv.Quote(name)
}

func isIdent(s string) bool {
	s = strings.TrimPrefix(s, "#")
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// Join returns path with the field name appended (path "" gives the label
// alone).
func Join(path, name string) string {
	if path == "" {
		return Label(name)
	}
	return path + "." + Label(name)
}

// Step is one step of a path: a field's label (unquoted), or a list index.
type Step struct {
	Label   string
	Index   int
	IsIndex bool
}

// String is the step's text as Split reads it: the label, or the index in
// digits.
func (s Step) String() string {
	if s.IsIndex {
		return strconv.Itoa(s.Index)
	}
	return s.Label
}

// Split reads a path as Label, Join and indexes write it into its steps;
// ok is false when it is not such a path (an unterminated quote, a bracket
// that does not hold a number, an unquoted label that is not an identifier
// nor a number).
func Split(path string) (steps []Step, ok bool) {
	rest := path
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			if rest == "" || rest[0] == '.' || rest[0] == '[' {
				return nil, false
			}
			continue
		case '[':
			n, after, found := strings.Cut(rest[1:], "]")
			i, err := strconv.Atoi(n)
			if !found || err != nil || i < 0 {
				return nil, false
			}
			steps = append(steps, Step{Index: i, IsIndex: true})
			rest = after
		case '"':
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, false
			}
			label, err := strconv.Unquote(q)
			if err != nil {
				return nil, false
			}
			steps = append(steps, Step{Label: label})
			rest = rest[len(q):]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if !isIdent(rest[:end]) && !digits(rest[:end]) {
				return nil, false
			}
			steps = append(steps, Step{Label: rest[:end]})
			rest = rest[end:]
		}
		if rest != "" && rest[0] != '.' && rest[0] != '[' {
			return nil, false
		}
	}
	return steps, true
}

// Labels returns the steps of path as strings (Step.String), nil when it
// does not read (Split).
func Labels(path string) []string {
	steps, ok := Split(path)
	if !ok {
		return nil
	}
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.String()
	}
	return out
}
