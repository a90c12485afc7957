package serve

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// The layers of the tool chain name tools exactly: a guard scoped to
// "refund" does not apply to "Refund". An upstream listing "Refund" next
// to "refund", or instead of the "refund" a policy declares and guards,
// offers the client's model a tool it reads as the guarded one while its
// calls skip the guard. Such a tool is withheld (lookAlikes), as a
// poisoned one is.

// foldToolName is the form under which two tool names read as the same
// tool: name in Unicode NFKC (full-width letters are their ASCII letters),
// without default-ignorable code points (zero-width spaces, joiners, soft
// hyphens, variation selectors) or surrounding white space, case-folded.
// A name outside ASCII is withheld before it is compared (badToolName),
// and a policy's names are ASCII: the fold does not rely on either.
func foldToolName(name string) string {
	s := norm.NFKC.String(name)
	s = strings.Map(func(r rune) rune {
		if defaultIgnorable(r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimFunc(s, unicode.IsSpace)
	return norm.NFKC.String(cases.Fold().String(s))
}

// defaultIgnorable reports whether r is a Default_Ignorable_Code_Point as
// Unicode derives it (Other_Default_Ignorable_Code_Point, format
// characters and variation selectors, less white space and prepended
// concatenation marks), up to a few format controls of scripts no tool
// name is written in.
func defaultIgnorable(r rune) bool {
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector) &&
		!unicode.In(r, unicode.White_Space, unicode.Prepended_Concatenation_Mark)
}

// policyToolNames returns the tool names p writes rules for: its tools
// declarations, the tools scopes of its tool layers, the allow and deny
// lists of its tool_policy layers and the strings its tool layers'
// predicates compare tool.name with (a guard's "tool.name == 'refund'",
// "tool.name in ['refund', 'charge']"; not "args.method == 'DELETE'"),
// and the rules about names those predicates give (toolNameRules).
func policyToolNames(p *plan.Plan) (map[string]bool, []nameRule) {
	names := map[string]bool{}
	var rules []nameRule
	if p == nil {
		return names, nil
	}
	for name := range p.Tools {
		names[name] = true
	}
	for _, l := range p.Chains.Of(plan.StageTool) {
		for _, name := range l.Tools {
			names[name] = true
		}
		for _, pred := range layerPredicates(l) {
			exact, more := toolNameRules(pred.src)
			for _, name := range exact {
				names[name] = true
			}
			rules = append(rules, more...)
		}
		if l.Use == "tool_policy" {
			var cfg struct{ Allow, Deny []string }
			if json.Unmarshal(l.Config, &cfg) == nil {
				for _, name := range slices.Concat(cfg.Allow, cfg.Deny) {
					names[name] = true
				}
			}
		}
	}
	return names, rules
}

// nameRule is a rule a predicate gives about tool names other than an
// exact name: tool.name.startsWith('delete_'), endsWith, contains, matches.
type nameRule struct {
	src  string // as written: tool.name.startsWith('delete_')
	kind string
	s    string
	fs   string         // s folded (foldToolName)
	re   *regexp.Regexp // matches: the pattern, and in any case
	anyc *regexp.Regexp
}

// applies reports whether the rule holds for name as CEL reads it.
func (r nameRule) applies(name string) bool {
	switch r.kind {
	case "startsWith":
		return strings.HasPrefix(name, r.s)
	case "endsWith":
		return strings.HasSuffix(name, r.s)
	case "contains":
		return strings.Contains(name, r.s)
	}
	return r.re.MatchString(name)
}

// appliesFolded reports whether the rule holds for name read in any case
// or form (foldToolName).
func (r nameRule) appliesFolded(name string) bool {
	f, s := foldToolName(name), r.fs
	switch r.kind {
	case "startsWith":
		return strings.HasPrefix(f, s)
	case "endsWith":
		return strings.HasSuffix(f, s)
	case "contains":
		return strings.Contains(f, s)
	}
	return r.anyc.MatchString(name) || r.re.MatchString(f)
}

// toolNameRules returns what the predicate src says of tool names: the
// names it compares tool.name with (tool.name == 'x', 'x' != tool.name,
// tool.name in ['x', 'y'], raw strings too), and the rules of the methods
// it calls on tool.name with a string (startsWith, endsWith, contains,
// matches). A name of another path (args.tool.name) is not one.
func toolNameRules(src string) ([]string, []nameRule) {
	var names []string
	var rules []nameRule
	for _, nt := range predicate.NameTests(src) {
		if nt.Op == "==" {
			names = append(names, nt.Value)
			continue
		}
		r := nameRule{src: fmt.Sprintf("tool.name.%s(%q)", nt.Op, nt.Value), kind: nt.Op, s: nt.Value, fs: foldToolName(nt.Value)}
		if nt.Op == "matches" {
			var err1, err2 error
			r.re, err1 = regexp.Compile(nt.Value)
			r.anyc, err2 = regexp.Compile("(?i)" + nt.Value)
			if err1 != nil || err2 != nil {
				continue
			}
		}
		rules = append(rules, r)
	}
	return names, rules
}

// lookAlikes returns, by name, the block of each tool of tools whose name
// folds (foldToolName) to the name of a tool the policy names (named), or
// of another tool listed, without being that name. A name the policy
// names itself is not withheld so; nor is a tool whose name is withheld
// already (badToolName), which no other tool is then compared with.
func lookAlikes(tools []ListedTool, named map[string]bool, rules []nameRule) map[string]*runtime.BlockedError {
	type origin struct{ name, what string }
	byFold := map[string][]origin{}
	for name := range named {
		f := foldToolName(name)
		byFold[f] = append(byFold[f], origin{name, "a tool the policy names"})
	}
	for _, t := range tools {
		if badToolName(t.Name) == nil && !named[t.Name] {
			f := foldToolName(t.Name)
			byFold[f] = append(byFold[f], origin{t.Name, "another tool listed"})
		}
	}
	blocked := map[string]*runtime.BlockedError{}
	for _, t := range tools {
		if named[t.Name] || badToolName(t.Name) != nil {
			continue
		}
		others := byFold[foldToolName(t.Name)]
		slices.SortFunc(others, func(a, b origin) int { return strings.Compare(a.what+a.name, b.what+b.name) })
		for _, o := range others {
			if o.name != t.Name {
				blocked[t.Name] = &runtime.BlockedError{Layer: LayerMCP, Message: fmt.Sprintf(
					"tool name %q differs from %q, the name of %s, only in case or form: a rule naming one would not apply to the other", t.Name, o.name, o.what)}
				break
			}
		}
		if blocked[t.Name] != nil {
			continue
		}
		// A rule a predicate gives about names (tool.name.startsWith('delete_'))
		// that the name escapes only by its case or form.
		for _, r := range rules {
			if !r.applies(t.Name) && r.appliesFolded(t.Name) {
				blocked[t.Name] = &runtime.BlockedError{Layer: LayerMCP, Message: fmt.Sprintf(
					"tool name %q escapes %s, a rule of the policy, only by case or form: the rule would not apply to it", t.Name, r.src)}
				break
			}
		}
	}
	return blocked
}
