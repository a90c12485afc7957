package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

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
}

// Name returns the layer's name (its use when unnamed).
func (s StateSite) Name() string { return layerName(s.Layer) }

// SideEffectingTools returns the declared side-effecting tools the layer
// applies to (its tools, when scoped), sorted.
func (s StateSite) SideEffectingTools() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.Plan.Tools)) {
		if s.Plan.Tools[name].SideEffecting && (len(s.Layer.Tools) == 0 || slices.Contains(s.Layer.Tools, name)) {
			out = append(out, name)
		}
	}
	return out
}

// SampleRun is the run of the sample calls whose keys StateKeys returns.
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
	// Repeats marks records of calls that ran: losing them runs a
	// repeated call again.
	Repeats bool
}

// StateChange is the state a new version of a policy leaves behind: a layer
// of both versions that keys its state under another key (or in another
// store) now, so that the state kept before is not found and starts afresh.
type StateChange struct {
	Stage plan.Stage
	// Layer is the layer's name in the new version, Use its kind and Pos
	// its position.
	Layer, Use, Pos string
	// Fields are what changed, as written in the new version: the layer's
	// config fields ("key_args", "scope", "store"), "name", or
	// "stores.NAME" for the declaration of the store it names.
	Fields []string
	// Was and Now are the values of Fields before and after, as JSON.
	Was, Now []string
	// Tool is the tool whose records start afresh ("" for every call).
	Tool string
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
	if c.Layer != c.Use {
		ref += " (" + c.Use + ")"
	}
	return fmt.Sprintf("%s keys its state differently from the baseline (%s): its %s, kept %s, start afresh: %s",
		ref, strings.Join(changed, ", "), c.What, c.Where, c.Then)
}

// StateChanges compares the state keys of the layers of two versions of a
// policy, sharing their stores (a reload, a rollout), and returns the state
// old kept that next leaves behind. A layer is compared with the layer of
// the same chain and kind that has its name, else with the only one of its
// kind in both versions of the chain; a layer removed or added is not a
// change of state. Layers whose middleware is not registered, or whose
// config does not decode, are skipped.
func StateChanges(old, next *plan.Plan) []StateChange {
	var out []StateChange
	for _, stage := range []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn} {
		olds, news := old.Chains.Of(stage), next.Chains.Of(stage)
		for _, pair := range pairLayers(olds, news) {
			out = append(out, layerStateChanges(
				StateSite{Plan: old, Stage: stage, Layer: olds[pair[0]]},
				StateSite{Plan: next, Stage: stage, Layer: news[pair[1]]})...)
		}
	}
	return out
}

// pairLayers pairs the layers of two versions of a chain: by kind and name,
// then the only unpaired layer of a kind on both sides.
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
		if len(o) == 1 && len(nn) == 1 {
			pairs = append(pairs, [2]int{o[0], j})
			usedOld[o[0]], usedNew[j] = true, true
		}
	}
	return pairs
}

// identified is a state key with its store's identity.
type identified struct {
	StateKey
	id string
}

// keysAt returns the state keys of the layer at s, each with its store's
// identity; ok is false when the layer keeps no state or cannot be decoded.
func keysAt(s StateSite) (keys map[string]identified, ok bool) {
	ks, ok := layerStateKeys(s)
	if !ok {
		return nil, false
	}
	keys = map[string]identified{}
	for _, k := range ks {
		keys[k.Tool] = identified{StateKey: k, id: storeIdentity(s.Plan, k.Store)}
	}
	return keys, true
}

// LayerStateKeys returns the state keys of the layer at s, decoded as Build
// decodes it (nil for a layer that keeps no state, is not registered or
// does not decode).
func LayerStateKeys(s StateSite) []StateKey {
	ks, _ := layerStateKeys(s)
	return ks
}

func layerStateKeys(s StateSite) ([]StateKey, bool) {
	m, found := LookupModule(s.Layer.Use)
	if !found {
		return nil, false
	}
	inst := m.New()
	sk, isKeyer := inst.(StateKeyer)
	if !isKeyer || decodeConfig(inst, s.Layer.Config) != nil {
		return nil, false
	}
	return sk.StateKeys(s), true
}

// layerStateChanges compares one layer's keys in two versions.
func layerStateChanges(old, next StateSite) []StateChange {
	was, ok := keysAt(old)
	if !ok {
		return nil
	}
	now, ok := keysAt(next)
	if !ok {
		return nil
	}
	var out []StateChange
	for _, tool := range slices.Sorted(maps.Keys(now)) {
		w, both := was[tool]
		n := now[tool]
		if !both || (w.id == n.id && w.Key == n.Key) {
			continue
		}
		c := StateChange{Stage: next.Stage, Layer: next.Name(), Use: next.Layer.Use, Pos: next.Layer.Pos,
			Tool: tool, What: n.What, Then: n.Then, Repeats: w.Repeats, Where: describeStore(old.Plan, w.Store)}
		c.Fields, c.Was, c.Now = changedFields(old, next, tool, w)
		out = append(out, c)
	}
	return out
}

// changedFields returns the fields whose change moves the key of tool
// away from w: each field that differs between the versions and whose old
// value, put back alone into the new layer, brings back w's key or store.
// A store whose name stays while its declaration changes is "stores.NAME".
func changedFields(old, next StateSite, tool string, w identified) (fields, was, now []string) {
	oldCfg, newCfg := configFields(old.Layer), configFields(next.Layer)
	oldCfg["name"], _ = json.Marshal(old.Name())
	newCfg["name"], _ = json.Marshal(next.Name())
	n, _ := keysAt(next)
	for _, f := range slices.Sorted(maps.Keys(unionKeys(oldCfg, newCfg))) {
		if bytes.Equal(oldCfg[f], newCfg[f]) {
			continue
		}
		h := next
		h.Layer = withField(next.Layer, f, oldCfg[f])
		hk, ok := keysAt(h)
		if !ok {
			continue
		}
		if k := hk[tool]; k.Key != n[tool].Key || k.id != n[tool].id {
			fields, was, now = append(fields, f), append(was, jsonOr(oldCfg[f])), append(now, jsonOr(newCfg[f]))
		}
	}
	if nk := n[tool]; nk.Store == w.Store && nk.id != w.id {
		fields = append(fields, "stores."+StoreName(w.Store))
		was, now = append(was, storeAttrs(old.Plan.Stores[w.Store])), append(now, storeAttrs(next.Plan.Stores[nk.Store]))
	}
	return fields, was, now
}

func unionKeys(a, b map[string]json.RawMessage) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func jsonOr(b json.RawMessage) string {
	if len(b) == 0 {
		return "unset"
	}
	return string(b)
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
// "name" is the layer's name).
func withField(l plan.Layer, f string, v json.RawMessage) plan.Layer {
	if f == "name" {
		_ = json.Unmarshal(v, &l.Name)
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
	url := s.URL
	if url == "" {
		url = "$" + s.URLEnv
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

// RedactURL keeps a server URL's scheme, host and path, dropping the user,
// password and query (which may hold a password).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(set in the policy)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
