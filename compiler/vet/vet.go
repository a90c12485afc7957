package vet

import (
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Rule is one vet rule.
type Rule struct {
	// Name is the rule id its diagnostics carry, such as "order/duplicate".
	Name string
	// Severity of its diagnostics; empty for a rule whose diagnostics take
	// the severity of the constraint they report.
	Severity dsl.Severity
	// Warns marks a rule of severity error that reports its milder findings
	// as warnings.
	Warns bool
	// Doc says what the rule reports and why it matters; its first sentence
	// is the rule's title.
	Doc string
	// Run reports the rule's findings about one policy through the pass.
	Run func(*Pass)
}

// Title returns the first sentence of r.Doc, without its final period.
func (r *Rule) Title() string {
	doc := strings.Join(strings.Fields(r.Doc), " ")
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i]
	}
	return strings.TrimSuffix(doc, ".")
}

// Pass is one rule's view of one policy: the shared Analysis plus a way to
// report.
type Pass struct {
	*Analysis
	// Rule is the rule being run.
	Rule *Rule

	diags *dsl.Diagnostics
}

// Report adds a diagnostic; an empty Rule or Severity is filled in from the
// pass's rule.
func (p *Pass) Report(d dsl.Diagnostic) {
	if d.Rule == "" {
		d.Rule = p.Rule.Name
	}
	if d.Severity == "" {
		d.Severity = p.Rule.Severity
	}
	if d.Severity == "" {
		d.Severity = dsl.Error
	}
	*p.diags = append(*p.diags, d)
}

// Reportf reports a diagnostic of the pass's rule at pos, with related
// positions.
func (p *Pass) Reportf(pos dsl.Pos, related []dsl.Related, format string, args ...any) {
	p.Report(dsl.Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...), Related: related})
}

// Check analyses p with the builtins' constraints and runs every rule of
// the Suite. It returns the diagnostics sorted by position.
func Check(p *dsl.Policy, builtin []*dsl.Constraint) dsl.Diagnostics {
	return Run(Analyze(p, builtin), Suite...)
}

// Run runs rules over an analysis and returns the problems found in the
// constraints themselves plus the rules' diagnostics, sorted by position.
func Run(a *Analysis, rules ...*Rule) dsl.Diagnostics {
	ds := append(dsl.Diagnostics{}, a.Problems...)
	for _, r := range rules {
		r.Run(&Pass{Analysis: a, Rule: r, diags: &ds})
	}
	return ds.Sort()
}

// at returns a related position for an entry.
func at(e *dsl.Entry, format string, args ...any) dsl.Related {
	return dsl.Related{Pos: e.Pos, Message: fmt.Sprintf(format, args...)}
}

// intField returns an integer config field of e, or def.
func intField(e *dsl.Entry, field string, def int) int {
	switch v := e.Fields[field].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return def
}

// stringField returns a string config field of e, or "".
func stringField(e *dsl.Entry, field string) string {
	s, _ := e.Fields[field].(string)
	return s
}

// Attempts returns the most attempts e makes per call: max_attempts for a
// retry, one per model for fallback and hedge, 1 for every other layer
// (plan.Attempts, which the meter's reservations count by too).
func Attempts(e *dsl.Entry) int {
	return plan.Attempts(e.Use, intField(e, "max_attempts", plan.DefaultMaxAttempts), len(stringList(e.Fields["models"])))
}

// MaxCalls is the largest number of calls a message spells out: a larger
// product of attempts is reported as "more than 1,000,000".
const MaxCalls = plan.MaxCalls

// maxFactors is the most factors a message lists.
const maxFactors = 4

// CallProduct returns the product of attempts, the calls a failing call can
// make through layers that re-invoke it, saturated at MaxCalls+1 so that it
// never overflows (plan.CallProduct). An attempt count below 1 counts as 1.
func CallProduct(attempts ...int) int { return plan.CallProduct(attempts...) }

// Calls spells a number of calls from CallProduct: "12", or
// "more than 1,000,000" when it is saturated.
func Calls(n int) string {
	if n > MaxCalls {
		return "more than 1,000,000"
	}
	return fmt.Sprint(n)
}

// Factors joins the factors of a product with " × ", listing at most a
// few: "3 × 3 × 3 × … (50 retries)", where noun names what was counted.
func Factors(factors []string, noun string) string {
	if len(factors) <= maxFactors {
		return strings.Join(factors, " × ")
	}
	return fmt.Sprintf("%s × … (%d %s)", strings.Join(factors[:maxFactors-1], " × "), len(factors), noun)
}

// count spells small numbers out ("three"), as a user would say them.
func count(n int) string {
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

// toolList formats tool names as "`a`, `b` and `c`".
func toolList(tools []*dsl.Tool) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = "`" + t.Name + "`"
	}
	return andList(names)
}

// andList joins names as "a, b and c".
func andList(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
