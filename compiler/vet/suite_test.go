package vet_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
)

// designRules are the order rule ids the project fixes (docs/rules.md), with their
// severities ("" for the policy's own constraints: as declared).
var designRules = map[string]dsl.Severity{
	"order/cycle":                         dsl.Error,
	"order/compaction-before-meter":       dsl.Error,
	"order/compaction-before-max-tokens":  dsl.Warning,
	"order/judge-before-meter":            dsl.Error,
	"order/audit-trail":                   dsl.Error,
	"order/retry-side-effect":             dsl.Error,
	"order/retry-unknown-effects":         dsl.Warning,
	"order/memoize-side-effect":           dsl.Error,
	"order/chat-cache-side-effect":        dsl.Warning,
	"order/nested-retry":                  dsl.Warning,
	"order/ratelimit-outside-retry":       dsl.Warning,
	"order/ratelimit-outside-hedge":       dsl.Warning,
	"order/ratelimit-outside-fallback":    dsl.Warning,
	"order/ratelimit-outside-judge":       dsl.Warning,
	"order/ratelimit-outside-compaction":  dsl.Warning,
	"order/coerce-outside-retry":          dsl.Warning,
	"order/redact-outside-truncate":       dsl.Error,
	"order/check-outside-truncate":        dsl.Error,
	"order/path-check-outside-file-check": dsl.Error,
	"order/record-outside-redact":         dsl.Warning,
	"order/guard-inside-cache":            dsl.Warning,
	"order/caller-check-inside-cache":     dsl.Error,
	"order/cache-inside-redact":           dsl.Warning,
	"order/tracing-outermost":             dsl.Warning,
	"order/own-call-recursion":            dsl.Error,
	"order/own-call-rerouted":             dsl.Warning,
	"order/duplicate":                     dsl.Warning,
	"guard/fail-open-side-effect":         dsl.Warning,
	"guard/after-side-effect":             dsl.Warning,
	"guard/fail-open":                     dsl.Warning,
	"guard/caller-controlled-when":        dsl.Warning,
	"guard/inert":                         dsl.Error,
	"guard/undeclared-tools":              dsl.Warning,
	"guard/context-window":                dsl.Warning,
	"guard/budget-below-estimate":         dsl.Warning,
	"guard/output-unestimated":            dsl.Warning,
	"guard/unmetered-classifier":          dsl.Warning,
	"state/store-setup":                   dsl.Error,
	"state/local-in-replicas":             dsl.Warning,
	"state/cache-across-tenants":          dsl.Warning,
	"state/loose-key":                     dsl.Warning,
	"order/<id>":                          "",
	"order/never-paired":                  dsl.Warning,
}

func TestSuite(t *testing.T) {
	names := map[string]bool{}
	ruleID := regexp.MustCompile(`^[a-z]+/(<id>|[a-z0-9-]+)$`)
	for _, r := range vet.Suite {
		assert.False(t, names[r.Name], "rule %s is listed twice", r.Name)
		names[r.Name] = true
		assert.Regexp(t, ruleID, r.Name)
		assert.NotNil(t, r.Run, r.Name)
		assert.NotEmpty(t, r.Title(), "%s needs a doc", r.Name)
		assert.Greater(t, len(strings.Fields(r.Doc)), 20, "%s: the doc says what the rule reports and why it matters", r.Name)
		assert.NotContains(t, r.Title(), "\n", r.Name)
		want, ok := designRules[r.Name]
		if assert.True(t, ok, "%s is not a fixed rule id (docs/rules.md)", r.Name) {
			assert.Equal(t, want, r.Severity, r.Name)
		}
	}
	for id := range designRules {
		assert.True(t, names[id], "rule %s is missing from the suite", id)
	}
}

func TestTitle(t *testing.T) {
	r := &vet.Rule{Doc: "two retries multiply attempts.\n\nMore text. And more."}
	assert.Equal(t, "two retries multiply attempts", r.Title())
	r = &vet.Rule{Doc: "a title\nover two lines. Then the rest."}
	assert.Equal(t, "a title over two lines", r.Title())
}

// TestBuiltinConstraints checks the constraints the builtins ship: each id
// has its rule in the suite with the same severity, each is found in the
// schema files, and they do not contradict each other.
func TestBuiltinConstraints(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	cs := schema.Constraints()
	require.NotEmpty(t, cs)
	rules := map[string]*vet.Rule{}
	for _, r := range vet.Suite {
		rules[r.Name] = r
	}
	ids := map[string]bool{}
	for _, c := range cs {
		ids[c.ID] = true
		r := rules["order/"+c.ID]
		if assert.NotNil(t, r, "builtin constraint %s has no rule", c.Key()) {
			if r.Warns && c.Severity == dsl.Warning {
				// A rule of severity error that reports its milder
				// findings as warnings: a constraint of either.
				assert.Equal(t, dsl.Error, r.Severity, c.Key())
			} else {
				assert.Equal(t, r.Severity, c.Severity, c.Key())
			}
		}
		assert.NotEmpty(t, c.Why, c.Key())
		pos := vet.ConstraintPos(c)
		assert.True(t, pos.IsValid(), "no source position for %s", c.Key())
		assert.True(t, strings.HasPrefix(pos.File, "schemas/"), "%s at %s", c.Key(), pos)
	}
	for _, id := range []string{"compaction-before-meter", "judge-before-meter", "audit-trail", "ratelimit-outside-retry", "ratelimit-outside-hedge", "ratelimit-outside-fallback", "ratelimit-outside-judge", "ratelimit-outside-compaction", "coerce-outside-retry", "redact-outside-truncate", "record-outside-redact", "guard-inside-cache", "cache-inside-redact"} {
		assert.True(t, ids[id], "the plain-ordering rule %s is data: it needs builtin constraints", id)
	}
	a := vet.Analyze(&dsl.Policy{}, cs)
	assert.Empty(t, a.Cycles, "the builtins' constraints contradict each other")
	assert.Empty(t, a.Problems)
}

// TestGuardInsideCacheCoversGuards checks that every layer with the guards
// trait that checks calls before they run is held outside every cache.
func TestGuardInsideCacheCoversGuards(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	have := map[string]bool{}
	for _, c := range schema.Constraints() {
		if c.ID == "guard-inside-cache" {
			have[c.Outer+"/"+c.Inner] = true
		}
	}
	cat := schema.Catalog()
	for _, id := range cat.IDs() {
		k := cat.Lookup(id)
		if !k.Has("guards") {
			continue
		}
		for _, cache := range []string{"memoize", "semantic_memoize", "idempotent"} {
			// pii reads nothing but the call and its result; its place
			// is inside a cache that answers only the call it keyed
			// (order/cache-inside-redact), outside semantic_memoize,
			// whose near-duplicate hit answers a call pii has not read.
			exempt := id == "output_coerce" || id == "judge" || (id == "pii" && cache != "semantic_memoize")
			assert.Equal(t, !exempt, have[id+"/"+cache], "%s inside %s", id, cache)
		}
	}
}

// TestExamplesVetClean runs the whole suite over the support example,
// which must vet clean.
func TestExamplesVetClean(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	dir := filepath.Join("..", "..", "examples", "support")
	p, diags, err := dsl.Load(context.Background(), []string{dir}, dsl.Options{Schema: schema})
	require.NoError(t, err)
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Empty(t, vet.Check(p, schema.Constraints()))
}
