package dsl

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"

	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// decode fills p from the validated value v and checks what the schema
// cannot: references to models, tools and entries, stage support, unique
// entry names.
func (l *loader) decode(p *Policy, v cue.Value) {
	p.Models = map[string]*Model{}
	p.Tools = map[string]*Tool{}
	p.Stores = map[string]*Store{}
	p.Chains = map[string][]*Entry{}

	eachField(l.user, v, "models", func(name string, mv cue.Value) {
		m := &Model{Name: name, Pos: l.labelPos("models", name)}
		m.USDPerMTokIn, _ = mv.LookupPath(fieldPath("usd_per_mtok_in")).Float64()
		m.USDPerMTokOut, _ = mv.LookupPath(fieldPath("usd_per_mtok_out")).Float64()
		for _, f := range []string{"usd_per_mtok_in", "usd_per_mtok_out"} {
			m.Priced = m.Priced || l.user.LookupPath(cue.MakePath(cue.Str("models"), cue.Str(name), cue.Str(f))).Exists()
		}
		cachePrices(mv, &m.USDPerMTokCached, &m.USDPerMTokCacheWrite, &m.USDPerMTokCacheWrite1h)
		m.LongContext = l.longContext(name, mv)
		if ct := mv.LookupPath(fieldPath("context_tokens")); ct.Exists() {
			n, _ := ct.Int64()
			m.ContextTokens = int(n)
		}
		for _, f := range []struct {
			name string
			dst  *string
		}{{"provider", &m.Provider}, {"model", &m.ID}, {"api_key_env", &m.APIKeyEnv}, {"base_url", &m.BaseURL}} {
			if fv := mv.LookupPath(cue.MakePath(cue.Str(f.name))); fv.Exists() {
				*f.dst, _ = fv.String()
				if m.FieldPos == nil {
					m.FieldPos = map[string]Pos{}
				}
				m.FieldPos[f.name] = l.userPos([]string{"models", name, f.name})
			}
		}
		if mt := mv.LookupPath(fieldPath("max_tokens")); mt.Exists() {
			n, _ := mt.Int64()
			m.MaxTokens = int(n)
		}
		l.checkPrices(name, mv)
		m.WellTyped = mv.Err() == nil && mv.Validate(cue.Concrete(true)) == nil
		p.Models[name] = m
	})
	eachField(l.user, v, "tools", func(name string, tv cue.Value) {
		t := &Tool{Name: name, Pos: l.labelPos("tools", name)}
		t.SideEffecting, _ = tv.LookupPath(fieldPath("side_effecting")).Bool()
		t.RetrySafe, _ = tv.LookupPath(fieldPath("retry_safe")).Bool()
		t.SideEffectingSet = l.user.LookupPath(fieldPath("tools", name, "side_effecting")).Exists()
		t.RetrySafeSet = l.user.LookupPath(fieldPath("tools", name, "retry_safe")).Exists()
		t.Description, _ = tv.LookupPath(fieldPath("description")).String()
		t.SecretResult, _ = tv.LookupPath(fieldPath("secret_result")).Bool()
		t.URLArgs = stringOrList(tv.LookupPath(fieldPath("url_arg")))
		t.PathArgs = stringOrList(tv.LookupPath(fieldPath("path_arg")))
		if len(t.URLArgs) > 0 {
			t.URLArg = t.URLArgs[0]
		}
		if len(t.PathArgs) > 0 {
			t.PathArg = t.PathArgs[0]
		}
		t.URLArgPos = l.userPos([]string{"tools", name, "url_arg"})
		t.PathArgPos = l.userPos([]string{"tools", name, "path_arg"})
		if av := tv.LookupPath(fieldPath("args")); av.Exists() {
			t.ArgsPos = l.userPos([]string{"tools", name, "args"})
			t.Args = l.jsonSchema([]string{"tools", name, "args"}, av, t.ArgsPos)
			l.checkArgsSchema(t, av.Kind() == cue.StringKind)
		}
		if rv := tv.LookupPath(fieldPath("result_schema")); rv.Exists() {
			t.ResultSchemaPos = l.userPos([]string{"tools", name, "result_schema"})
			t.ResultSchema = l.jsonSchema([]string{"tools", name, "result_schema"}, rv, t.ResultSchemaPos)
			l.checkToolSchema(name, "result_schema", t.ResultSchema, t.ResultSchemaPos, rv.Kind() == cue.StringKind)
		}
		l.checkArgRefs(t)
		p.Tools[name] = t
	})
	eachField(l.user, v, "stores", func(name string, sv cue.Value) {
		s := &Store{Name: name, Pos: l.labelPos("stores", name)}
		s.Kind, _ = sv.LookupPath(fieldPath("kind")).String()
		s.Path, _ = sv.LookupPath(fieldPath("path")).String()
		s.URL, _ = sv.LookupPath(fieldPath("url")).String()
		s.URLEnv, _ = sv.LookupPath(fieldPath("url_env")).String()
		s.Prefix, _ = sv.LookupPath(fieldPath("prefix")).String()
		s.URLPos, s.PrefixPos = s.Pos, s.Pos
		if s.URL != "" {
			s.URLPos = l.userPos([]string{"stores", name, "url"})
		}
		if s.Prefix != "" {
			s.PrefixPos = l.userPos([]string{"stores", name, "prefix"})
		}
		if s.URL != "" && s.URLEnv != "" {
			l.errorf(l.userPos([]string{"stores", name, "url_env"}), "schema/invalid-value",
				"%s: url and url_env are both given, and the store would read only url_env; give one", fieldName([]string{"stores", name}))
		}
		if s.URL != "" && urlHasPassword(s.URL) {
			l.warnf(l.userPos([]string{"stores", name, "url"}), "schema/invalid-value",
				"%s holds a password: the plan agentc build writes carries the url as given (only agentc explain hides it), and so does every log or copy of the plan; put the url in an environment variable and name it with url_env", fieldName([]string{"stores", name, "url"}))
		}
		if t, err := sv.LookupPath(fieldPath("timeout")).String(); err == nil {
			s.Timeout = t
			if d, err := time.ParseDuration(t); err != nil || d <= 0 {
				l.errorf(l.userPos([]string{"stores", name, "timeout"}), "schema/invalid-value",
					"%s: %q is not a positive duration (each operation of the store must be given some time, such as 2s)", fieldName([]string{"stores", name, "timeout"}), t)
			}
		}
		p.Stores[name] = s
	})
	p.Replicas = 1
	if n, err := v.LookupPath(cue.ParsePath("settings.replicas")).Int64(); err == nil {
		p.Replicas = int(n)
	}
	p.AllowUndeclaredTools, _ = v.LookupPath(fieldPath("settings", "allow_undeclared_tools")).Bool()
	if p.AllowUndeclaredTools {
		p.AllowUndeclaredToolsPos = l.userPos([]string{"settings", "allow_undeclared_tools"})
	}
	p.RunIdle, _ = v.LookupPath(fieldPath("settings", "run_idle")).String()
	p.MaxAnswerBytes, _ = v.LookupPath(fieldPath("settings", "max_answer_bytes")).Int64()
	p.DigestKeyEnv, _ = v.LookupPath(fieldPath("settings", "digest_key_env")).String()
	if p.DigestKeyEnv != "" {
		p.DigestKeyEnvPos = l.userPos([]string{"settings", "digest_key_env"})
	}
	l.decodeServe(p, v)
	l.decodeInvariants(p, v)
	l.decodeState(p, v)
	if lim, err := v.LookupPath(fieldPath("settings", "cel_cost_limit")).Uint64(); err == nil {
		p.CELCostLimit = lim
	} else {
		p.CELCostLimit = 1000000
	}
	if av := v.LookupPath(fieldPath("admit")); av.Exists() {
		p.Admit = l.expr([]string{"admit"}, av)
	}
	l.decodeGrounding(p, v)

	for _, stage := range Stages {
		list := l.user.LookupPath(fieldPath("chains", stage))
		if !list.Exists() {
			continue
		}
		it, err := list.List()
		if err != nil {
			continue
		}
		var layers []plan.Layer
		var named []*Entry // the entries of layers, one for one
		for i := 0; it.Next(); i++ {
			ev := v.LookupPath(cue.MakePath(cue.Str("chains"), cue.Str(stage), cue.Index(i)))
			if !ev.Exists() {
				ev = it.Value()
			}
			e := l.decodeEntry(p, stage, i, ev)
			if e == nil {
				continue
			}
			p.Chains[stage] = append(p.Chains[stage], e)
			if e.badName {
				continue // reported by the schema: "" would pass for its use's name
			}
			layer := plan.Layer{Use: e.Use}
			if e.ExplicitName {
				layer.Name = e.Name
			}
			layers = append(layers, layer)
			named = append(named, e)
		}
		// The plan's rule for layer names, so that what vets also loads.
		for _, d := range plan.Duplicates(layers) {
			e, prev := named[d.Index], named[d.First]
			if e.ExplicitName {
				l.errorf(e.NamePos, "schema/invalid-value", "%s.name: entry name %q is already used at %s; names must be unique in a chain", e.Path(), e.Name, where(prev.Pos, e.NamePos))
			} else {
				l.errorf(e.Pos, "schema/invalid-value", "%s: a second unnamed %s entry (the first is at %s): an unnamed entry is named after its use, and names must be unique in a chain; give it a name", e.Path(), e.Use, where(prev.Pos, e.Pos))
			}
		}
	}
	l.checkSharedLimiters(p)

	if cl := l.user.LookupPath(fieldPath("constraints")); cl.Exists() && !l.diags.HasErrors() {
		it, _ := cl.List()
		for i := 0; it.Next(); i++ {
			path := []string{"constraints", fmt.Sprint(i)}
			cv := v.LookupPath(cue.MakePath(cue.Str("constraints"), cue.Index(i)))
			c, diags := decodeConstraint(cv, func(field string) Pos {
				if field == "" {
					return l.userPos(path)
				}
				return l.userPos(append(path, field))
			})
			l.diags = append(l.diags, diags...)
			if c == nil {
				continue
			}
			if c.When != nil {
				c.When = l.expr(append(path, "when"), cv.LookupPath(fieldPath("when")))
			}
			l.checkConstraintRefs(p, c)
			if c.Outer == c.Inner {
				l.errorf(c.InnerPos, "schema/invalid-value", "constraint %s names %q as both outer and inner", c.ID, c.Outer)
			}
			for _, prev := range p.Constraints {
				if prev.ID == c.ID {
					l.errorf(c.Pos, "schema/invalid-value", "constraint id %q is already used at %s; ids name the rule order/<id> and must be unique", c.ID, where(prev.Pos, c.Pos))
				}
			}
			p.Constraints = append(p.Constraints, c)
		}
	}
}

// decodeEntry decodes one chain entry and checks its kind, stage, model and
// tool references.
func (l *loader) decodeEntry(p *Policy, stage string, i int, ev cue.Value) *Entry {
	path := []string{"chains", stage, fmt.Sprint(i)}
	e := &Entry{Stage: stage, Index: i, Value: ev, Pos: l.userPos(path), path: path, ps: l.pos}
	e.Use, _ = ev.LookupPath(fieldPath("use")).String()
	e.UsePos = l.userPos(append(path, "use"))
	e.Kind = l.schema.catalog.Lookup(e.Use)
	if e.Kind == nil {
		return nil // reported by checkUses
	}
	e.Name = e.Use
	if nv := ev.LookupPath(fieldPath("name")); nv.Exists() {
		name, err := nv.String()
		e.Name, e.badName = name, err != nil
		e.ExplicitName = true
		e.NamePos = l.userPos(append(path, "name"))
	} else {
		e.NamePos = e.UsePos
	}
	if !e.Kind.Supports(stage) {
		l.errorf(e.UsePos, "schema/stage", "%s cannot be used in the %s chain; it supports %s", e.Use, stage, strings.Join(e.Kind.Stages, ", "))
	}
	if wv := ev.LookupPath(fieldPath("when")); wv.Exists() {
		e.When = l.expr(append(path, "when"), wv)
	}
	if tv := ev.LookupPath(fieldPath("tools")); tv.Exists() {
		if stage != "tool" {
			l.errorf(l.userPos(append(path, "tools")), "schema/stage", "tools scoping is only for entries of the tool chain")
		}
		if n, err := tv.Len().Int64(); err == nil && n == 0 && stage == "tool" {
			// The runtime scopes an entry only by a non-empty list.
			l.errorf(l.userPos(append(path, "tools")), "schema/invalid-value", "%s: an empty tools list does not scope the entry to no tool: the entry applies to every tool, as without tools; name the tools it is for, or remove the field", fieldName(append(path, "tools")))
		}
		it, _ := tv.List()
		for j := 0; it.Next(); j++ {
			name, _ := it.Value().String()
			pos := l.userPos(append(path, "tools", fmt.Sprint(j)))
			e.Tools = append(e.Tools, name)
			e.ToolsPos = append(e.ToolsPos, pos)
			// Tools an MCP server lists, or undeclared calls the
			// settings let run, may be named too (agentc serve checks
			// an MCP server's names against the tools it serves).
			if _, ok := p.Tools[name]; !ok && len(p.MCPServers) == 0 && !p.AllowUndeclaredTools {
				l.errorf(pos, "schema/bad-reference", "tool %q is not declared in tools%s", name, suggestName(name, keys(p.Tools)))
			}
		}
	}

	// The kind's own fields, defaults applied.
	fields := map[string]any{}
	faulty := map[string]bool{} // written, with a value the schema check reports
	it, _ := ev.Fields(cue.Optional(false))
	for it.Next() {
		sel := it.Selector().String()
		switch sel {
		case "use", "name", "when", "tools":
			continue
		}
		var x any
		fv := it.Value()
		if err := fv.Decode(&x); err != nil {
			// Already reported by the schema check.
			faulty[sel] = true
			continue
		}
		if e.Use == "output_coerce" && sel == "schema" {
			// A JSON Schema given as a file path is read here; either
			// form is checked as a tool's args are, so that a schema
			// the layer cannot compile fails vet, not the build.
			at := slices.Concat(path, []string{sel})
			if fv.Kind() == cue.StringKind {
				if raw := l.jsonSchema(at, fv, l.userPos(at)); raw != nil {
					_ = json.Unmarshal(raw, &x)
					l.checkSchema(at, raw, l.userPos(at), true)
				}
			} else if raw, err := json.Marshal(x); err == nil {
				l.checkSchema(at, raw, l.userPos(at), false)
			}
		}
		fields[sel] = x
	}
	e.Fields = fields
	e.Config, _ = json.Marshal(fields)

	// Model references: an entry's model or models, and the model a security
	// classifier of kind chat asks.
	for _, at := range [][]string{{"models"}, {"model"}, {"classifier", "model"}} {
		mv := ev.LookupPath(fieldPath(at...))
		if !mv.Exists() {
			continue
		}
		check := func(name string, pos Pos) {
			if _, ok := p.Models[name]; !ok {
				l.errorf(pos, "schema/bad-reference", "model %q is not declared in models%s", name, suggestName(name, keys(p.Models)))
			}
		}
		if mv.Kind() == cue.ListKind {
			it, _ := mv.List()
			first := map[string]int{}
			for j := 0; it.Next(); j++ {
				name, _ := it.Value().String()
				pos := l.userPos(slices.Concat(path, at, []string{fmt.Sprint(j)}))
				check(name, pos)
				if i, dup := first[name]; dup && e.Use == "fallback" {
					// A model fallback falls over from is failing or
					// behind an open breaker: a second mention is a typo
					// for another model. (hedge may race one model twice.)
					l.errorf(pos, "schema/invalid-value", "%s: model %q is already listed at index %d: fallback falls over to the next model when one fails, so name each once (a retry inside fallback tries a model again)", fieldName(slices.Concat(path, at)), name, i)
				} else if !dup {
					first[name] = j
				}
			}
		} else if name, err := mv.String(); err == nil {
			check(name, l.userPos(slices.Concat(path, at)))
		}
	}
	// Store references.
	for _, field := range []string{"store", "sink", "index"} {
		sv := ev.LookupPath(fieldPath(field))
		if name, err := sv.String(); err == nil {
			if _, ok := p.Stores[name]; !ok && name != "default" {
				l.errorf(l.userPos(append(path, field)), "schema/bad-reference", "store %q is not declared in stores%s", name, suggestName(name, keys(p.Stores)))
			}
		}
	}
	l.checkRegexps(e, path)
	if e.Use == "meter" && stage == "tool" {
		// A tool-chain meter counts tool calls; tokens and dollars are
		// spent by model calls, on the chat chain's ledger.
		if b, ok := fields["budget"].(map[string]any); ok {
			for _, k := range []string{"tokens", "usd"} {
				if _, set := b[k]; set {
					l.errorf(l.userPos(append(append([]string{}, path...), "budget", k)), "schema/invalid-value",
						"budget.%s: a meter in the tool chain counts tool calls only; %s ceilings belong on the chat chain's meter", k, k)
				}
			}
		}
	}
	if e.Use == "output_coerce" && stage == "tool" && fields["partial"] == true {
		// A tool result arrives whole: there is nothing to stream.
		l.errorf(l.userPos(append(append([]string{}, path...), "partial")), "schema/invalid-value",
			"partial streams a model's output while it is parsed; it applies to the chat chain only")
	}
	if _, ok := fields["schema"]; e.Use == "output_coerce" && stage == "chat" && !ok {
		// Model output has no declared schema to fall back on, as a
		// tool's result_schema is in the tool chain: the pipeline
		// refuses to build without it.
		l.errorf(e.Pos, "schema/missing-field",
			"%s in the chat chain needs schema: the JSON Schema the model's output must match (only the tool chain's output_coerce falls back on the tools' result_schema)", e.Ref())
	}
	if e.Use == "tool_policy" {
		l.checkToolPolicyNames(p, e, path)
	}
	if e.Use == "idempotent" && stage == "tool" {
		l.checkKeyArgs(p, e, path)
	}
	if e.Use == "compaction" {
		// keep_recent messages are always kept, so a max_messages below it
		// can never hold once the transcript is longer.
		maxMsgs, errMax := ev.LookupPath(fieldPath("max_messages")).Int64()
		keep, errKeep := ev.LookupPath(fieldPath("keep_recent")).Int64()
		if errMax == nil && errKeep == nil && keep > maxMsgs {
			def := ""
			if !l.user.LookupPath(cue.MakePath(cue.Str("chains"), cue.Str(stage), cue.Index(i), cue.Str("keep_recent"))).Exists() {
				def = " (its default)"
			}
			l.errorf(l.userPos(append(append([]string{}, path...), "max_messages")), "schema/invalid-value",
				"max_messages %d is below keep_recent %d%s: the %d most recent messages are always kept, so a longer transcript keeps more than %d; lower keep_recent or raise max_messages",
				maxMsgs, keep, def, keep, maxMsgs)
		}
	}
	if e.Use == "retry" {
		// One attempt never runs the call again; the layer still does
		// something with a breaker, an attempt_timeout or an idle_timeout.
		_, breaker := fields["breaker"]
		_, timeout := fields["attempt_timeout"]
		if _, idle := fields["idle_timeout"]; idle {
			timeout = true
		}
		if n, err := ev.LookupPath(fieldPath("max_attempts")).Int64(); err == nil && n == 1 && !breaker && !timeout {
			l.warnf(l.userPos(append(append([]string{}, path...), "max_attempts")), "schema/invalid-value",
				"%s: max_attempts 1 counts the first attempt, so %s never retries a call; raise max_attempts (3 is the default) or remove the layer",
				fieldName(append(append([]string{}, path...), "max_attempts")), e.Ref())
		}
	}
	if e.Use == "rate_limit" {
		l.checkRateSpacing(ev, stage, path)
	}
	if e.Use == "guard" {
		_, hasDeny := fields["deny"]
		_, hasReq := fields["require"]
		// One of the wrong type is there all the same, and reported as such.
		hasDeny, hasReq = hasDeny || faulty["deny"], hasReq || faulty["require"]
		switch {
		case hasDeny && hasReq:
			l.errorf(e.Pos, "schema/invalid-value", "guard %s sets both deny and require; give exactly one", e.Name)
		case !hasDeny && !hasReq:
			l.errorf(e.Pos, "schema/missing-field", "guard %s needs deny or require", e.Name)
		}
	}
	return e
}

// checkToolPolicyNames reports a tool_policy allow or deny entry naming a
// tool the policy does not declare, when only declared tools can be
// called: such a call is refused on entry to the tool chain anyway, so the
// name is a typo, and a misspelt deny lets the tool it meant run.
func (l *loader) checkToolPolicyNames(p *Policy, e *Entry, path []string) {
	if len(p.Tools) == 0 || len(p.MCPServers) > 0 || p.AllowUndeclaredTools {
		// Tools the host, an MCP server or an undeclared call brings may
		// be named too.
		return
	}
	for _, field := range []string{"allow", "deny"} {
		list, _ := e.Fields[field].([]any)
		for j, x := range list {
			name, _ := x.(string)
			if _, ok := p.Tools[name]; ok || name == "" {
				continue
			}
			effect := "a call of it is refused on entry to the tool chain anyway"
			if field == "deny" {
				effect = "the entry denies nothing"
			}
			l.errorf(l.userPos(append(append([]string{}, path...), field, fmt.Sprint(j))), "schema/bad-reference",
				"tool_policy %s names tool %q, which is not declared in tools (%s)%s", field, name, effect, suggestName(name, keys(p.Tools)))
		}
	}
}

// checkKeyArgs reports an idempotent key_args entry naming an argument that
// a side-effecting tool the layer applies to cannot carry: its args schema
// is closed (additionalProperties false) and has no such property. A call
// lacking a key argument is refused, so no call of the tool would run. An
// open schema lets a call carry it: vet warns then (guard/inert).
func (l *loader) checkKeyArgs(p *Policy, e *Entry, path []string) {
	tools := e.Tools
	if len(tools) == 0 {
		tools = keys(p.Tools)
	}
	keyArgs, _ := e.Fields["key_args"].([]any)
	for j, x := range keyArgs {
		arg, _ := x.(string)
		for _, name := range tools {
			t := p.Tools[name]
			if arg == "" || t == nil || !t.SideEffecting {
				continue
			}
			if args, closed := t.ClosedArgNames(); closed && !slices.Contains(args, arg) {
				l.errorf(l.userPos(append(append([]string{}, path...), "key_args", fmt.Sprint(j))), "schema/bad-reference",
					"%s key_args[%d] names argument %q, which side-effecting tool `%s` does not declare, and its args schema allows no other (additionalProperties: false): a call lacking a key argument is refused, so no call of it would run%s",
					e.Ref(), j, arg, name, suggestName(arg, args))
			}
		}
	}
}

// checkSharedLimiters reports a rate_limit layer that shares a limiter with
// an earlier one (chat, tool, turn, outermost first, as the pipeline reads
// them) but sets another rate, per, burst, scope or store: the pipeline
// refuses to build such a policy.
func (l *loader) checkSharedLimiters(p *Policy) {
	type shape struct {
		e                    *Entry
		rate, burst          int64
		per                  time.Duration
		scope, store, perSrc string
	}
	first := map[string]shape{}
	for _, stage := range Stages {
		for _, e := range p.Chains[stage] {
			if e.Use != "rate_limit" {
				continue
			}
			name, err := e.Value.LookupPath(fieldPath("limiter")).String()
			if err != nil {
				continue
			}
			var s shape
			var errs [5]error
			s.e = e
			s.rate, errs[0] = e.Value.LookupPath(fieldPath("rate")).Int64()
			s.burst, errs[1] = e.Value.LookupPath(fieldPath("burst")).Int64()
			s.perSrc, errs[2] = e.Value.LookupPath(fieldPath("per")).String()
			s.scope, errs[3] = e.Value.LookupPath(fieldPath("scope")).String()
			if sv := e.Value.LookupPath(fieldPath("store")); sv.Exists() {
				s.store, errs[4] = sv.String()
			}
			if errs[2] == nil {
				s.per, errs[2] = time.ParseDuration(s.perSrc)
			}
			if errors.Join(errs[:]...) != nil {
				continue // reported by the schema check
			}
			ref, ok := first[name]
			if !ok {
				first[name] = s
				continue
			}
			var field, theirs string
			switch {
			case s.rate != ref.rate:
				field, theirs = "rate", fmt.Sprint(ref.rate)
			case s.per != ref.per:
				field, theirs = "per", strconv.Quote(ref.perSrc)
			case s.burst != ref.burst:
				field, theirs = "burst", fmt.Sprint(ref.burst)
			case s.scope != ref.scope:
				field, theirs = "scope", strconv.Quote(ref.scope)
			case s.store != ref.store:
				field, theirs = "store", strconv.Quote(ref.store)
			default:
				continue
			}
			pos := e.FieldPos(field)
			if pos == e.Pos {
				pos = e.FieldPos("limiter") // a default differs
			}
			l.errorf(pos, "schema/invalid-value",
				"%s shares limiter %q with %s of the %s chain (at %s), which sets %s %s; every layer of a shared limiter must set the same rate, per, burst, scope and store",
				e.Ref(), name, ref.e.Ref(), ref.e.Stage, where(ref.e.FieldPos(field), pos), field, theirs)
		}
	}
}

// where names position p for a message about position from: "line 7" in
// the same file, else "file.cue:7".
func where(p, from Pos) string {
	if p.File == from.File {
		if p.Line == from.Line {
			return fmt.Sprintf("column %d", p.Col)
		}
		return fmt.Sprintf("line %d", p.Line)
	}
	return fmt.Sprintf("%s:%d", filepath.Base(p.File), p.Line)
}

// checkConstraintRefs reports a constraint whose outer or inner names
// neither a known kind nor an entry name, and resolves the kinds each can
// designate.
func (l *loader) checkConstraintRefs(p *Policy, c *Constraint) {
	c.OuterKinds = designatedKinds(l.schema.catalog, p, c, c.Outer)
	c.InnerKinds = designatedKinds(l.schema.catalog, p, c, c.Inner)
	known := map[string]bool{}
	for _, id := range l.schema.catalog.IDs() {
		known[id] = true
	}
	var names []string
	for _, es := range p.Chains {
		for _, e := range es {
			known[e.Name] = true
			names = append(names, e.Name)
		}
	}
	for _, ref := range []struct {
		name string
		pos  Pos
	}{{c.Outer, c.OuterPos}, {c.Inner, c.InnerPos}} {
		if !known[ref.name] {
			all := append(names, l.schema.catalog.IDs()...)
			l.errorf(ref.pos, "schema/bad-reference", "constraint %s names %q, which is neither a middleware nor an entry name%s", c.ID, ref.name, suggestName(ref.name, all))
			continue
		}
		if c.Stage == "" {
			continue
		}
		// In its stage the name must designate something: a builtin the
		// chain may hold, or one of its entries.
		k := l.schema.catalog.Lookup(ref.name)
		if k != nil && k.Supports(c.Stage) || slices.ContainsFunc(p.Chains[c.Stage], func(e *Entry) bool { return e.Name == ref.name }) {
			continue
		}
		why := fmt.Sprintf("no entry of the %s chain is named %q", c.Stage, ref.name)
		if k != nil {
			why = fmt.Sprintf("%s cannot be used in the %s chain (it supports %s) and %s", ref.name, c.Stage, strings.Join(k.Stages, ", "), why)
		}
		l.errorf(ref.pos, "schema/stage", "constraint %s is for the %s chain, but %s: the constraint never applies", c.ID, c.Stage, why)
	}
}

// designatedKinds returns the kinds of the entries a constraint's outer or
// inner name designates: the kind with that id and the kinds of the
// entries of the constraint's stage (every stage when it names none) with
// that name.
func designatedKinds(cat *Catalog, p *Policy, c *Constraint, name string) []*Kind {
	var out []*Kind
	if k := cat.Lookup(name); k != nil {
		out = append(out, k)
	}
	for _, stage := range Stages {
		if c.Stage != "" && c.Stage != stage {
			continue
		}
		for _, e := range p.Chains[stage] {
			if e.Name == name && e.Kind != nil && !slices.Contains(out, e.Kind) {
				out = append(out, e.Kind)
			}
		}
	}
	return out
}

// decodeConstraint decodes a constraint value. pos returns the position of a
// field ("" for the constraint itself); it may be nil.
func decodeConstraint(v cue.Value, pos func(string) Pos) (*Constraint, Diagnostics) {
	if pos == nil {
		pos = func(string) Pos { return posOf(v) }
	}
	var raw struct {
		ID       string `json:"id"`
		Stage    string `json:"stage"`
		Outer    string `json:"outer"`
		Inner    string `json:"inner"`
		When     string `json:"when"`
		Severity string `json:"severity"`
		Why      string `json:"why"`
	}
	if err := v.Decode(&raw); err != nil {
		return nil, Diagnostics{Errorf(pos(""), "schema/invalid-value", "constraint: %v", err)}
	}
	c := &Constraint{ID: raw.ID, Stage: raw.Stage, Outer: raw.Outer, Inner: raw.Inner, Severity: Severity(raw.Severity), Why: raw.Why,
		Pos: pos(""), OuterPos: pos("outer"), InnerPos: pos("inner")}
	if c.Severity == "" {
		c.Severity = Error
	}
	if raw.When != "" {
		c.When = exprOf(v.LookupPath(fieldPath("when")))
	}
	return c, nil
}

// expr returns the CEL expression at path, positioned in the user's file.
func (l *loader) expr(path []string, v cue.Value) *Expr {
	e := exprOf(v)
	if e == nil {
		return nil
	}
	if lit, ok := l.pos.node[strings.Join(path, ".")].(*ast.BasicLit); ok {
		e.lit = lit.Value
		e.Pos = cuePos(lit.Pos(), Pos{})
		return e
	}
	if !e.Pos.IsValid() || !l.isUserFile(e.Pos.File) {
		e.Pos = l.userPos(path)
		e.lit = ""
	}
	return e
}

// userPos returns the position of the value at path in the user's files,
// or of its closest existing ancestor.
func (l *loader) userPos(path []string) Pos {
	if p, ok := l.pos.lookup(path, false); ok {
		return p
	}
	return Pos{File: l.files[0], Line: 1, Col: 1}
}

// labelPos returns the position of a struct field's label.
func (l *loader) labelPos(parent, name string) Pos {
	if p, ok := l.pos.lookup([]string{parent, name}, true); ok {
		return p
	}
	return l.userPos([]string{parent})
}

// jsonSyntaxProblem says where in data the fault err found is, and what it
// is: the offending byte, or the end of a file cut short; off is its
// offset (0 where err does not say).
func jsonSyntaxProblem(data []byte, err error) (off int64, problem string) {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return 0, ": " + err.Error()
	}
	if se.Offset >= int64(len(data)) {
		line, col := jsonwalk.Position(data, int64(len(data)))
		return int64(len(data)), fmt.Sprintf(" at line %d, column %d: the file ends before the value does (truncated?)", line, col)
	}
	// Offset counts the offending byte.
	line, col := jsonwalk.Position(data, se.Offset-1)
	return se.Offset - 1, fmt.Sprintf(" at line %d, column %d: %v", line, col, se)
}

// jsonSchema returns a JSON Schema given as CUE data at path, or read from
// the JSON file a string names (relative to the policy directory).
func (l *loader) jsonSchema(path []string, v cue.Value, pos Pos) json.RawMessage {
	if v.Kind() == cue.StringKind {
		rel, _ := v.String()
		b := l.readSchemaJSON(path, rel, pos)
		if b == nil {
			return nil
		}
		var x any
		_ = json.Unmarshal(b, &x)
		out, _ := json.Marshal(x)
		return out
	}
	b, err := v.MarshalJSON()
	if err != nil {
		// The schema check has reported why (args must be a struct or
		// a file path).
		if !l.diags.HasErrors() {
			l.errorf(pos, "schema/invalid-value", "JSON Schema: %v", err)
		}
		return nil
	}
	return b
}

// MaxSchemaFileSize is the largest JSON Schema file a policy may name.
const MaxSchemaFileSize = 1 << 20

// readSchemaFile reads a JSON Schema file named by a policy: a regular file
// of at most MaxSchemaFileSize bytes, under the policy directory (a local
// path that no symbolic link leads out of).
func (l *loader) readSchemaFile(rel string) ([]byte, error) {
	if !filepath.IsLocal(rel) {
		return nil, errors.New("the path must be relative and inside the policy directory")
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return nil, errors.New(readErrorText(err))
	}
	defer root.Close()
	b, err := ReadFileIn(root, rel, MaxSchemaFileSize)
	if err != nil {
		var big *TooLargeError
		switch {
		case errors.As(err, &big):
			return nil, fmt.Errorf("%v for a JSON Schema file", big)
		case strings.Contains(err.Error(), "path escapes from parent"):
			return nil, errors.New("the path leads out of the policy directory")
		}
		return nil, errors.New(readErrorText(err))
	}
	return b, nil
}

// eachField calls f for each field the user wrote under parent, with the
// field's value in v (the unified value, defaults applied).
func eachField(user, v cue.Value, parent string, f func(name string, v cue.Value)) {
	uv := user.LookupPath(cue.MakePath(cue.Str(parent)))
	if !uv.Exists() {
		return
	}
	it, err := uv.Fields()
	if err != nil {
		return
	}
	for it.Next() {
		sel := it.Selector()
		fv := v.LookupPath(cue.MakePath(cue.Str(parent), sel))
		if !fv.Exists() {
			fv = it.Value()
		}
		f(sel.Unquoted(), fv)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// suggestName returns "; did you mean X?" for the closest candidate.
func suggestName(name string, candidates []string) string {
	if best := textdist.Closest(name, candidates); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// SuggestName returns "; did you mean X?" naming the candidate closest to
// name, or "" when none is close.
func SuggestName(name string, candidates []string) string { return suggestName(name, candidates) }

// spacingWarn is the interval between calls (per/rate) above which a
// rate_limit whose burst is below its rate is warned about: such a layer
// is most often written as a quota (1000 per 720h), and spaces calls that
// far apart instead.
const spacingWarn = time.Minute

// checkRateSpacing warns at a rate_limit's rate when it lets one call
// through every per/rate, over spacingWarn, and its burst is below its
// rate: once the burst is spent each call waits (mode "wait") or is
// refused until its turn, however few calls came in the period.
func (l *loader) checkRateSpacing(ev cue.Value, stage string, path []string) {
	rate, errRate := ev.LookupPath(fieldPath("rate")).Int64()
	burst, errBurst := ev.LookupPath(fieldPath("burst")).Int64()
	perSrc, errPer := ev.LookupPath(fieldPath("per")).String()
	if errRate != nil || errBurst != nil || errPer != nil || rate < 1 || burst >= rate {
		return
	}
	per, err := time.ParseDuration(perSrc)
	if err != nil || per <= 0 {
		return
	}
	spacing := (per + time.Duration(rate) - 1) / time.Duration(rate)
	if spacing <= spacingWarn {
		return
	}
	meter := ""
	if stage == "chat" || stage == "tool" {
		meter = fmt.Sprintf(", or a meter with budget: calls: %d and window: %q", rate, perSrc)
	}
	every := spacing.Round(time.Second)
	l.warnf(l.userPos(append(append([]string{}, path...), "rate")), "schema/invalid-value",
		"%s: %d per %q with burst %d lets one call through every %s once the burst is spent, however few calls came in the period: mode \"wait\" holds a call up to %s, \"reject\" and \"block\" refuse it; for a quota of %d calls per %q set burst: %d%s; for one call every %s write rate: 1, per: %q",
		fieldName(path), rate, perSrc, burst, every, every, rate, perSrc, rate, meter, every, every.String())
}

// fieldPath is the CUE path of regular fields, built without running the
// CUE parser as cue.ParsePath does.
func fieldPath(names ...string) cue.Path {
	sels := make([]cue.Selector, len(names))
	for i, n := range names {
		sels[i] = cue.Str(n)
	}
	return cue.MakePath(sels...)
}

// stringOrList returns a field given as a string or a list of strings as a
// list (nil when absent).
func stringOrList(v cue.Value) []string {
	if !v.Exists() {
		return nil
	}
	if s, err := v.String(); err == nil {
		return []string{s}
	}
	var out []string
	it, err := v.List()
	if err != nil {
		return nil
	}
	for it.Next() {
		if s, err := it.Value().String(); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// perTokenPrice is the price per million tokens below which a model's price
// is taken for a price per token: real prices per million tokens run from
// about 0.01 to a few hundred dollars.
const perTokenPrice = 0.001

// cachePrices reads the optional cache prices of a model or of its
// long-context tier, v.
func cachePrices(v cue.Value, cached, write, write1h **float64) {
	for _, f := range []struct {
		name string
		dst  **float64
	}{{"usd_per_mtok_cached", cached}, {"usd_per_mtok_cache_write", write}, {"usd_per_mtok_cache_write_1h", write1h}} {
		if cv := v.LookupPath(fieldPath(f.name)); cv.Exists() {
			if v, err := cv.Float64(); err == nil {
				*f.dst = &v
			}
		}
	}
}

// longContext reads the long-context tier of the model name (mv), nil
// when it declares none or the tier is not well formed (the schema
// reports it). It warns about an input or output price of the tier below
// the model's own (a premium tier counted below a short call's price),
// and about a cache price the model declares and the tier does not: above
// the threshold those tokens would be priced at the tier's input price,
// below what the provider bills for a write.
func (l *loader) longContext(name string, mv cue.Value) *plan.LongContext {
	tv := mv.LookupPath(fieldPath("long_context"))
	if !tv.Exists() {
		return nil
	}
	t := &plan.LongContext{}
	var err error
	if t.AboveInputTokens, err = tv.LookupPath(fieldPath("above_input_tokens")).Int64(); err != nil {
		return nil
	}
	if t.USDPerMTokIn, err = tv.LookupPath(fieldPath("usd_per_mtok_in")).Float64(); err != nil {
		return nil
	}
	if t.USDPerMTokOut, err = tv.LookupPath(fieldPath("usd_per_mtok_out")).Float64(); err != nil {
		return nil
	}
	cachePrices(tv, &t.USDPerMTokCached, &t.USDPerMTokCacheWrite, &t.USDPerMTokCacheWrite1h)
	for _, f := range []struct {
		name string
		tier float64
	}{{"usd_per_mtok_in", t.USDPerMTokIn}, {"usd_per_mtok_out", t.USDPerMTokOut}} {
		own, err := mv.LookupPath(fieldPath(f.name)).Float64()
		if err != nil || f.tier >= own || f.tier > 0 && f.tier < perTokenPrice { // a price per token: checkPrices says so
			continue
		}
		at := []string{"models", name, "long_context", f.name}
		l.warnf(l.userPos(at), "schema/invalid-value",
			"%s: %s is below the model's own %s: a call above %d input tokens would be counted below what a shorter one costs and below the provider's bill, which is a premium above the threshold; give the tier's price (the two prices swapped?)",
			fieldName(at), strconv.FormatFloat(f.tier, 'f', -1, 64), strconv.FormatFloat(own, 'f', -1, 64), t.AboveInputTokens)
	}
	for _, f := range []string{"usd_per_mtok_cached", "usd_per_mtok_cache_write", "usd_per_mtok_cache_write_1h"} {
		if mv.LookupPath(fieldPath(f)).Exists() && !tv.LookupPath(fieldPath(f)).Exists() {
			l.warnf(l.userPos([]string{"models", name, "long_context"}), "schema/invalid-value",
				"%s gives no %s, which the model gives: a call above %d input tokens has those tokens priced at the tier's usd_per_mtok_in, not at a long-context price of their own; give the tier its %s",
				fieldName([]string{"models", name, "long_context"}), f, t.AboveInputTokens, f)
		}
	}
	return t
}

// checkPrices warns about a usd_per_mtok_* price of a model that is so small
// it is a price per token written into a field per million tokens: the
// meter would count a millionth of the spend and a budget would never stop
// anything.
func (l *loader) checkPrices(model string, mv cue.Value) {
	l.checkPricesAt([]string{"models", model}, mv)
	if tv := mv.LookupPath(fieldPath("long_context")); tv.Exists() {
		l.checkPricesAt([]string{"models", model, "long_context"}, tv)
	}
}

// checkPricesAt is checkPrices for the prices of v, written at path.
func (l *loader) checkPricesAt(path []string, v cue.Value) {
	it, err := v.Fields()
	if err != nil {
		return
	}
	for it.Next() {
		field := it.Selector().String()
		if !strings.HasPrefix(field, "usd_per_mtok_") {
			continue
		}
		f, err := it.Value().Float64()
		if err != nil || f <= 0 || f >= perTokenPrice {
			continue
		}
		at := append(slices.Clip(path), field)
		l.warnf(l.userPos(at), "schema/invalid-value",
			"%s: %s is a price per token, but the field is the price of one million tokens, so the meter counts a millionth of the spend: did you mean %s (per million)?",
			fieldName(at), strconv.FormatFloat(f, 'f', -1, 64), strconv.FormatFloat(f*1e6, 'g', 6, 64))
	}
}

// urlHasPassword reports whether a server URL (or a postgres key=value
// connection string) carries a password.
func urlHasPassword(raw string) bool {
	if dsnPassword().MatchString(raw) {
		return true
	}
	u, err := url.Parse(raw)
	if err != nil {
		return urlUserinfoPassword().MatchString(raw)
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return true
	}
	return u.Query().Get("password") != ""
}

// dsnPassword matches the password of a key=value connection string
// ("host=db user=app password=secret").
var dsnPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|\s)password\s*=\s*[^\s']|(^|\s)password\s*=\s*'[^']`)
})

// urlUserinfoPassword matches user:password@ in a URL url.Parse refuses.
var urlUserinfoPassword = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:[^@]+@`) })
