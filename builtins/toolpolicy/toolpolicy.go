package toolpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "tool_policy"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:     "tool allow and deny lists and blocked argument patterns",
		New:     func() runtime.Middleware { return &Policy{} },
	})
}

// Policy is the tool_policy layer; its exported fields are its config
// (schemas/tool_policy.cue).
type Policy struct {
	// Allow lists the tools that may be called; nil allows every tool.
	Allow []string `json:"allow,omitempty"`
	// Deny lists tools that may never be called.
	Deny []string `json:"deny,omitempty"`
	// ArgPatterns block a call when an argument matches.
	ArgPatterns []ArgPattern `json:"arg_patterns,omitempty"`

	name     string
	patterns []compiled
}

// ArgPattern blocks a call whose argument Arg matches the RE2 Pattern.
type ArgPattern struct {
	Arg     string `json:"arg"`
	Pattern string `json:"pattern"`
}

type compiled struct {
	arg, src string
	re       *regexp.Regexp
}

// Provision compiles the argument patterns once. An invalid pattern is an
// error naming its place (arg_patterns[i].pattern).
func (p *Policy) Provision(b *runtime.BuildContext) error {
	p.name = b.Name()
	for i, ap := range p.ArgPatterns {
		if ap.Arg == "" {
			return fmt.Errorf("arg_patterns[%d].arg: empty argument name", i)
		}
		if ap.Pattern == "" {
			return fmt.Errorf("arg_patterns[%d].pattern: empty pattern", i)
		}
		re, err := regexp.Compile(ap.Pattern)
		if err != nil {
			return fmt.Errorf("arg_patterns[%d].pattern: invalid RE2 expression %q: %w", i, ap.Pattern, err)
		}
		p.patterns = append(p.patterns, compiled{arg: ap.Arg, src: ap.Pattern, re: re})
	}
	return nil
}

// Validate refuses a tool that is both allowed and denied, naming its
// place in deny.
func (p *Policy) Validate() error {
	for i, d := range p.Deny {
		if j := slices.Index(p.Allow, d); j >= 0 {
			return fmt.Errorf("deny[%d]: tool %q is also allow[%d]; deny wins, so the allow entry has no effect: list the tool in one of them", i, d, j)
		}
	}
	return nil
}

// Decide returns the block reason for a call of tool with args, or "".
func (p *Policy) Decide(tool string, args map[string]any) string {
	if slices.Contains(p.Deny, tool) {
		return fmt.Sprintf("tool %s is denied", tool)
	}
	if p.Allow != nil && !slices.Contains(p.Allow, tool) {
		return fmt.Sprintf("tool %s is not allowed", tool)
	}
	for _, cp := range p.patterns {
		for name, v := range args {
			// A tool that decodes its arguments case-insensitively (Go's
			// encoding/json does) reads "CMD" as "cmd".
			if name != cp.arg && !strings.EqualFold(name, cp.arg) {
				continue
			}
			hit, err := matches(cp.re, v)
			if err != nil {
				return fmt.Sprintf("tool %s: argument %s cannot be checked against the blocked pattern %q: %v", tool, cp.arg, cp.src, err)
			}
			if hit {
				return fmt.Sprintf("tool %s: argument %s matches the blocked pattern %q", tool, cp.arg, cp.src)
			}
		}
	}
	return ""
}

// matches applies re to v: to a string itself; to any other value, to its
// JSON text (with <, > and & as they are, not escaped; each number in plain
// decimal form, see plainNumbers) and to each string, number and object key
// inside it, so that an anchored pattern also holds for a value nested in a
// list or an object. A value with no JSON form, or holding a number too
// long to write without exponent, is an error: it cannot be checked.
func matches(re *regexp.Regexp, v any) (bool, error) {
	if s, ok := v.(string); ok {
		return re.MatchString(s), nil
	}
	text, err := encode(v)
	if err != nil {
		// A value with no JSON form (a Go value holding NaN, a channel)
		// cannot be checked, so the call is refused, not let through.
		return false, fmt.Errorf("it has no JSON form: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var decoded any
	if err := dec.Decode(&decoded); err != nil {
		return false, fmt.Errorf("its JSON form does not decode: %w", err)
	}
	decoded, changed, err := plainNumbers(decoded)
	if err != nil {
		return false, err
	}
	if changed {
		if text, err = encode(decoded); err != nil {
			return false, fmt.Errorf("its JSON form does not encode: %w", err)
		}
	}
	if re.Match(text) {
		return true, nil
	}
	return matchesInside(re, decoded), nil
}

// encode returns the JSON text of v, with <, > and & as they are.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// plainNumbers replaces, in place, each json.Number of a value decoded with
// UseNumber by its plain decimal form (jsonnum.Plain: 1e+21 as
// 1000000000000000000000, 1e-7 as 0.0000001, -0 as 0), the number a
// pattern is meant for whatever its spelling: encoding/json writes a
// float64 from 1e21 up, or below 1e-6, with an exponent, and a host's
// json.Number may spell any number so. It reports whether a number
// changed; a number longer than jsonnum.MaxPlain so written is an error.
func plainNumbers(v any) (any, bool, error) {
	changed := false
	switch x := v.(type) {
	case json.Number:
		s, ok := jsonnum.Plain(x, jsonnum.MaxPlain)
		if !ok {
			return v, false, fmt.Errorf("it holds a number too long to write without exponent")
		}
		return json.Number(s), s != string(x), nil
	case map[string]any:
		for k, e := range x {
			n, c, err := plainNumbers(e)
			if err != nil {
				return v, false, err
			}
			x[k], changed = n, changed || c
		}
	case []any:
		for i, e := range x {
			n, c, err := plainNumbers(e)
			if err != nil {
				return v, false, err
			}
			x[i], changed = n, changed || c
		}
	}
	return v, changed, nil
}

// matchesInside applies re to each string, number (in plain decimal form)
// and object key of a JSON value decoded with UseNumber.
func matchesInside(re *regexp.Regexp, v any) bool {
	switch x := v.(type) {
	case string:
		return re.MatchString(x)
	case json.Number:
		return re.MatchString(string(x))
	case map[string]any:
		for k, e := range x {
			if re.MatchString(k) || matchesInside(re, e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if matchesInside(re, e) {
				return true
			}
		}
	}
	return false
}

// WrapTool implements runtime.ToolWrapper.
func (p *Policy) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if reason := p.Decide(c.Name, c.Args); reason != "" {
			return nil, &runtime.BlockedError{Layer: p.name, Message: reason}
		}
		return next(ctx, c)
	}
}

// AdmitTool implements runtime.ToolAdmitter: the refusal WrapTool makes.
func (p *Policy) AdmitTool(_ context.Context, c *runtime.ToolCall) error {
	if reason := p.Decide(c.Name, c.Args); reason != "" {
		return &runtime.BlockedError{Layer: p.name, Message: reason}
	}
	return nil
}

var (
	_ runtime.ToolWrapper  = (*Policy)(nil)
	_ runtime.ToolAdmitter = (*Policy)(nil)
)
