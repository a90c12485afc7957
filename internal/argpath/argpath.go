// Package argpath resolves the argument references of a tool declaration
// (url_arg, path_arg) against a call's arguments.
//
// A reference is either a top-level argument name ("url") or a JSON
// pointer into the arguments ("/request/url", "/files/*/path", "/urls/*"),
// where a "*" token stands for every element of an array. Resolving is
// strict: a member that is missing, an intermediate value that is not the
// object or array the reference goes through, a value that is not a
// string, or an object member whose name differs from the referenced one
// only in case (a tool decoding its arguments case-insensitively may read
// it instead) is an error, so that a caller that refuses on error never
// lets an unchecked value through.
package argpath

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/jsonkind"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
)

// Path is a parsed reference: the object member names and "*" tokens from
// the arguments object down to the value.
type Path struct {
	ref    string
	tokens []string
}

// String returns the reference as written.
func (p Path) String() string { return p.ref }

// Tokens returns the member names and "*" tokens of the path.
func (p Path) Tokens() []string { return p.tokens }

// Parse parses a reference: a name, or a JSON pointer when it starts with
// "/" (a "*" token is every element of an array).
func Parse(ref string) (Path, error) {
	if ref == "" {
		return Path{}, errors.New("empty argument reference")
	}
	if !strings.HasPrefix(ref, "/") {
		return Path{ref: ref, tokens: []string{ref}}, nil
	}
	toks := jsonpointer.Tokens(ref)
	if len(toks) == 0 || toks[0] == "" || toks[0] == "*" {
		return Path{}, fmt.Errorf("%q: a pointer starts with the name of an argument", ref)
	}
	for _, t := range toks {
		if t == "" {
			return Path{}, fmt.Errorf("%q: empty member name", ref)
		}
	}
	return Path{ref: ref, tokens: toks}, nil
}

// ParseAll parses each reference.
func ParseAll(refs []string) ([]Path, error) {
	out := make([]Path, 0, len(refs))
	for _, r := range refs {
		p, err := Parse(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Value is one string the path reaches.
type Value struct {
	// At is the location in the arguments, as a JSON pointer with indexes
	// ("/files/0/path").
	At string
	// S is the string.
	S string

	loc []any // string member names and int indexes
}

// Error is a reference the arguments do not satisfy.
type Error struct {
	// At is the location that failed, as a JSON pointer.
	At string
	// Problem says what is wrong ("is missing", "is not a string").
	Problem string
}

func (e *Error) Error() string { return fmt.Sprintf("argument %s %s", e.At, e.Problem) }

// Resolve returns every string p reaches in args, in order. An array
// reached by "*" may be empty (no value); anything else that is not there
// or not of the expected type is an *Error.
func Resolve(args map[string]any, p Path) ([]Value, error) {
	if len(p.tokens) == 1 && p.tokens[0] != "*" && args != nil {
		return resolveName(args, p.tokens[0])
	}
	var out []Value
	var walk func(v any, i int, loc []any, at string) error
	walk = func(v any, i int, loc []any, at string) error {
		if i == len(p.tokens) {
			s, ok := v.(string)
			if !ok {
				return &Error{At: at, Problem: "is " + jsonkind.Of(v) + ", not a string"}
			}
			out = append(out, Value{At: at, S: s, loc: append([]any(nil), loc...)})
			return nil
		}
		tok := p.tokens[i]
		if tok == "*" {
			switch a := v.(type) {
			case []any:
				for j, e := range a {
					if err := walk(e, i+1, append(loc, j), at+"/"+strconv.Itoa(j)); err != nil {
						return err
					}
				}
				return nil
			case []string:
				for j, e := range a {
					if err := walk(e, i+1, append(loc, j), at+"/"+strconv.Itoa(j)); err != nil {
						return err
					}
				}
				return nil
			}
			return &Error{At: orRoot(at), Problem: "is " + jsonkind.Of(v) + ", not an array"}
		}
		m, ok := v.(map[string]any)
		if !ok {
			return &Error{At: orRoot(at), Problem: "is " + jsonkind.Of(v) + ", not an object"}
		}
		next := at + "/" + jsonpointer.Escape(tok)
		for name := range m {
			if name != tok && strings.EqualFold(name, tok) {
				return &Error{At: at + "/" + jsonpointer.Escape(name), Problem: "differs from " + next + " only in case"}
			}
		}
		e, ok := m[tok]
		if !ok {
			return &Error{At: next, Problem: "is missing"}
		}
		return walk(e, i+1, append(loc, tok), next)
	}
	var root any = args
	if args == nil {
		root = map[string]any{}
	}
	if err := walk(root, 0, nil, ""); err != nil {
		return nil, err
	}
	return out, nil
}

// resolveName is Resolve of a top-level argument name, the common case,
// without the walk.
func resolveName(args map[string]any, name string) ([]Value, error) {
	at := "/" + jsonpointer.Escape(name)
	for k := range args {
		if k != name && strings.EqualFold(k, name) {
			return nil, &Error{At: "/" + jsonpointer.Escape(k), Problem: "differs from " + at + " only in case"}
		}
	}
	v, ok := args[name]
	if !ok {
		return nil, &Error{At: at, Problem: "is missing"}
	}
	s, ok := v.(string)
	if !ok {
		return nil, &Error{At: at, Problem: "is " + jsonkind.Of(v) + ", not a string"}
	}
	return []Value{{At: at, S: s, loc: []any{name}}}, nil
}

func orRoot(at string) string {
	if at == "" {
		return "(the arguments)"
	}
	return at
}

// Replace returns a copy of args in which the value at v's location is s.
// Only the objects and arrays on the way are copied; args is not modified.
func Replace(args map[string]any, v Value, s string) map[string]any {
	out, _ := replace(args, v.loc, s).(map[string]any)
	return out
}

func replace(cur any, loc []any, s string) any {
	if len(loc) == 0 {
		return s
	}
	switch c := cur.(type) {
	case map[string]any:
		cp := make(map[string]any, len(c))
		for k, e := range c {
			cp[k] = e
		}
		k := loc[0].(string)
		cp[k] = replace(c[k], loc[1:], s)
		return cp
	case []any:
		cp := append([]any(nil), c...)
		i := loc[0].(int)
		cp[i] = replace(c[i], loc[1:], s)
		return cp
	case []string:
		cp := append([]string(nil), c...)
		cp[loc[0].(int)] = s
		return cp
	}
	return cur
}
