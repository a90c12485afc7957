package compiler

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// checkConstraintIDs reports a policy constraint whose id would report under
// a rule id that agentc itself defines (order/cycle, order/audit-trail...):
// tools and tests match on those ids.
func checkConstraintIDs(c *Compilation) {
	reserved := map[string]bool{}
	for _, r := range vet.Suite {
		if id, ok := strings.CutPrefix(r.Name, "order/"); ok {
			reserved[id] = true
		}
	}
	for _, bc := range c.opts.Schema.Constraints() {
		reserved[bc.ID] = true
	}
	for _, pc := range c.Policy.Constraints {
		if reserved[pc.ID] {
			c.report(dsl.Errorf(pc.Pos, "schema/invalid-value", "constraint id %q is reserved: order/%s is one of agentc's own rules; choose another id", pc.ID, pc.ID))
		}
	}
}

// elementPath turns a list element of a message ("allow[2]") into the path
// of its position ("allow.2").
var elementPath = strings.NewReplacer("[", ".", "]", "")

// validateConfigs runs each linked module's own config validation, so that
// a config the schema accepts but the middleware refuses (a zero ttl, an
// initial delay above the maximum, an invalid regular expression) is a vet
// error at the entry instead of a Build failure in production. Modules not
// linked into the running binary are skipped.
func validateConfigs(_ context.Context, c *Compilation) error {
	checkConstraintIDs(c)
	checkModels(c)
	validateEntries(c, c.Policy, false)
	return nil
}

// checkDurations reports each duration of e's config, nested ones
// included (a retry's breaker.cooldown), that the schema's syntax accepts
// but no time.Duration holds ("3000000h", about 342 years), at the field,
// and whether it reported one: the module could not decode the config.
func checkDurations(c *Compilation, e *dsl.Entry) bool {
	if e.Kind == nil {
		return false
	}
	reported := false
	for _, path := range slices.Sorted(maps.Keys(e.Kind.Durations)) {
		s, ok := plan.ConfigValue(e.Fields, path).(string)
		if !ok {
			continue
		}
		if msg := plan.DurationProblem(s, e.Kind.Durations[path]); msg != "" {
			c.report(dsl.Errorf(e.FieldPos(path), "schema/invalid-value", "%s.%s: %s", e.Path(), path, msg))
			reported = true
		}
	}
	return reported
}

// validateEntries runs each linked module's Validate on its entries of p,
// after checking their durations (checkDurations).
// With typedOnly (p is a policy with errors, decoded partly) it checks only
// the entries whose own value has no error and in which no error was
// reported: the config of another is not what the policy says, or its
// problem (an invalid pattern) is reported already.
func validateEntries(c *Compilation, p *dsl.Policy, typedOnly bool) {
	reported := func(e *dsl.Entry) bool {
		for _, d := range c.Diagnostics {
			if d.Severity == dsl.Error && e.Holds(d.Pos) {
				return true
			}
		}
		return false
	}
	for _, stage := range dsl.Stages {
		for _, e := range p.Chains[stage] {
			if e == nil || (typedOnly && (!e.WellTyped() || reported(e))) || checkDurations(c, e) {
				continue
			}
			known, err := runtime.ValidateConfig(e.Use, e.Config)
			if !known || err == nil {
				continue
			}
			msg := err.Error()
			pos := e.Pos
			// Messages name the field first ("ttl must be positive"), a
			// nested one ("classifier.timeout: ...") or an element of a
			// list ("allow[2]: ...", positioned as allow.2). The message
			// continues the entry's path with the field's, as the
			// schema's messages do ("chains.tool[0].allow[2]: ...",
			// "chains.chat[0].ttl: must be positive"), and is placed at
			// the field's value where the policy writes it (else at the
			// entry).
			sep := ": "
			if word, rest, ok := strings.Cut(msg, " "); ok {
				f := elementPath.Replace(strings.TrimRight(word, ":,"))
				top, _, _ := strings.Cut(f, ".")
				if _, has := e.Fields[top]; has {
					if pos = e.FieldPos(f); pos == e.Pos {
						pos = e.FieldPos(top)
					}
					switch {
					case strings.HasSuffix(word, ":"):
						sep = "."
					case !strings.HasSuffix(word, ","):
						sep, msg = ".", word+": "+rest
					}
				}
			}
			c.report(dsl.Errorf(pos, "schema/invalid-value", "%s%s%s", e.Path(), sep, msg))
		}
	}
}
