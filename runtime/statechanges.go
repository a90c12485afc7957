package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/storeaddr"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// StateKeyer is implemented by a middleware whose state outlives a call: a
// ledger, a rate bucket, idempotency records, a cache. StateKeys returns the
// keys under which the layer, configured as decoded (not provisioned), keeps
// the state of a sample call of SampleRun: built by the code that keys its
// calls, so that two versions of a policy can be compared (StateChanges).
type StateKeyer interface {
	StateKeys(at StateSite) []StateKey
}

// StateSite is a layer's place in a plan.
type StateSite struct {
	Plan  *plan.Plan
	Stage plan.Stage
	Layer plan.Layer
	// Tenant is the tenant of the sample calls ("": SampleRun's).
	Tenant string
	// NoTenant makes the sample calls those of a caller without a tenant
	// (agentc serve without keys, a host that sets no Run.Tenant).
	NoTenant bool
}

// Name returns the layer's name (its use when unnamed).
func (s StateSite) Name() string { return layerName(s.Layer) }

// Run returns the run of the sample calls whose keys StateKeys returns:
// SampleRun, or, under Tenant when set, a run of that tenant's named as
// agentc serve names it (TenantRunID); with NoTenant, SampleRun's id
// without a tenant.
func (s StateSite) Run() Run {
	r := SampleRun
	switch {
	case s.NoTenant:
		r.Tenant = ""
	case s.Tenant != "":
		r.Tenant, r.ID = s.Tenant, TenantRunID(s.Tenant, SampleRun.ID)
	}
	return r
}

// TenantRunID returns the id of the run a caller of tenant names name, as
// agentc serve keeps tenants' runs apart: the tenant before name, so that
// two tenants naming the same run never share its state. A slash in the
// tenant is escaped (%2F, as in a URL path), so the prefix ends at the
// first slash: tenant "bank" naming run "retail/r1" never reaches the run
// "r1" of tenant "bank/retail". No tenant keeps name as it is.
func TenantRunID(tenant, name string) string {
	if tenant == "" {
		return name
	}
	return url.PathEscape(tenant) + "/" + name
}

// CoveredTool is a side-effecting tool a layer applies to, as the tool
// chain sees its calls.
type CoveredTool struct {
	// Name is the name its calls have in the tool chain: a declared
	// tool's, or an MCP server's prefix before the tool's own name
	// (SampleMCPTool for every tool of the server).
	Name string
	// Label names it in messages: its name, or `the tools of mcp server
	// "fs"`.
	Label string
	// Server is the MCP server that serves it ("" for a declared tool),
	// and Upstream its own name there ("" for every tool of the server).
	Server, Upstream string
}

// SampleMCPTool is the name, after its server's prefix, of the sample call
// that stands for every tool of an MCP server.
const SampleMCPTool = "sample_tool"

// SideEffectingTools returns the side-effecting tools the layer applies
// to, sorted: the declared ones (its tools, when scoped), and the tools of
// the policy's MCP servers, which the policy does not list and which are
// side-effecting unless their server says otherwise. An unscoped layer
// covers every tool of each server (one sample call each); a scoped one
// the names of its tools that the policy does not declare, each the tool
// of the server whose prefix starts it (the longest such prefix, when one
// server has it).
func (s StateSite) SideEffectingTools() []CoveredTool {
	var out []CoveredTool
	for _, name := range slices.Sorted(maps.Keys(s.Plan.Tools)) {
		if s.Plan.Tools[name].SideEffecting && (len(s.Layer.Tools) == 0 || slices.Contains(s.Layer.Tools, name)) {
			out = append(out, CoveredTool{Name: name, Label: name})
		}
	}
	servers := slices.Sorted(maps.Keys(s.Plan.MCPServers))
	if len(s.Layer.Tools) == 0 {
		for _, sv := range servers {
			out = append(out, CoveredTool{Name: s.Plan.MCPServers[sv].Prefix + SampleMCPTool,
				Label: fmt.Sprintf("the tools of mcp server %q", sv), Server: sv})
		}
		return out
	}
	for _, name := range s.Layer.Tools {
		if _, declared := s.Plan.Tools[name]; declared {
			continue
		}
		var by []string
		for _, sv := range servers {
			prefix := s.Plan.MCPServers[sv].Prefix
			switch {
			case !strings.HasPrefix(name, prefix) || len(name) == len(prefix):
			case len(by) == 0 || len(prefix) > len(s.Plan.MCPServers[by[0]].Prefix):
				by = []string{sv}
			case len(prefix) == len(s.Plan.MCPServers[by[0]].Prefix):
				by = append(by, sv)
			}
		}
		if len(by) == 1 {
			out = append(out, CoveredTool{Name: name, Label: name, Server: by[0],
				Upstream: name[len(s.Plan.MCPServers[by[0]].Prefix):]})
		}
	}
	return out
}

// SampleRun is the run of the sample calls whose keys StateKeys returns
// (StateSite.Run).
var SampleRun = Run{ID: "sample-run", Tenant: "sample-tenant"}

// StateKey is one key a layer keeps state under.
type StateKey struct {
	// Store names the store as the layer resolves it: DefaultStore for
	// the default store, "" for the layer's own state in the process.
	Store string
	// Key is the key of the sample call.
	Key string
	// Tool is the tool whose calls the key is of ("" for every call).
	Tool string
	// What names the state ("budget ledger", "idempotency records of
	// refund").
	What string
	// Then says what follows when the state starts afresh.
	Then string
	// Server and Upstream are, for a tool of an MCP server, the server
	// and the tool's own name there ("" for every tool of the server)
	// (CoveredTool).
	Server, Upstream string
	// Repeats marks records of calls that ran: losing them runs a
	// repeated call again. Such records are left behind by the layer
	// removed too, or no longer applying to the tool, while the tool is
	// still called.
	Repeats bool
	// Digests says how the key, or what it holds, hangs on
	// settings.digest_key_env (StateChanges reports a change of it).
	Digests DigestUse
}

// DigestUse is how a layer's state hangs on settings.digest_key_env.
type DigestUse int

const (
	// DigestsNone: the state holds no digest the setting keys.
	DigestsNone DigestUse = iota
	// DigestsKeyed: the key or the state holds digests made with the
	// digest key, and a layer with another key, or none, does not read
	// it (a cache's entries).
	DigestsKeyed
	// DigestsReadPlain: as DigestsKeyed, except that a layer given a key
	// still reads what was written without one (idempotent's records):
	// setting the key moves nothing, removing or changing it does.
	DigestsReadPlain
)

// StateChange is the state a new version of a policy leaves behind: a layer
// of both versions that keys its state under another key (or in another
// store) now, so that the state kept before is not found and starts afresh;
// or records of calls that ran (StateKey.Repeats) that no layer keeps any
// more while their tool is still called (Removed).
type StateChange struct {
	Stage plan.Stage
	// Layer is the layer's name in the new version, Use its kind and Pos
	// its position (the baseline's, for a layer removed).
	Layer, Use, Pos string
	// WasLayer is the layer's name in the baseline when it had another
	// one that Fields does not list (its keys do not hold it).
	WasLayer string
	// Removed is set when the layer was removed (Fields empty), or no
	// longer applies to Tool (Fields says why: "tools", or a field of its
	// MCP server), rather than keying it differently.
	Removed bool
	// Fields are what changed, as written in the new version: the layer's
	// config fields ("key_args", "scope", "store"), "name", "tools" (its
	// scope), "chain" (the layer moved to another chain), "stores.NAME"
	// for the declaration of the store it names,
	// "mcp_servers.NAME.prefix" for the prefix of the MCP server that
	// serves Tool, "keys.KEY.tenant" for the tenant of a virtual key, or
	// "keys" for keys declared where there were none, or none where there
	// were some (every caller's tenant changed), or
	// "settings.digest_key_env" (digestStateChanges).
	Fields []string
	// Was and Now are the values of Fields before and after, as JSON
	// ("keys": in words).
	Was, Now []string
	// Tool is the tool whose records start afresh ("" for every call),
	// and Server the MCP server that serves it ("" for a declared tool).
	Tool, Server string
	// Key is the virtual key whose calls alone start afresh (its tenant
	// changed: Fields is "keys.KEY.tenant"), "" for every caller's.
	Key string
	// What, Then and Repeats are the key's (StateKey).
	What, Then string
	Repeats    bool
	// Where is the store that held the state before.
	Where string
}

// Message describes c in one sentence.
func (c StateChange) Message() string {
	var changed []string
	for i, f := range c.Fields {
		changed = append(changed, fmt.Sprintf("%s %s → %s", f, c.Was[i], c.Now[i]))
	}
	ref := c.Layer
	switch {
	case c.WasLayer == c.Use:
		ref += " (" + c.Use + ", unnamed in the baseline)"
	case c.WasLayer != "":
		ref += fmt.Sprintf(" (%s, %q in the baseline)", c.Use, c.WasLayer)
	case c.Layer != c.Use:
		ref += " (" + c.Use + ")"
	}
	switch {
	case c.Removed && len(c.Fields) == 0:
		return fmt.Sprintf("%s of the baseline is removed: its %s, kept %s, are left behind: %s", ref, c.What, c.Where, c.Then)
	case c.Removed:
		return fmt.Sprintf("%s no longer covers %s (%s): its %s, kept %s, are left behind: %s",
			ref, c.Tool, strings.Join(changed, ", "), c.What, c.Where, c.Then)
	case c.Key != "":
		return fmt.Sprintf("%s keys the calls of key %q differently from the baseline (%s): its %s, kept %s, start afresh for them: %s",
			ref, c.Key, strings.Join(changed, ", "), c.What, c.Where, c.Then)
	}
	return fmt.Sprintf("%s keys its state differently from the baseline (%s): its %s, kept %s, start afresh: %s",
		ref, strings.Join(changed, ", "), c.What, c.Where, c.Then)
}

// StateChanges compares the state keys of the layers of two versions of a
// policy, sharing their stores (a reload, a rollout), and returns the state
// old kept that next leaves behind. A layer is compared with the layer of
// the same chain and kind that has its name, else, when the chain has as
// many layers of its kind unpaired in both versions, with the one most like
// it (pairLayers), else with the only layer of its kind
// and name that another chain of next adds (a layer moved to another
// chain). A layer added is not a change of state, nor is one removed,
// except for records of calls that ran (StateKey.Repeats): those a layer
// removed, or no longer applying to a tool, kept are reported while the
// tool is still side-effecting and no layer of the chain keeps them under
// the same key. The tools of an MCP server are paired across versions by
// the server's name, else by its command or URL (a server renamed). A
// virtual key whose tenant changed (paired by name, else by its secret: a
// key renamed) moves its callers' state, for each layer keyed by the
// tenant, to keys under the new tenant: reported once per key (Key); keys
// declared where there were none, or none where there were some, move
// every caller between no tenant and its key's: reported once, at "keys".
// settings.digest_key_env naming another variable, or set or removed, moves
// the state whose keys or records are digested with it (StateKey.Digests),
// at "settings.digest_key_env". Layers whose middleware is not registered,
// or whose config does not decode, are skipped: StateUncompared lists them.
func StateChanges(old, next *plan.Plan) []StateChange {
	renamed, moves := serverRenames(old, next), tenantMoves(old, next)
	pairs, removed, kept := pairSites(old, next)
	var out []StateChange
	for _, p := range pairs {
		out = append(out, layerStateChanges(p[0], p[1], renamed, kept[p[1].Stage])...)
		out = append(out, tenantStateChanges(p[0], p[1], moves, renamed)...)
		out = append(out, digestStateChanges(p[0], p[1], renamed)...)
	}
	for _, s := range removed {
		out = append(out, removedLayer(s, next, renamed, kept[s.Stage])...)
	}
	slices.SortStableFunc(out, func(a, b StateChange) int {
		return slices.Index(stages, a.Stage) - slices.Index(stages, b.Stage)
	})
	return out
}

// pairSites pairs the layers of old and next as StateChanges compares
// them: within a chain (pairLayers), then across chains (movedLayers). It
// returns the pairs, the layers of old left unpaired, and the state keys
// of each layer of next's chains.
func pairSites(old, next *plan.Plan) (pairs [][2]StateSite, removed []StateSite, kept map[plan.Stage][]map[string]identified) {
	kept = map[plan.Stage][]map[string]identified{}
	var added []StateSite
	for _, stage := range stages {
		olds, news := old.Chains.Of(stage), next.Chains.Of(stage)
		for _, l := range news {
			ks, _ := keysAt(StateSite{Plan: next, Stage: stage, Layer: l}, nil)
			kept[stage] = append(kept[stage], ks)
		}
		pairedOld, pairedNew := map[int]bool{}, map[int]bool{}
		for _, pair := range pairLayers(olds, news) {
			pairedOld[pair[0]], pairedNew[pair[1]] = true, true
			pairs = append(pairs, [2]StateSite{{Plan: old, Stage: stage, Layer: olds[pair[0]]}, {Plan: next, Stage: stage, Layer: news[pair[1]]}})
		}
		for i, l := range olds {
			if !pairedOld[i] {
				removed = append(removed, StateSite{Plan: old, Stage: stage, Layer: l})
			}
		}
		for j, l := range news {
			if !pairedNew[j] {
				added = append(added, StateSite{Plan: next, Stage: stage, Layer: l})
			}
		}
	}
	moved, removed := movedLayers(removed, added)
	return append(pairs, moved...), removed, kept
}

// CoverageChange is a layer keeping records of calls that ran (an
// idempotent layer) whose `when` may cover fewer calls in the new version
// of a policy: a call the old `when` covered and the new one does not is
// no longer deduplicated, so one made before the change runs again when it
// is repeated. No stored state is lost (StateChange): the records stay,
// and are not read for those calls.
type CoverageChange struct {
	Stage plan.Stage
	// Layer is the layer's name in the new version, Use its kind and Pos
	// its position.
	Layer, Use, Pos string
	// Was and Now are the sources of the `when` before and after ("":
	// unset, every call).
	Was, Now string
	// Tools are the tools whose records the layer keeps, sorted.
	Tools []string
}

// Message describes c in one sentence.
func (c CoverageChange) Message() string {
	ref := c.Layer
	if c.Layer != c.Use {
		ref += " (" + c.Use + ")"
	}
	src := func(s string) string {
		if s == "" {
			return "unset"
		}
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s covers calls by another when than the baseline (when %s → %s): a call of %s that the baseline's when covered and this one does not is no longer deduplicated: one made before the change runs again if repeated",
		ref, src(c.Was), src(c.Now), strings.Join(c.Tools, ", "))
}

// CoverageChanges returns the layers of next, paired with old's as
// StateChanges pairs them, that keep records of calls that ran and whose
// `when` may cover fewer calls than old's: set where it was unset, or
// changed (which calls two predicates cover is not compared; a `when`
// removed covers every call, and is not reported).
func CoverageChanges(old, next *plan.Plan) []CoverageChange {
	pairs, _, _ := pairSites(old, next)
	var out []CoverageChange
	for _, p := range pairs {
		was, now := p[0].Layer.When, p[1].Layer.When
		if now == nil || (was != nil && was.Source == now.Source) {
			continue
		}
		ks, _ := keysAt(p[1], nil)
		var tools []string
		for _, id := range slices.Sorted(maps.Keys(ks)) {
			if ks[id].Repeats {
				tools = append(tools, ks[id].Tool)
			}
		}
		if len(tools) == 0 {
			continue
		}
		c := CoverageChange{Stage: p[1].Stage, Layer: p[1].Name(), Use: p[1].Layer.Use, Pos: p[1].Layer.Pos, Now: now.Source}
		if was != nil {
			c.Was = was.Source
		}
		c.Tools = tools
		out = append(out, c)
	}
	return out
}

// stages are the chains in the order StateChanges reports them.
var stages = []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn}

// movedLayers pairs each layer of removed (layers of old no layer of their
// chain in next pairs with) with the only layer of added (those of next
// unpaired) of its kind and name in another chain, when it is the only one
// of removed with that kind and name; it returns the pairs and the layers
// of removed left unpaired.
func movedLayers(removed, added []StateSite) (pairs [][2]StateSite, rest []StateSite) {
	same := func(ss []StateSite, o StateSite) []StateSite {
		var out []StateSite
		for _, s := range ss {
			if s.Layer.Use == o.Layer.Use && s.Name() == o.Name() {
				out = append(out, s)
			}
		}
		return out
	}
	for _, o := range removed {
		if to := same(added, o); len(to) == 1 && to[0].Stage != o.Stage && len(same(removed, o)) == 1 {
			pairs = append(pairs, [2]StateSite{o, to[0]})
			continue
		}
		rest = append(rest, o)
	}
	return pairs, rest
}

// tenantMove is a virtual key of next whose calls had another tenant in
// old, or every caller when old or next alone declares keys (key "",
// field "keys"): a policy without keys gives every call no tenant.
type tenantMove struct {
	key, field string
	// was and now are the tenants before and after; wasNone and nowNone
	// mark calls without a tenant.
	was, now         string
	wasNone, nowNone bool
	// wasText and nowText describe the field before and after.
	wasText, nowText string
}

// tenantMoves returns the keys of next whose tenant differs from theirs in
// old, sorted by name: a key is paired with old's key of its name, else
// with the only key old has and next does not with its sha256 or env (a
// key renamed, whose tenant defaults to its name). Keys declared where
// there were none, or none where there were some, move every caller
// between no tenant and its key's: one move, at "keys".
func tenantMoves(old, next *plan.Plan) []tenantMove {
	switch {
	case len(old.Keys) == 0 && len(next.Keys) > 0:
		tenant, text := keyTenants(next)
		return []tenantMove{{field: "keys", wasNone: true, now: tenant, wasText: noTenant, nowText: text}}
	case len(old.Keys) > 0 && len(next.Keys) == 0:
		tenant, text := keyTenants(old)
		return []tenantMove{{field: "keys", was: tenant, nowNone: true, wasText: text, nowText: noTenant}}
	}
	var out []tenantMove
	for _, name := range slices.Sorted(maps.Keys(next.Keys)) {
		k := next.Keys[name]
		was, ok := old.Keys[name]
		wasName := name
		if !ok {
			var same []string
			for n, o := range old.Keys {
				if _, kept := next.Keys[n]; !kept && ((k.SHA256 != "" && o.SHA256 == k.SHA256) || (k.Env != "" && o.Env == k.Env)) {
					same = append(same, n)
				}
			}
			if len(same) != 1 {
				continue
			}
			wasName, was = same[0], old.Keys[same[0]]
		}
		if t, u := was.TenantOf(wasName), k.TenantOf(name); t != u {
			out = append(out, tenantMove{key: name, field: "keys." + name + ".tenant", was: t, now: u,
				wasText: strconv.Quote(t), nowText: strconv.Quote(u)})
		}
	}
	return out
}

// noTenant describes a policy without keys in a tenantMove.
const noTenant = "unset, calls without a tenant"

// keyTenants returns the tenant of p's first key by name, and describes
// p's keys in a tenantMove: `set, calls under their key's tenant ("ops",
// "shop")`.
func keyTenants(p *plan.Plan) (first string, text string) {
	var tenants []string
	for _, name := range slices.Sorted(maps.Keys(p.Keys)) {
		t := p.Keys[name].TenantOf(name)
		if first == "" {
			first = t
		}
		tenants = append(tenants, strconv.Quote(t))
	}
	slices.Sort(tenants)
	return first, "set, calls under their key's tenant (" + strings.Join(slices.Compact(tenants), ", ") + ")"
}

// tenantStateChanges returns, for each move of a key's calls to another
// tenant (moves), the state of the paired layers old and next that those
// calls kept under the old tenant and keep under another key now. A tool
// whose key changed for every caller (layerStateChanges) is not reported
// again.
func tenantStateChanges(old, next StateSite, moves []tenantMove, renamed map[string]string) []StateChange {
	was, ok := keysAt(old, renamed)
	if !ok || len(moves) == 0 {
		return nil
	}
	now, _ := keysAt(next, nil)
	var out []StateChange
	for _, m := range moves {
		o, n := old, next
		o.Tenant, o.NoTenant, n.Tenant, n.NoTenant = m.was, m.wasNone, m.now, m.nowNone
		wt, _ := keysAt(o, renamed)
		nt, _ := keysAt(n, nil)
		for _, id := range slices.Sorted(maps.Keys(wt)) {
			w, before := wt[id]
			k, after := nt[id]
			if !before || !after || was[id].id != now[id].id || was[id].Key != now[id].Key || w.Key == k.Key {
				continue
			}
			out = append(out, StateChange{Stage: next.Stage, Layer: next.Name(), Use: next.Layer.Use, Pos: next.Layer.Pos,
				Key: m.key, Fields: []string{m.field}, Was: []string{m.wasText}, Now: []string{m.nowText},
				Tool: k.Tool, Server: k.Server, What: k.What, Then: k.Then, Repeats: k.Repeats, Where: describeStore(old.Plan, w.Store),
				WasLayer: wasLayer(old, next, nil)})
		}
	}
	return out
}

// digestStateChanges returns the state of the paired layers old and next
// that hangs on settings.digest_key_env (StateKey.Digests), when the
// setting names another variable in next: the records written under the
// key of before are not read under another key, nor without one (what was
// written without a key is read by a layer of DigestsReadPlain given one).
// The plan holds the variable's name, not the key: a key changed under
// the same name is not seen. A tool whose key changed for every caller
// (layerStateChanges) is not reported again.
func digestStateChanges(old, next StateSite, renamed map[string]string) []StateChange {
	was, now := old.Plan.Settings.DigestKeyEnv, next.Plan.Settings.DigestKeyEnv
	if was == now {
		return nil
	}
	wk, ok := keysAt(old, renamed)
	if !ok {
		return nil
	}
	nk, _ := keysAt(next, nil)
	var out []StateChange
	for _, id := range slices.Sorted(maps.Keys(nk)) {
		w, before := wk[id]
		n := nk[id]
		if !before || w.id != n.id || w.Key != n.Key || n.Digests == DigestsNone || n.Digests == DigestsReadPlain && was == "" {
			continue
		}
		out = append(out, StateChange{Stage: next.Stage, Layer: next.Name(), Use: next.Layer.Use, Pos: next.Layer.Pos,
			Fields: []string{"settings.digest_key_env"}, Was: []string{digestKeyText(was)}, Now: []string{digestKeyText(now)},
			Tool: n.Tool, Server: n.Server, What: n.What, Then: n.Then, Repeats: n.Repeats, Where: describeStore(old.Plan, w.Store),
			WasLayer: wasLayer(old, next, nil)})
	}
	return out
}

// digestKeyText describes settings.digest_key_env in a StateChange.
func digestKeyText(env string) string {
	if env == "" {
		return "unset (plain SHA-256)"
	}
	return strconv.Quote(env)
}

// wasLayer returns the name old's layer had when next's has another and
// fields (what moved its keys) do not list it: a layer paired as renamed,
// whose keys do not hold its name.
func wasLayer(old, next StateSite, fields []string) string {
	if old.Name() == next.Name() || slices.Contains(fields, "name") {
		return ""
	}
	return old.Name()
}

// serverRenames maps the name of each MCP server of old to its name in
// next: its own when next has it, else that of the only server new in
// next with its command or URL; a server next does not have maps to "".
func serverRenames(old, next *plan.Plan) map[string]string {
	out := map[string]string{}
	for name, s := range old.MCPServers {
		if _, ok := next.MCPServers[name]; ok {
			out[name] = name
			continue
		}
		var same []string
		for n, ns := range next.MCPServers {
			if _, before := old.MCPServers[n]; !before && ns.URL == s.URL && slices.Equal(ns.Command, s.Command) {
				same = append(same, n)
			}
		}
		if len(same) == 1 {
			out[name] = same[0]
		}
	}
	return out
}

// removedLayer returns the records of calls that ran that old's layer,
// which next does not have, leaves behind.
func removedLayer(old StateSite, next *plan.Plan, renamed map[string]string, kept []map[string]identified) []StateChange {
	was, ok := keysAt(old, renamed)
	if !ok {
		return nil
	}
	var out []StateChange
	for _, id := range slices.Sorted(maps.Keys(was)) {
		if w := was[id]; leftBehind(w, next, renamed, kept) {
			out = append(out, StateChange{Stage: old.Stage, Layer: old.Name(), Use: old.Layer.Use, Pos: old.Layer.Pos, Removed: true,
				Tool: w.Tool, Server: w.Server, What: w.What, Then: w.Then, Repeats: true, Where: describeStore(old.Plan, w.Store)})
		}
	}
	return out
}

// leftBehind reports whether w holds records of calls that ran whose tool
// next still has side-effecting, which no layer of the chain (kept, the
// keys of each) keeps under the same key in the same store.
func leftBehind(w identified, next *plan.Plan, renamed map[string]string, kept []map[string]identified) bool {
	if !w.Repeats {
		return false
	}
	if w.Server == "" && !next.Tools[w.Tool].SideEffecting {
		return false
	}
	if w.Server != "" && renamed[w.Server] == "" {
		return false
	}
	for _, ks := range kept {
		for _, k := range ks {
			if k.id == w.id && k.Key == w.Key {
				return false
			}
		}
	}
	return true
}

// pairLayers pairs the layers of two versions of a chain: by kind and name,
// then, for a kind with as many unpaired layers on both sides (one each, or
// several renamed), each with the one most like it (the most fields alike,
// name aside; the first in the chain on a tie).
func pairLayers(olds, news []plan.Layer) [][2]int {
	var pairs [][2]int
	usedOld, usedNew := map[int]bool{}, map[int]bool{}
	for j, n := range news {
		for i, o := range olds {
			if !usedOld[i] && o.Use == n.Use && layerName(o) == layerName(n) {
				pairs = append(pairs, [2]int{i, j})
				usedOld[i], usedNew[j] = true, true
				break
			}
		}
	}
	unpaired := func(ls []plan.Layer, used map[int]bool, use string) []int {
		var idx []int
		for i, l := range ls {
			if !used[i] && l.Use == use {
				idx = append(idx, i)
			}
		}
		return idx
	}
	for j, n := range news {
		if usedNew[j] {
			continue
		}
		o, nn := unpaired(olds, usedOld, n.Use), unpaired(news, usedNew, n.Use)
		if len(o) != len(nn) {
			continue
		}
		for len(o) > 0 {
			bi, bj, best := 0, 0, -1
			for a, i := range o {
				for b, k := range nn {
					if alike := fieldsAlike(olds[i], news[k]); alike > best {
						bi, bj, best = a, b, alike
					}
				}
			}
			pairs = append(pairs, [2]int{o[bi], nn[bj]})
			usedOld[o[bi]], usedNew[nn[bj]] = true, true
			o, nn = slices.Delete(o, bi, bi+1), slices.Delete(nn, bj, bj+1)
		}
	}
	slices.SortFunc(pairs, func(a, b [2]int) int { return a[1] - b[1] })
	return pairs
}

// fieldsAlike counts the fields, name aside, that a and b set alike.
func fieldsAlike(a, b plan.Layer) int {
	fa, fb := layerFields(a), layerFields(b)
	n := 0
	for f, v := range fa {
		if f != "name" && bytes.Equal(v, fb[f]) {
			n++
		}
	}
	return n
}

// identified is a state key with its store's identity.
type identified struct {
	StateKey
	id string
}

// keysAt returns the state keys of the layer at s, each with its store's
// identity, by the tool they are of (toolID); ok is false when the layer
// keeps no state or cannot be decoded. renamed maps the names of s's MCP
// servers to those of the version they are compared with (nil: as they
// are).
func keysAt(s StateSite, renamed map[string]string) (keys map[string]identified, ok bool) {
	ks, ok := layerStateKeys(s)
	if !ok {
		return nil, false
	}
	keys = map[string]identified{}
	for _, k := range ks {
		keys[toolID(k, renamed)] = identified{StateKey: k, id: storeIdentity(s.Plan, k.Store)}
	}
	return keys, true
}

// toolID names the tool of k across versions: a declared tool by its name,
// an MCP server's tool by its server (renamed) and its own name there.
func toolID(k StateKey, renamed map[string]string) string {
	if k.Server == "" {
		return k.Tool
	}
	server := k.Server
	if renamed != nil {
		if server = renamed[k.Server]; server == "" {
			server = "\x00gone " + k.Server // pairs with none
		}
	}
	return "mcp\x00" + server + "\x00" + k.Upstream
}

// LayerStateKeys returns the state keys of the layer at s, decoded as Build
// decodes it (nil for a layer that keeps no state, is not registered or
// does not decode).
func LayerStateKeys(s StateSite) []StateKey {
	ks, _ := layerStateKeys(s)
	return ks
}

func layerStateKeys(s StateSite) ([]StateKey, bool) {
	sk, _ := layerKeyer(s.Layer)
	if sk == nil {
		return nil, false
	}
	return sk.StateKeys(s), true
}

// layerKeyer returns the layer's middleware, decoded, when it keeps state
// (nil for one that keeps none), or nil and why its keys cannot be read:
// its middleware is not registered, or its config does not decode.
func layerKeyer(l plan.Layer) (sk StateKeyer, why string) {
	m, found := LookupModule(l.Use)
	if !found || m.New == nil {
		return nil, fmt.Sprintf("middleware %q is not registered in this program", l.Use)
	}
	inst := m.New()
	sk, isKeyer := inst.(StateKeyer)
	if !isKeyer {
		return nil, ""
	}
	if err := decodeConfig(inst, l.Config); err != nil {
		return nil, "its config does not decode: " + err.Error()
	}
	return sk, ""
}

// Uncompared is a layer whose state keys StateChanges could not read, and
// so did not compare: a change of them is not reported. Its middleware is
// not registered in the program that compares (one that compiles policies
// without importing the builtins, github.com/agentc-dev/agentc/builtins/all),
// or its config does not decode (a baseline plan another build wrote).
type Uncompared struct {
	Stage plan.Stage
	// Layer is the layer's name, Use its kind and Pos its position, in
	// the new version, or in the baseline when Baseline is set.
	Layer, Use, Pos string
	// Baseline is set for a layer of the baseline that the new version
	// has no unreadable layer of its name and kind in its chain for.
	Baseline bool
	// Why says why its keys could not be read.
	Why string
}

// Message describes u in one sentence.
func (u Uncompared) Message() string {
	ref := u.Layer
	if u.Layer != u.Use {
		ref += " (" + u.Use + ")"
	}
	if u.Baseline {
		ref += " in the baseline"
	}
	msg := fmt.Sprintf("the state of %s could not be compared: %s; a change of its keys is not reported", ref, u.Why)
	if u.Baseline && u.Pos != "" {
		msg += " (the baseline's layer at " + u.Pos + ")"
	}
	return msg
}

// StateUncompared returns the layers of old and next whose state keys
// StateChanges cannot read (Uncompared), in chain order, those of next
// first: a layer of both versions (its chain, name and kind) once, at
// next's. A layer whose middleware keeps no state is read.
func StateUncompared(old, next *plan.Plan) []Uncompared {
	var out []Uncompared
	seen := map[[3]string]bool{}
	for i, p := range []*plan.Plan{next, old} {
		for _, stage := range stages {
			for _, l := range p.Chains.Of(stage) {
				id := [3]string{string(stage), layerName(l), l.Use}
				_, why := layerKeyer(l)
				if why == "" || seen[id] {
					continue
				}
				seen[id] = true
				out = append(out, Uncompared{Stage: stage, Layer: layerName(l), Use: l.Use, Pos: l.Pos, Baseline: i == 1, Why: why})
			}
		}
	}
	return out
}

// layerStateChanges compares one layer's keys in two versions: the keys
// it moved, and the records of calls that ran it no longer keeps (kept:
// the keys of each layer of next's chain).
func layerStateChanges(old, next StateSite, renamed map[string]string, kept []map[string]identified) []StateChange {
	was, ok := keysAt(old, renamed)
	if !ok {
		return nil
	}
	now, ok := keysAt(next, nil)
	if !ok {
		return nil
	}
	var out []StateChange
	for _, id := range slices.Sorted(maps.Keys(unionKeys(was, now))) {
		w, before := was[id]
		n, after := now[id]
		var c StateChange
		switch {
		case before && after && (w.id != n.id || w.Key != n.Key):
			c = StateChange{Tool: n.Tool, Server: n.Server, What: n.What, Then: n.Then}
		case before && !after && leftBehind(w, next.Plan, renamed, kept):
			c = StateChange{Tool: w.Tool, Server: w.Server, What: w.What, Then: w.Then, Removed: true}
		default:
			continue
		}
		c.Stage, c.Layer, c.Use, c.Pos = next.Stage, next.Name(), next.Layer.Use, next.Layer.Pos
		c.Repeats, c.Where = w.Repeats, describeStore(old.Plan, w.Store)
		c.Fields, c.Was, c.Now = changedFields(old, next, id, w, renamed)
		c.WasLayer = wasLayer(old, next, c.Fields)
		out = append(out, c)
	}
	return out
}

// changedFields returns the fields whose change moves the key of the tool
// id away from w (or drops it): each field that differs between the
// versions and whose old value, put back alone into the new layer, brings
// back w's key or store, or drops the key the tool has now. A store whose
// name stays while its declaration changes is "stores.NAME", an MCP server
// whose prefix changed "mcp_servers.NAME.prefix".
func changedFields(old, next StateSite, id string, w identified, renamed map[string]string) (fields, was, now []string) {
	oldCfg, newCfg := layerFields(old.Layer), layerFields(next.Layer)
	n, _ := keysAt(next, nil)
	nk, has := n[id]
	for _, f := range slices.Sorted(maps.Keys(unionKeys(oldCfg, newCfg))) {
		if bytes.Equal(oldCfg[f], newCfg[f]) {
			continue
		}
		h := next
		h.Layer = withField(next.Layer, f, oldCfg[f])
		hk, ok := keysAt(h, nil)
		if !ok {
			continue
		}
		if k, hhas := hk[id]; hhas != has || k.Key != nk.Key || k.id != nk.id {
			fields, was, now = append(fields, f), append(was, jsonOr(oldCfg[f])), append(now, jsonOr(newCfg[f]))
		}
	}
	if old.Stage != next.Stage {
		h := next
		h.Stage = old.Stage
		if hk, _ := keysAt(h, nil); hk[id].Key != nk.Key || hk[id].id != nk.id {
			fields, was, now = append(fields, "chain"), append(was, strconv.Quote(string(old.Stage))), append(now, strconv.Quote(string(next.Stage)))
		}
	}
	if has && nk.Store == w.Store && nk.id != w.id {
		fields = append(fields, "stores."+StoreName(w.Store))
		was, now = append(was, storeAttrs(old.Plan.Stores[w.Store])), append(now, storeAttrs(next.Plan.Stores[nk.Store]))
	}
	if w.Server != "" && renamed[w.Server] != "" {
		server := renamed[w.Server]
		if p, q := old.Plan.MCPServers[w.Server].Prefix, next.Plan.MCPServers[server].Prefix; p != q {
			fields = append(fields, "mcp_servers."+server+".prefix")
			was, now = append(was, strconv.Quote(p)), append(now, strconv.Quote(q))
		}
	}
	return fields, was, now
}

func unionKeys[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// jsonOr writes a config value for a message, compacted: a plan file
// indents its configs, and a message is one line. "unset" when absent.
func jsonOr(b json.RawMessage) string {
	if len(b) == 0 {
		return "unset"
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return strings.Join(strings.Fields(string(b)), " ")
	}
	return out.String()
}

// layerFields returns the top-level fields of l's config, with its
// "name" and, when scoped, its "tools".
func layerFields(l plan.Layer) map[string]json.RawMessage {
	out := configFields(l)
	out["name"], _ = json.Marshal(layerName(l))
	if len(l.Tools) > 0 {
		out["tools"], _ = json.Marshal(l.Tools)
	}
	return out
}

// configFields returns the top-level fields of l's config.
func configFields(l plan.Layer) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	_ = json.Unmarshal(l.Config, &out)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	return out
}

// withField returns l with its field f set to v (removed when v is empty;
// "name" is the layer's name, "tools" its scope).
func withField(l plan.Layer, f string, v json.RawMessage) plan.Layer {
	switch f {
	case "name":
		_ = json.Unmarshal(v, &l.Name)
		return l
	case "tools":
		l.Tools = nil
		_ = json.Unmarshal(v, &l.Tools)
		return l
	}
	cfg := configFields(l)
	if len(v) == 0 {
		delete(cfg, f)
	} else {
		cfg[f] = v
	}
	l.Config, _ = json.Marshal(cfg)
	return l
}

// storeIdentity names where the state of store name lives in p: what the
// store is opened on (kind, address, prefix, file), not its name, so that a
// store renamed keeps its identity and one pointed elsewhere does not. The
// layer's own state ("") and an undeclared default store are the process's
// memory, which a server's reload keeps (Deps.Memory).
func storeIdentity(p *plan.Plan, name string) string {
	s, declared := p.Stores[name]
	switch {
	case !declared && (name == "" || name == DefaultStore):
		return "process memory"
	case !declared:
		return "undeclared store " + name
	case s.Kind == "memory":
		// A declared memory store is the pipeline's own.
		return "memory store " + name
	}
	// The database the url names, not how it is written: a password
	// rotated, a client option changed, the default port written out or
	// the host's case changed leaves the state where it was.
	url, ok := storeaddr.Identity(s.URL)
	switch {
	case s.URL == "":
		url = "$" + s.URLEnv
	case !ok:
		url = s.URL
	}
	prefix := s.Prefix
	if prefix == "" {
		prefix = "agentc"
	}
	return strings.Join([]string{s.Kind, url, prefix, s.Path}, "\x00")
}

// describeStore names store name of p in words: `in store "shared" (redis,
// url_env REDIS_URL, prefix billing)`, "in process memory".
func describeStore(p *plan.Plan, name string) string {
	s, declared := p.Stores[name]
	if !declared {
		if name == "" || name == DefaultStore {
			return "in process memory"
		}
		return fmt.Sprintf("in store %q", name)
	}
	return fmt.Sprintf("in store %q (%s)", name, storeAttrs(s))
}

// storeAttrs describes where s keeps its data: "redis, url_env REDIS_URL,
// prefix billing" (never a URL's credentials).
func storeAttrs(s plan.Store) string {
	parts := []string{s.Kind}
	switch {
	case s.URL != "":
		parts = append(parts, "url "+RedactURL(s.URL))
	case s.URLEnv != "":
		parts = append(parts, "url_env "+s.URLEnv)
	}
	if s.Path != "" {
		parts = append(parts, "path "+s.Path)
	}
	if s.Prefix != "" {
		parts = append(parts, "prefix "+s.Prefix)
	}
	return strings.Join(parts, ", ")
}

// RedactURL names the database a store's server address names, without
// its credentials: a URL's scheme, user name, host, port and path, and of
// its query what chooses the server or the database (a redis ?db=, shown
// as the path; a postgres host, port, dbname or user); of a postgres
// keyword/value string, the same settings ("host=db user=app dbname=app").
// A password, and any other setting (sslkey, sslpassword, a client
// option), is left out. An address it cannot read is "(set in the
// policy)".
func RedactURL(raw string) string {
	if d, ok := storeaddr.Describe(raw); ok {
		return d
	}
	return "(set in the policy)"
}
