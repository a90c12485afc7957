package dsl

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// Policy is a loaded policy: the decoded model with a position for every node
// that a diagnostic can blame.
type Policy struct {
	// Package is the CUE package name.
	Package string
	// Dir is the directory the policy files are in.
	Dir string
	// Files are the policy files, as given or found.
	Files []string
	// Models, Tools and Stores by name.
	Models map[string]*Model
	Tools  map[string]*Tool
	Stores map[string]*Store
	// Chains holds the entries of each stage ("chat", "tool", "turn"),
	// outermost first.
	Chains map[string][]*Entry
	// Admit is the grounding admission predicate, or nil.
	Admit *Expr
	// Grounding is the grounding section, or nil.
	Grounding *Grounding
	// Constraints are the policy's own ordering constraints.
	Constraints []*Constraint
	// CELCostLimit bounds the estimated cost of every predicate.
	CELCostLimit uint64
	// Replicas is settings.replicas: how many processes serve the policy
	// at once (1 when unset).
	Replicas int
	// AllowUndeclaredTools is settings.allow_undeclared_tools, and
	// AllowUndeclaredToolsPos the position of its value.
	AllowUndeclaredTools    bool
	AllowUndeclaredToolsPos Pos
	// RunIdle is settings.run_idle as written ("24h" by default).
	RunIdle string
	// MaxAnswerBytes is settings.max_answer_bytes.
	MaxAnswerBytes int64
	// DigestKeyEnv is settings.digest_key_env, DigestKeyEnvPos the
	// position of its value (when set).
	DigestKeyEnv    string
	DigestKeyEnvPos Pos
	// Keys are the virtual API keys and MCPServers the upstream MCP
	// servers of `agentc serve`, by name; KeysPos is where keys is
	// written (invalid without keys).
	Keys       map[string]*Key
	KeysPos    Pos
	MCPServers map[string]*MCPServer
	// Invariants is the invariants section (nil when absent).
	Invariants *Invariants
	// State is the state section (nil when absent).
	State *State
	// Value is the policy unified with #Policy.
	Value cue.Value

	ps *positions
}

// Holds reports whether p falls within one of the places the policy's
// files write the field at path (models, primary): from its label to the
// end of its value. It is false for a field not written, or written only
// through a reference.
func (p *Policy) Holds(at Pos, path ...string) bool {
	if p.ps == nil {
		return false
	}
	return p.ps.holds(pathKey(path), at)
}

// Writes reports whether the policy's files write the field at path
// (chains, chat, 2 for the third entry of the chat chain).
func (p *Policy) Writes(path ...string) bool {
	if p.ps == nil {
		return false
	}
	return len(p.ps.spansOf(pathKey(path))) > 0
}

// PosOf returns where the policy's files write the value at path (chains,
// tool), else its closest written ancestor, else the start of the first
// file; the zero Pos for a policy without files.
func (p *Policy) PosOf(path ...string) Pos {
	if p.ps != nil {
		if at, ok := p.ps.lookup(path, false); ok {
			return at
		}
	}
	if len(p.Files) > 0 {
		return Pos{File: p.Files[0], Line: 1, Col: 1}
	}
	return Pos{}
}

// pathKey is the key positions index path by: its labels joined with dots,
// a label holding a dot quoted.
func pathKey(path []string) string {
	steps := make([]string, len(path))
	for i, s := range path {
		steps[i] = s
		if strings.Contains(s, ".") {
			steps[i] = strconv.Quote(s)
		}
	}
	return strings.Join(steps, ".")
}

// Stages lists the chain stages in order.
var Stages = []string{"chat", "tool", "turn"}

// Model is a declared model.
type Model struct {
	Name          string
	Pos           Pos
	USDPerMTokIn  float64
	USDPerMTokOut float64
	// Priced is set when the policy writes usd_per_mtok_in or
	// usd_per_mtok_out (0 included: a model declared free); without
	// either, the model's calls cost nothing because no price was given.
	Priced bool
	// USDPerMTokCached prices cached input tokens (nil: as input).
	USDPerMTokCached *float64
	// USDPerMTokCacheWrite prices input tokens written to the prompt
	// cache (nil: as input).
	USDPerMTokCacheWrite *float64
	// USDPerMTokCacheWrite1h prices the input tokens written to one-hour
	// cache entries (nil: as the other writes).
	USDPerMTokCacheWrite1h *float64
	// LongContext is the model's long-context tier (nil: none).
	LongContext   *plan.LongContext
	ContextTokens int
	// Provider, ID (the `model` field), APIKeyEnv, BaseURL and MaxTokens
	// declare the client that serves the model; Provider is empty when the
	// host supplies it.
	Provider  string
	ID        string
	APIKeyEnv string
	BaseURL   string
	MaxTokens int
	// FieldPos holds the positions of the provider fields that are set, by
	// field name ("provider", "model", "api_key_env", "base_url").
	FieldPos map[string]Pos
	// WellTyped is set when the model's own value has no error.
	WellTyped bool
}

// Tool is a declared tool.
type Tool struct {
	Name          string
	Pos           Pos
	SideEffecting bool
	RetrySafe     bool
	// SideEffectingSet and RetrySafeSet report whether the policy writes
	// side_effecting and retry_safe, rather than taking the schema's
	// default (false).
	SideEffectingSet, RetrySafeSet bool
	Description                    string
	// URLArg and PathArg are the first reference of url_arg and path_arg
	// ("" when the tool declares none); URLArgs and PathArgs hold every
	// reference (an argument name, or a JSON pointer such as
	// "/request/url" or "/files/*/path").
	URLArg            string
	PathArg           string
	URLArgs, PathArgs []string
	// URLArgPos and PathArgPos are the positions of url_arg and path_arg.
	URLArgPos, PathArgPos Pos
	// Args is the JSON Schema of the arguments (nil: untyped). A schema
	// given as a file path has been read.
	Args    json.RawMessage
	ArgsPos Pos
	// ResultSchema is the JSON Schema of the tool's result (nil: none),
	// checked by an output_coerce layer of the tool chain.
	ResultSchema    json.RawMessage
	ResultSchemaPos Pos
	// SecretResult marks the tool's results secret.
	SecretResult bool
}

// HasArg reports whether the tool's argument schema declares a top-level
// property named name; known is false when the tool declares no argument
// schema with properties, so that nothing can be said.
func (t *Tool) HasArg(name string) (has, known bool) {
	names, known := t.ArgNames()
	return slices.Contains(names, name), known
}

// RequiresArg reports whether the tool's argument schema lists name in its
// top-level required.
func (t *Tool) RequiresArg(name string) bool {
	var s struct {
		Required []string `json:"required"`
	}
	if len(t.Args) == 0 || json.Unmarshal(t.Args, &s) != nil {
		return false
	}
	return slices.Contains(s.Required, name)
}

// ArgNames returns the top-level properties of the tool's argument schema,
// sorted; known is false when the tool declares no argument schema with
// properties.
func (t *Tool) ArgNames() (names []string, known bool) {
	if len(t.Args) == 0 {
		return nil, false
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(t.Args, &s) != nil || s.Properties == nil {
		return nil, false
	}
	return keys(s.Properties), true
}

// RequiredArgNames returns the arguments the tool's schema requires (every
// call has them: arguments are checked against the schema before any
// layer); none when it declares no schema.
func (t *Tool) RequiredArgNames() []string {
	var s struct {
		Required []string `json:"required"`
	}
	if len(t.Args) == 0 || json.Unmarshal(t.Args, &s) != nil {
		return nil
	}
	return s.Required
}

// ClosedArgNames returns the tool's argument names when its schema lists
// every argument the tool may be sent: properties, with additionalProperties
// false and no patternProperties nor keyword that could admit more (allOf,
// anyOf, oneOf, $ref, if, dependentSchemas, unevaluatedProperties); known
// is false otherwise.
func (t *Tool) ClosedArgNames() (names []string, known bool) {
	names, known = t.ArgNames()
	if !known {
		return nil, false
	}
	var s map[string]json.RawMessage
	if json.Unmarshal(t.Args, &s) != nil || string(s["additionalProperties"]) != "false" {
		return nil, false
	}
	for _, k := range []string{"patternProperties", "allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas", "unevaluatedProperties"} {
		if _, ok := s[k]; ok {
			return nil, false
		}
	}
	return names, true
}

// Store is a declared state backend.
type Store struct {
	Name string
	Pos  Pos
	Kind string
	Path string
	// URL is the server address (redis, postgres); URLEnv names the
	// environment variable that holds it.
	URL    string
	URLEnv string
	// Prefix namespaces the store's keys or names its schema.
	Prefix string
	// Timeout bounds each operation of the store, as written ("" when
	// unset).
	Timeout string
	// URLPos and PrefixPos are the positions of the url and prefix fields
	// (the store's when unset).
	URLPos, PrefixPos Pos
}

// Entry is one layer of a chain.
type Entry struct {
	Stage string
	Index int
	// Use is the kind's id; Kind is its catalog entry.
	Use  string
	Kind *Kind
	// Name defaults to Use.
	Name         string
	ExplicitName bool
	When         *Expr
	// Tools scopes a tool-chain entry (empty: every tool).
	Tools    []string
	ToolsPos []Pos
	// Config holds the kind's own fields with defaults applied, as JSON.
	Config json.RawMessage
	// Fields holds Config decoded into plain Go values.
	Fields map[string]any
	// Pos is the entry's position; UsePos and NamePos those of its fields.
	Pos, UsePos, NamePos Pos
	// Value is the entry's CUE value.
	Value cue.Value

	path []string
	ps   *positions
	// badName is set when the name field does not hold a name (the
	// schema reports it), so the entry takes no part in the check for
	// names used twice.
	badName bool
}

// WellTyped reports whether the entry's own value, its config with the
// defaults applied, has no error: its Config is what the policy says.
func (e *Entry) WellTyped() bool {
	return e.Value.Err() == nil && e.Value.Validate(cue.Concrete(true)) == nil
}

// Holds reports whether p falls within the entry's syntax, from its
// opening brace to its closing one (false when the entry has no syntax of
// its own, as when it comes from a reference).
func (e *Entry) Holds(p Pos) bool {
	return e.ps != nil && e.ps.holds(strings.Join(e.path, "."), p)
}

// FieldPos returns the position of the value of one of the entry's fields
// as written, or the entry's position when the field is not written.
func (e *Entry) FieldPos(field string) Pos {
	if e.ps != nil {
		if p, ok := e.ps.value[strings.Join(append(append([]string{}, e.path...), field), ".")]; ok && p.IsValid() {
			return p
		}
	}
	return e.Pos
}

// Expr returns a CEL string field of the entry's config (such as a guard's
// "deny"), positioned in the policy file, or nil when it is absent.
func (e *Entry) Expr(field string) *Expr {
	v := e.Value.LookupPath(cue.MakePath(cue.Str(field)))
	if !v.Exists() {
		return nil
	}
	x := exprOf(v)
	if x == nil {
		return nil
	}
	if e.ps != nil {
		if lit, ok := e.ps.node[strings.Join(append(append([]string{}, e.path...), field), ".")].(*ast.BasicLit); ok {
			x.lit = lit.Value
			x.Pos = cuePos(lit.Pos(), Pos{})
			return x
		}
	}
	x.lit = ""
	x.Pos = e.FieldPos(field)
	return x
}

// Path returns where the entry is written, as messages name a field:
// "chains.tool[0]".
func (e *Entry) Path() string {
	if len(e.path) == 0 {
		return fieldName([]string{"chains", e.Stage, strconv.Itoa(e.Index)})
	}
	return fieldName(e.path)
}

// Ref returns how constraints and messages name the entry:
// "name (use)" when they differ.
func (e *Entry) Ref() string {
	if e.Name != e.Use {
		return e.Name + " (" + e.Use + ")"
	}
	return e.Name
}

// Constraint is an ordering rule, the policy's own or a builtin's.
type Constraint struct {
	ID       string
	Stage    string
	Outer    string
	Inner    string
	When     *Expr
	Severity Severity
	Why      string
	// Builtin marks the constraints that ship with the builtins.
	Builtin bool
	// Module names the registered custom middleware that ships the
	// constraint ("" for the builtins' and the policy's own).
	Module string
	// Positions of the constraint and its outer and inner fields.
	Pos, OuterPos, InnerPos Pos
	// OuterKinds and InnerKinds are the kinds of the entries outer and
	// inner can designate: the kind with that id, and for the policy's own
	// constraints the kinds of the entries so named (in the constraint's
	// stage). Empty when the name designates nothing known.
	OuterKinds, InnerKinds []*Kind
}

// Key identifies a constraint: its id plus the pair it orders.
func (c *Constraint) Key() string { return c.ID + "/" + c.Outer + "/" + c.Inner }

// Invariants is the invariants section: what agentc prove checks.
type Invariants struct {
	Pos Pos
	// Off lists the built-in invariants turned off.
	Off []string
	// MaxExecutions bounds a tool's executions per logical call, by tool.
	MaxExecutions map[string]int
	// Custom are the policy's own invariants (CEL over the run's trace) by
	// name.
	Custom map[string]*Expr
}

// State is the state section: the run's typed fields.
type State struct {
	Pos Pos
	// Fields by name.
	Fields map[string]*StateField
	// Queue bounds the background sinks' queue.
	Queue int
}

// StateField is one run-state field.
type StateField struct {
	Name string
	Pos  Pos
	// Schema is the JSON Schema of the value (nil: any JSON); SchemaPos is
	// where it is written.
	Schema    json.RawMessage
	SchemaPos Pos
	Secret    bool
	// OnSet and OnAppend are the handlers, in order.
	OnSet, OnAppend []*StateHandler
	// Background are the background sinks.
	Background []*StateSink
}

// StateHandler is one handler of a field: exactly one of Deny, Redact (a
// non-nil list), Truncate and Set.
type StateHandler struct {
	// Op is "on_set" or "on_append"; Index the handler's place in it.
	Op    string
	Index int
	Pos   Pos
	Deny  *Expr
	// Message says why Deny vetoed.
	Message string
	// Redact lists the patterns of a redact handler (non-nil, possibly
	// empty) and Replacement what it writes.
	Redact      []string
	IsRedact    bool
	Replacement string
	Truncate    int
	Set         *Expr
}

// StateSink is a background sink of a field.
type StateSink struct {
	Pos    Pos
	Sink   string
	Store  string
	URL    string
	URLEnv string
}
