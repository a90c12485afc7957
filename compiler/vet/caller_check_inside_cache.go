package vet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/ast"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// CallerCheckInsideCache reports a check inside a cache whose verdict
// depends on the caller, which the cache does not key its entries on.
var CallerCheckInsideCache = &Rule{
	Name:     "order/caller-check-inside-cache",
	Severity: dsl.Error,
	Doc: `a check inside a cache that depends on the caller is skipped on a hit: one caller gets what another's call stored.

A check of the output alone may sit inside memoize, semantic_memoize or
idempotent (order/guard-inside-cache leaves it there): an output it
refuses is never stored, and pii or redact there masks what the cache
stores. Every stored answer has passed it, but for the call that stored
it: a check whose when, deny or require reads the caller (run.meta: the
tenant and key agentc serve sets, run.id, run.agent;
request.params.metadata, which the cache leaves out of its key) decides
for that caller, and a hit serves the answer to any caller whose call has
the same key, without running the check. A phase "after" guard that
blocks an intern (run.meta.key == 'intern') lets the intern have what the
analyst's call stored; a pii whose when masks e-mail addresses for
interns only serves the intern the analyst's answer in clear. An error at
the read, unless the cache keys its entries on what is read: the tenant
with scope "key" or "run", the run (run.id) with scope "run", or for
idempotent the tenant (not the run: a call whose caller gives an
idempotency key, as agentc serve's Idempotency-Key header does, is keyed
on that key, in whichever run it comes). A cache keys on
the run's tenant, which is run.meta.tenant under agentc serve, for a policy
that declares keys (and no turn chain); a host embedding agentc sets
run.meta as it likes, so elsewhere a read of run.meta.tenant is reported.
Nor is a read reported that the cache's when pins to one value (a term of
its top-level && such as run.meta.?key.orValue('') == 'analyst'): every
caller the cache serves has that value.
Move the check outside the cache, where it runs on every hit (a pii or
redact outside then leaves the cache storing in clear:
order/cache-inside-redact), or give the cache a scope that keys on what
the check reads. A check the cache never applies to (scoped to a tool it
does not keep) is not reported, nor one order/guard-inside-cache reports
already.`,
	Run: func(p *Pass) {
		for _, stage := range []string{"chat", "tool"} {
			chain := p.Policy.Chains[stage]
			for _, cache := range chain {
				if !isCache(cache) {
					continue
				}
				reported := map[*dsl.Entry]bool{}
				for _, v := range p.Violations("guard-inside-cache", true) {
					if v.Inner == cache {
						reported[v.Outer] = true
					}
				}
				for _, check := range chain[cache.Index+1:] {
					if reported[check] || !checksOutput(check) || !p.cacheKeeps(cache, check) {
						continue
					}
					p.callerCheckInsideCache(cache, check)
				}
			}
		}
	},
}

func isCache(e *dsl.Entry) bool {
	return e.Use == "memoize" || e.Use == "semantic_memoize" || e.Use == "idempotent"
}

// checksOutput reports whether e checks or masks the calls it sees, so
// that skipping it on a hit serves what it would have held back.
func checksOutput(e *dsl.Entry) bool {
	return e.Use != "output_coerce" && (e.Kind != nil && e.Kind.Has("guards") || e.Use == "redact")
}

// cacheKeeps reports whether the cache serves hits for calls check applies
// to: in the chat chain when their whens meet, in the tool chain for a
// tool both apply to that the cache keeps (memoize and semantic_memoize
// the tools that are neither side_effecting nor secret_result, idempotent
// the side-effecting ones).
func (p *Pass) cacheKeeps(cache, check *dsl.Entry) bool {
	if cache.Stage == "chat" {
		return p.Overlap(cache, check)
	}
	idem := cache.Use == "idempotent"
	for _, name := range p.toolNames() {
		t := p.Policy.Tools[name]
		if t != nil && t.SideEffecting == idem && (idem || !t.SecretResult) && p.Applies(cache, name) && p.Applies(check, name) {
			return true
		}
	}
	return idem && p.UndeclaredToolsRun() && p.Applies(cache, "") && p.Applies(check, "")
}

// callerCheckInsideCache reports the first read of the caller in check's
// predicates that the cache does not key on.
func (p *Pass) callerCheckInsideCache(cache, check *dsl.Entry) {
	for _, field := range []string{"when", "deny", "require"} {
		x := check.When
		if field != "when" {
			x = check.Expr(field)
		}
		if x == nil {
			continue
		}
		for _, r := range callerReads(x.Source) {
			if cacheKeysOn(cache, r.path) && (r.path != "run.meta.tenant" || p.servedMeta()) || cachePins(cache, r.path) {
				continue
			}
			keyed, advice := cacheKeying(cache, r.path)
			keyed = "without it (" + keyed + ")"
			if cacheKeysOn(cache, r.path) {
				keyed = "on the run's tenant, not on run.meta.tenant (agentc serve sets both from the key it admitted, for a policy that declares keys; a host embedding agentc sets run.meta as it likes)"
			}
			p.Report(dsl.Diagnostic{Pos: x.PosAt(r.offset), Severity: dsl.Error,
				Related: []dsl.Related{at(cache, "%s is here, outside %s", cache.Ref(), check.Ref())},
				Message: fmt.Sprintf("%s reads %s in its %s, but sits inside %s, which keys its entries %s: a hit serves one caller the answer another caller's call stored, without running %s; move %s outside %s%s",
					check.Ref(), r.path, field, cache.Ref(), keyed, check.Ref(), check.Ref(), cache.Ref(), advice)})
			return
		}
	}
}

// callerPathAt is a read of the caller in a predicate, at a byte offset of
// its source.
type callerPathAt struct {
	offset int
	path   string
}

// callerReads returns the reads of the caller in the predicate src, in
// source order: of run (run.id, run.agent, run.meta and its keys, up to
// three names deep) and of request.params.metadata, which a cache leaves
// out of its key. A read through an index (run.meta['key']) is a read of
// what it indexes.
func callerReads(src string) []callerPathAt {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	info := tree.SourceInfo()
	longest := map[int64]string{}
	ast.PreOrderVisit(tree.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		root, path, ok := selectPath(e)
		if !ok {
			if e.Kind() != ast.IdentKind {
				return
			}
			root, path = e.ID(), e.AsIdent()
		}
		if len(path) > len(longest[root]) {
			longest[root] = path
		}
	}))
	var out []callerPathAt
	for root, path := range longest {
		parts := strings.Split(path, ".")
		switch {
		case parts[0] == "run":
			path = strings.Join(parts[:min(3, len(parts))], ".")
		case len(parts) >= 3 && parts[0] == "request" && parts[1] == "params" && parts[2] == "metadata",
			len(parts) == 2 && parts[0] == "request" && parts[1] == "params":
			path = strings.Join(parts[:min(3, len(parts))], ".")
		default:
			continue
		}
		r, _ := info.GetOffsetRange(root)
		out = append(out, callerPathAt{runeToByte(src, int(r.Start)), path})
	}
	slices.SortFunc(out, func(a, b callerPathAt) int { return a.offset - b.offset })
	return out
}

// cachePins reports whether the cache's when requires the caller's path
// to hold one value (a term of its top-level &&: run.id == 'r',
// run.meta.?key.orValue("") == 'analyst', the default another value than
// the constant, so that the key is there): every call the cache keeps or
// serves has that value, so a check inside decided for each caller a hit
// serves as for the one whose call was stored. A string or bool constant
// only: a number equals a value of another type (1 == 1.0), which a check
// could tell apart.
func cachePins(cache *dsl.Entry, path string) bool {
	if cache.When == nil {
		return false
	}
	for expr, c := range runEqualities(cache.When.Source) {
		if c == "" || c[0] != 's' && c[0] != 'b' {
			continue
		}
		if expr == path && (path == "run.id" || path == "run.agent") {
			return true
		}
		key, def, ok := metaEquality(expr)
		if ok && "run.meta."+key == path && def != c {
			return true
		}
	}
	return false
}

// metaEquality splits the canonical text runValue gives a key of run.meta
// read with a default into the key and the default's text.
func metaEquality(expr string) (key, def string, ok bool) {
	rest, ok := strings.CutPrefix(expr, "run.meta[?")
	if !ok {
		return "", "", false
	}
	quoted, def, ok := strings.Cut(rest, "].orValue(")
	if !ok || !strings.HasSuffix(def, ")") {
		return "", "", false
	}
	key, err := strconv.Unquote(quoted)
	if err != nil {
		return "", "", false
	}
	return key, strings.TrimSuffix(def, ")"), true
}

// cacheScope is a memoize or semantic_memoize entry's scope.
func cacheScope(cache *dsl.Entry) string {
	if s := stringField(cache, "scope"); s != "" {
		return s
	}
	return "run"
}

// servedMeta reports whether the policy is agentc serve's (it declares
// keys, and has no turn chain, which only a host embedding agentc runs),
// where run.meta.tenant is the run's tenant: serve sets both from the key
// it admitted. A host sets run.meta as it likes.
func (p *Pass) servedMeta() bool {
	return len(p.Policy.Keys) > 0 && len(p.Policy.Chains["turn"]) == 0
}

// cacheKeysOn reports whether the cache keys its entries on the caller's
// path: the tenant (runtime.Run.Tenant, which agentc serve sets as
// run.meta.tenant, see servedMeta) and the run id, as its scope has it.
func cacheKeysOn(cache *dsl.Entry, path string) bool {
	scope := cacheScope(cache)
	if cache.Use == "idempotent" {
		// Every call is keyed on its tenant; on its run only when its
		// caller gives no idempotency key, which vet cannot know.
		scope = "key"
	}
	switch path {
	case "run.meta.tenant":
		return scope == "key" || scope == "run"
	case "run.id":
		return scope == "run"
	}
	return false
}

// cacheKeying says what the cache keys its entries on, and how it could
// key them on path.
func cacheKeying(cache *dsl.Entry, path string) (keyed, advice string) {
	if cache.Use == "idempotent" {
		if cache.Fields["key_args"] != nil {
			return "key_args: the named arguments, across runs", ""
		}
		return "the tenant, the tool and the idempotency key the caller gives, or without one the run and the arguments", ""
	}
	scope := cacheScope(cache)
	keyed = fmt.Sprintf("scope %q: %s", scope, map[string]string{"run": "one cache per run", "key": "one cache per tenant", "global": "one cache for every caller"}[scope])
	switch {
	case path == "run.meta.tenant" && scope == "global":
		advice = fmt.Sprintf(", or give %s scope \"key\"", cache.Ref())
	case path == "run.id" && scope != "run":
		advice = fmt.Sprintf(", or give %s scope \"run\"", cache.Ref())
	}
	return keyed, advice
}
