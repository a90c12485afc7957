package vet

import (
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/storeaddr"
	"github.com/agentc-dev/agentc/runtime"
)

// The state ports a store kind offers, for the kinds agentc ships. A kind a
// host registers (runtime.RegisterStoreKind) is not known here: its ports
// are found when the pipeline is built.
const (
	portKV     = "key-value"
	portAudit  = "audit sink"
	portVector = "vector index"
	portRate   = "rate limiter"
	portBudget = "budget ledger"
	portCheck  = "checkpoint store"
)

var storePorts = map[string][]string{
	"memory":   {portKV, portAudit, portVector, portRate, portBudget, portCheck},
	"sqlite":   {portKV, portAudit, portCheck},
	"redis":    {portKV, portAudit, portRate, portBudget},
	"postgres": {portKV, portAudit, portVector, portRate, portBudget, portCheck},
}

// sharedKinds are the kinds whose state every replica shares.
var sharedKinds = map[string]bool{"redis": true, "postgres": true}

// storeUse is one layer's use of a store: the field that names it, the
// store's name ("" for a layer's own state in the process) and the port the
// layer needs.
type storeUse struct {
	field, store, port string
}

// StateUse is where one layer keeps one part of its state.
type StateUse struct {
	// Field is the config field that names the store ("store", "sink",
	// "index").
	Field string
	// Store is the store's name: "default" for the default store, "" for
	// the layer's own memory in the process.
	Store string
	// Port is what the layer needs of the store ("key-value", "audit
	// sink", "vector index", "rate limiter", "budget ledger").
	Port string
	// Kind is the store's kind: "memory" for the layer's own memory and
	// an undeclared default store, else the declared store's kind.
	Kind string
	// Decl is the declared store, nil for memory that is not declared.
	Decl *dsl.Store
	// What names the state in words ("rate limit", "cache", "audit
	// trail").
	What string
}

// Shared reports whether every process that serves the policy shares the
// state (a redis or postgres store).
func (u StateUse) Shared() bool { return sharedKinds[u.Kind] }

// StateOf returns where e keeps its state, in the policy pol: one use per
// store the layer needs, none for a layer without state. A reference to an
// undeclared store (reported when the policy loads) is left out.
func StateOf(pol *dsl.Policy, e *dsl.Entry) []StateUse {
	var out []StateUse
	for _, u := range storeUses(e) {
		su := StateUse{Field: u.field, Store: u.store, Port: u.port, Kind: "memory", What: stateNoun(e)}
		if s := pol.Stores[u.store]; s != nil {
			su.Kind, su.Decl = s.Kind, s
		} else if u.store != "" && u.store != "default" {
			continue
		}
		out = append(out, su)
	}
	return out
}

// storeUses returns the stores an entry uses. A layer that keeps state and
// names no store uses "default" (memoize, semantic_memoize, idempotent,
// audit) or its own memory in the process (rate_limit, meter with a
// budget): both "" unless the policy declares a store named "default".
func storeUses(e *dsl.Entry) []storeUse {
	name := func(field string) string {
		s, _ := e.Fields[field].(string)
		return s
	}
	switch e.Use {
	case "memoize", "idempotent":
		return []storeUse{{"store", orDefault(name("store")), portKV}}
	case "semantic_memoize":
		return []storeUse{{"index", orDefault(name("index")), portVector}}
	case "audit":
		return []storeUse{{"sink", orDefault(name("sink")), portAudit}}
	case "checkpoint":
		return []storeUse{{"store", orDefault(name("store")), portCheck}}
	case "rate_limit":
		return []storeUse{{"store", name("store"), portRate}}
	case "meter":
		if _, budget := e.Fields["budget"]; !budget && name("store") == "" {
			return nil // records usage only: nothing to share
		}
		return []storeUse{{"store", name("store"), portBudget}}
	}
	return nil
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// StoreSetup reports stores that cannot be opened or cannot serve the
// layers that use them.
var StoreSetup = &Rule{
	Name:     "state/store-setup",
	Severity: dsl.Error,
	Doc: `a store that cannot be opened, or that lacks what a layer needs.

A store's kind must be one the runtime knows (memory, sqlite, redis,
postgres, or a kind registered by a linked package); a redis or postgres
store needs its server's address (url, or url_env naming the variable that
holds it). A url written in the policy must be one its kind's client
reads: redis://, rediss:// or unix:// with only the client's options in
its query for redis; a postgres:// or postgresql:// URL, or keyword/value
settings (host=db dbname=app), for postgres, read as the client reads it
(a password holding # or ?, several hosts; an sslmode or a port it
refuses). What the client would read besides the url is checked where
the store opens, so that vet judges alike on every machine: a file the
url names (a certificate, a service file), and, with PG* environment
variables set where vet runs, the settings' values (only a url the
client cannot parse at all is then reported). A postgres prefix names the
store's schema: a lower-case identifier of at most 63 bytes, and neither
a schema PostgreSQL keeps for itself (pg_ names, information_schema) nor
public, the database's default schema that other applications share.
Each layer needs one port of the store it names: memoize and
idempotent a key-value table, audit an audit sink, semantic_memoize a
vector index, rate_limit a rate limiter, a meter its budget ledgers,
checkpoint a checkpoint store. A sqlite store offers key-value, audit and
checkpoints only; redis offers no vector index and no checkpoints.
Without this rule the mistake is found when the service starts, or, for a
store selected only under some configuration, during an incident.`,
	Run: func(p *Pass) {
		// The kinds agentc ships are known even where their packages are
		// not linked (a vet that links only the builtins' configs).
		kinds := runtime.StoreKinds()
		for k := range storePorts {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
		slices.Sort(kinds)
		for _, name := range sortedStoreNames(p.Policy) {
			s := p.Policy.Stores[name]
			if !slices.Contains(kinds, s.Kind) {
				p.Reportf(s.Pos, nil, "store %q: kind %q is not a known store kind (known: %s)%s",
					name, s.Kind, strings.Join(kinds, ", "), dsl.SuggestName(s.Kind, kinds))
				continue
			}
			if sharedKinds[s.Kind] && s.URL == "" && s.URLEnv == "" {
				p.Reportf(s.Pos, nil, "store %q (%s) has no server address: set url_env to the variable that holds its URL (or url)", name, s.Kind)
			}
			if s.URL != "" {
				if err := storeURLProblem(s.Kind, s.URL); err != nil {
					p.Reportf(s.URLPos, nil, "store %q (%s): its client cannot read url: %v", name, s.Kind, err)
				}
			}
			if s.Kind == "postgres" && s.Prefix != "" {
				if why := storeaddr.PostgresSchema(s.Prefix); why != "" {
					p.Reportf(s.PrefixPos, nil, "store %q (postgres): prefix %q %s", name, s.Prefix, why)
				}
			}
		}
		for _, stage := range dsl.Stages {
			for _, e := range p.Policy.Chains[stage] {
				for _, u := range storeUses(e) {
					if u.store == "" {
						continue
					}
					s := p.Policy.Stores[u.store]
					if s == nil {
						continue // the built-in in-memory default, or a bad reference reported at load
					}
					ports, known := storePorts[s.Kind]
					if !known || slices.Contains(ports, u.port) {
						continue
					}
					p.Reportf(e.FieldPos(u.field), []dsl.Related{{Pos: s.Pos, Message: fmt.Sprintf("store %q is declared here", u.store)}},
						"%s needs a %s, which store %q (%s) does not offer (it offers %s)", e.Ref(), u.port, u.store, s.Kind, strings.Join(ports, ", "))
				}
			}
		}
	},
}

// storeURLProblem says why the client of a store of kind cannot read its
// url, as it would when the store opens (nil for a kind vet does not
// know): each is read with its client's own parser (postgres:
// postgresURLProblem).
func storeURLProblem(kind, raw string) error {
	switch kind {
	case "redis":
		_, err := goredis.ParseURL(raw)
		err = storeaddr.Unquoted(err)
		if err != nil && !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") && !strings.HasPrefix(raw, "unix://") {
			err = fmt.Errorf("%w (a redis url starts with redis://, rediss:// or unix://)", err)
		}
		return err
	case "postgres":
		return postgresURLProblem(raw)
	}
	return nil
}

// LocalInReplicas reports state kept per process in a policy served by
// several processes.
var LocalInReplicas = &Rule{
	Name:     "state/local-in-replicas",
	Severity: dsl.Warning,
	Doc: `a limit, budget, dedupe table or cache kept in one process while several serve the policy.

With settings.replicas above 1, every replica that keeps a layer's state
in its own memory (no store, or a memory store) or in a local file
(sqlite) has its own copy: three replicas admit three times the rate
limit, spend three budgets, and run a deduplicated payment once per
replica. Point the layer at a redis or postgres store that every replica
shares.`,
	Run: func(p *Pass) {
		if p.Policy.Replicas <= 1 {
			return
		}
		for _, stage := range dsl.Stages {
			for _, e := range p.Policy.Chains[stage] {
				for _, u := range StateOf(p.Policy, e) {
					if u.Kind != "memory" && u.Kind != "sqlite" {
						continue
					}
					where := "in each process's memory"
					if u.Kind == "sqlite" {
						where = fmt.Sprintf("in a local sqlite file (store %q)", u.Store)
					}
					p.Reportf(e.Pos, nil, "%s keeps its %s %s, but settings.replicas is %d: each replica has its own%s; set %s to a redis or postgres store",
						e.Ref(), u.What, where, p.Policy.Replicas, sharedHint(p.Policy), u.Field)
				}
			}
		}
	},
}

func stateNoun(e *dsl.Entry) string {
	switch e.Use {
	case "rate_limit":
		return "rate limit"
	case "meter":
		return "budget ledger"
	case "idempotent":
		return "idempotency table"
	case "audit":
		return "audit trail"
	case "checkpoint":
		return "checkpoints"
	default:
		return "cache"
	}
}

// sharedHint names the policy's shared stores, if it has any.
func sharedHint(pol *dsl.Policy) string {
	var shared []string
	for _, name := range sortedStoreNames(pol) {
		if sharedKinds[pol.Stores[name].Kind] {
			shared = append(shared, fmt.Sprintf("%q", name))
		}
	}
	if len(shared) == 0 {
		return ""
	}
	return " (the policy declares shared " + plural(len(shared), "store", "stores") + " " + strings.Join(shared, ", ") + ")"
}

func sortedStoreNames(pol *dsl.Policy) []string {
	names := make([]string, 0, len(pol.Stores))
	for n := range pol.Stores {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CacheAcrossTenants reports a cache shared by every caller in a policy
// whose keys belong to several tenants.
var CacheAcrossTenants = &Rule{
	Name:     "state/cache-across-tenants",
	Severity: dsl.Warning,
	Doc: `a cache with scope "global" in a policy whose keys belong to several tenants.

memoize and semantic_memoize with scope "global" keep one cache for every
caller: a tenant asking what another asked gets the other's cached answer,
and a tool that acts with the caller's identity (an account balance, a
customer's orders) hands one tenant's data to another. With keys of
several tenants, use scope "key" (one cache per tenant, shared by its runs)
or "run" (the default).`,
	Run: func(p *Pass) {
		tenants := map[string]bool{}
		for _, k := range p.Policy.Keys {
			tenants[k.Tenant] = true
		}
		if len(tenants) < 2 {
			return
		}
		names := make([]string, 0, len(tenants))
		for t := range tenants {
			names = append(names, fmt.Sprintf("%q", t))
		}
		slices.Sort(names)
		for _, stage := range dsl.Stages {
			for _, e := range p.Policy.Chains[stage] {
				if e.Use != "memoize" && e.Use != "semantic_memoize" {
					continue
				}
				if s, _ := e.Fields["scope"].(string); s != "global" {
					continue
				}
				p.Reportf(e.FieldPos("scope"), nil, `%s has scope "global": every tenant (%s) is served the others' cached results; use scope "key" for one cache per tenant`,
					e.Ref(), strings.Join(names, ", "))
			}
		}
	},
}
