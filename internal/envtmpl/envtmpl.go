// Package envtmpl expands the `${NAME}` references of a configuration value
// (an MCP server's header, say) from the environment, so that a credential
// is named in a policy and a plan rather than written there.
//
// A value is literal text in which `${NAME}` stands for the environment
// variable NAME (letters, digits and _, not starting with a digit) and `$$`
// for a `$`. Any other `$` is an error, so that a mistyped reference
// (`$TOKEN`, `${TOKEN`) is found when the policy is checked rather than sent
// as it is.
package envtmpl

import (
	"fmt"
	"strings"
)

// Vars returns the variables value refers to, in order of first mention,
// or an error naming the first malformed reference and its byte offset.
func Vars(value string) ([]string, error) {
	var vars []string
	err := walk(value, func(lit string) {}, func(name string) error {
		for _, v := range vars {
			if v == name {
				return nil
			}
		}
		vars = append(vars, name)
		return nil
	})
	return vars, err
}

// Expand returns value with each reference replaced by lookup's value of
// the variable. A variable lookup reports unset, or set to the empty
// string, is an error naming it: a header sent without its credential
// would only fail later, at the server, with a less helpful message.
func Expand(value string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	err := walk(value, func(lit string) { b.WriteString(lit) }, func(name string) error {
		v, ok := lookup(name)
		if !ok || v == "" {
			return fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(v)
		return nil
	})
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// walk calls lit with each run of literal text and ref with each variable
// name, in order.
func walk(value string, lit func(string), ref func(string) error) error {
	for i := 0; i < len(value); {
		j := strings.IndexByte(value[i:], '$')
		if j < 0 {
			lit(value[i:])
			return nil
		}
		j += i
		lit(value[i:j])
		switch {
		case strings.HasPrefix(value[j:], "$$"):
			lit("$")
			i = j + 2
		case strings.HasPrefix(value[j:], "${"):
			end := strings.IndexByte(value[j:], '}')
			if end < 0 {
				return fmt.Errorf("offset %d: ${ without its closing }", j)
			}
			name := value[j+2 : j+end]
			if !isName(name) {
				return fmt.Errorf("offset %d: ${%s} is not a variable reference (a name of letters, digits and _, not starting with a digit)", j, name)
			}
			if err := ref(name); err != nil {
				return err
			}
			i = j + end + 1
		default:
			return fmt.Errorf("offset %d: a $ that is neither ${NAME} nor $$ (write ${NAME} for a variable, $$ for a $)", j)
		}
	}
	return nil
}

func isName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
