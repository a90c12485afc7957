package gen

import (
	"encoding/json"
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"cuelang.org/go/cue/ast"

	"github.com/agentc-dev/agentc/compiler/sarif"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// traitDocs says what each builtin trait means; TestTraitsDocumented keeps
// it in step with #BuiltinInfo.
var traitDocs = map[string]string{
	"reinvokes":             "can call the inner layers more than once for one call (retry, fallback, hedge); vet multiplies their attempts",
	"short_circuits":        "can answer or refuse without calling the inner layers",
	"records":               "writes a record or ledger entry per invocation (audit, meter)",
	"counts_tokens":         "counts the tokens of the request it sees, so its place relative to layers that rewrite messages matters",
	"rewrites_messages":     "changes the messages, arguments or results that pass through it",
	"guards":                "checks calls and can block them; a check of this kind must not sit inside a cache",
	"caches":                "can answer from a stored result, skipping every layer inside it",
	"side_effect_sensitive": "must never apply to a side-effecting tool",
}

// commonTypes are the scalar definitions fields refer to; they get a
// section of their own instead of a field table.
func isCommonType(d *def) bool {
	_, isStruct := unparen(d.Expr).(*ast.StructLit)
	return !isStruct
}

// catalog is schemas/catalog.json.
type catalog struct {
	Builtins map[string]struct {
		Stages     []string `json:"stages"`
		Traits     []string `json:"traits"`
		Repeatable bool     `json:"repeatable"`
		DistinctBy []string `json:"distinct_by"`
		Doc        string   `json:"doc"`
	} `json:"builtins"`
	Constraints map[string]struct {
		ID       string `json:"id"`
		Stage    string `json:"stage"`
		Outer    string `json:"outer"`
		Inner    string `json:"inner"`
		When     string `json:"when"`
		Severity string `json:"severity"`
		Why      string `json:"why"`
	} `json:"constraints"`
}

func loadCatalog(root string) (*catalog, error) {
	b, err := os.ReadFile(filepath.Join(root, "schemas", "catalog.json"))
	if err != nil {
		return nil, err
	}
	var c catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("schemas/catalog.json: %w", err)
	}
	return &c, nil
}

// defName is the schemas definition of a builtin id: "output_coerce" ->
// "#OutputCoerce".
func defName(id string) string {
	var b strings.Builder
	b.WriteByte('#')
	for _, part := range strings.Split(id, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// pkgDir is the package directory of a builtin: "output_coerce" ->
// "builtins/outputcoerce".
func pkgDir(id string) string { return "builtins/" + strings.ReplaceAll(id, "_", "") }

type langPage struct {
	root    string
	schemas *schemaSet
	cat     *catalog
	ids     []string
	// anchors maps a definition name to its section's anchor.
	anchors map[string]string
	b       strings.Builder
}

func languagePage(root string) ([]byte, error) {
	s, err := loadSchemas(root)
	if err != nil {
		return nil, err
	}
	cat, err := loadCatalog(root)
	if err != nil {
		return nil, err
	}
	p := &langPage{root: root, schemas: s, cat: cat, anchors: map[string]string{}}
	for id := range cat.Builtins {
		p.ids = append(p.ids, id)
	}
	sort.Strings(p.ids)
	pol := s.defs["#Policy"]
	if pol == nil {
		return nil, fmt.Errorf("schemas: no #Policy")
	}
	for _, n := range s.order {
		p.anchors[n] = slug("`" + n + "`")
	}
	p.anchors["#Entry"] = "chain-entries"
	p.anchors["#EntryBase"] = "chain-entries"
	for _, id := range p.ids {
		p.anchors[defName(id)] = slug("`" + id + "`")
	}
	examples, err := findExamples(root)
	if err != nil {
		return nil, err
	}
	if err := p.render(pol, examples); err != nil {
		return nil, err
	}
	return []byte(p.b.String()), nil
}

func (p *langPage) link(name string) string {
	if a, ok := p.anchors[name]; ok {
		return fmt.Sprintf("[`%s`](#%s)", name, a)
	}
	return ""
}

func (p *langPage) printf(format string, args ...any) { fmt.Fprintf(&p.b, format, args...) }

func (p *langPage) render(pol *def, examples map[string]*example) error {
	p.printf("%s", header("The policy language", "schemas/*.cue, schemas/catalog.json and the builtins' package documentation"))
	p.printf(`A policy is one CUE package: the .cue files named, or those of a directory except test
files (*_test.cue) and files whose names begin with "." or "_", which the cue tool ignores too
(an editor's lock file, ".#policy.cue", is not read). Its root value is unified with %s, defined in
[schemas/policy.cue](../schemas/policy.cue); each builtin's configuration is a closed definition in
its own file of [schemas/](../schemas). Definitions are closed: a field they do not list is an
error (%s). The files are unified: the named sections (models, tools, stores, keys...) may be
split among them, but a list (a chain, constraints, a tool's required arguments) is written in
one place, since CUE joins two lists element by element rather than one after the other (two
lists of one field are reported at both, as %s). This page lists every section of a policy, every field with its type, bounds and
default, and every builtin: what it does, where it may be used, how vet orders it, and an
example. [rules.md](rules.md) lists the diagnostics; the CEL variables of each stage are in the
[README](../README.md#cel-predicates).

In the tables, *required* marks a field that must be given; a field with neither a default nor
*required* is optional and absent by default.

`, "`#Policy`", "[`schema/unknown-field`](rules.md#schema-unknown-field)", "[`schema/invalid-value`](rules.md#schema-invalid-value)")

	// Contents.
	polFields := topFields(pol.Expr)
	p.printf("## Contents\n\n- [Policy sections](#policy-sections):")
	for i, f := range polFields {
		sep := ","
		if i == 0 {
			sep = ""
		}
		p.printf("%s [`%s`](#%s)", sep, f.name, slug("`"+f.name+"`"))
	}
	p.printf("\n- [Chain entries](#chain-entries)\n- [Builtins](#builtins):")
	for i, id := range p.ids {
		sep := ","
		if i == 0 {
			sep = ""
		}
		p.printf("%s [`%s`](#%s)", sep, id, slug("`"+id+"`"))
	}
	p.printf("\n- [Common types](#common-types)\n- [CEL predicates](#cel-predicates): [variables](#cel-variables), [types](#cel-types)\n- [Traits](#traits)\n\n")

	// Policy sections.
	p.printf("## Policy sections\n\n%s\n\n", flow(pol.Doc))
	done := map[string]bool{"#Policy": true, "#Entry": true, "#EntryBase": true, "#BuiltinInfo": true}
	for _, f := range polFields {
		p.printf("### `%s`\n\n%s\n\n", f.name, flow(docOf(f.node)))
		typ, bounds, _ := describe(f.node.Value, p.link)
		if isFieldStruct(unparen(f.node.Value)) {
			typ = "struct"
		}
		p.printf("**Type:** %s", typ)
		if bounds != "" {
			p.printf(" (%s)", bounds)
		}
		p.printf("\n\n")
		if isFieldStruct(unparen(f.node.Value)) {
			p.table(fields(f.node.Value, p.link), true)
		}
		// The section's definitions, then the ones they refer to in turn.
		for queue := refs(f.node.Value); len(queue) > 0; queue = queue[1:] {
			r := queue[0]
			d := p.schemas.defs[r]
			if d == nil || done[r] || isCommonType(d) {
				continue
			}
			done[r] = true
			p.printf("#### `%s`\n\n%s\n\n", r, flow(d.Doc))
			p.table(fields(d.Expr, p.link), true)
			queue = append(queue, refs(d.Expr)...)
		}
	}

	// Chain entries.
	base := p.schemas.defs["#EntryBase"]
	if base == nil {
		return fmt.Errorf("schemas: no #EntryBase")
	}
	p.printf("## Chain entries\n\n%s Every entry of a chain has these fields, and the fields of the builtin (or registered middleware) its `use` names; the entry's config is checked against that builtin's closed definition.\n\n", flow(base.Doc))
	p.table(fields(base.Expr, p.link), true)

	// Builtins.
	p.printf("## Builtins\n\n| builtin | stages | traits | what it does |\n|---|---|---|---|\n")
	for _, id := range p.ids {
		m := p.cat.Builtins[id]
		p.printf("| [`%s`](#%s) | %s | %s | %s |\n", id, slug("`"+id+"`"), strings.Join(m.Stages, ", "), cell(strings.Join(m.Traits, ", ")), cell(m.Doc))
	}
	p.printf("\n")
	for _, id := range p.ids {
		if err := p.builtin(id, examples[id]); err != nil {
			return err
		}
	}

	// Common types.
	p.printf("## Common types\n\n")
	for _, n := range p.schemas.order {
		d := p.schemas.defs[n]
		if !isCommonType(d) {
			continue
		}
		p.printf("### `%s`\n\n%s\n\n```cue\n%s: %s\n```\n\n", n, flow(d.Doc), n, cueText(d.Expr))
	}

	p.celSection()

	// Traits.
	p.printf("## Traits\n\nTraits describe a builtin's behaviour to vet and `agentc explain`.\n\n| trait | meaning | builtins |\n|---|---|---|\n")
	for _, t := range sortedKeys(traitDocs) {
		var with []string
		for _, id := range p.ids {
			for _, bt := range p.cat.Builtins[id].Traits {
				if bt == t {
					with = append(with, "`"+id+"`")
				}
			}
		}
		p.printf("| `%s` | %s | %s |\n", t, cell(traitDocs[t]), strings.Join(with, ", "))
	}
	return nil
}

type topField struct {
	name string
	node *ast.Field
}

func topFields(e ast.Expr) []topField {
	var out []topField
	st, ok := unparen(e).(*ast.StructLit)
	if !ok {
		return nil
	}
	for _, d := range st.Elts {
		if f, ok := d.(*ast.Field); ok {
			if n, ok := labelName(f.Label); ok {
				out = append(out, topField{n, f})
			}
		}
	}
	return out
}

// table writes a field table. A field required only under a condition,
// and also listed as optional, is one row.
func (p *langPage) table(fs []field, withBounds bool) {
	var rows []field
	at := map[string]int{}
	for _, f := range fs {
		if i, ok := at[f.Path]; ok && f.Cond != "" && f.Required && rows[i].Default == "" && !rows[i].Required {
			rows[i].Required, rows[i].Cond = true, f.Cond
			continue
		}
		at[f.Path] = len(rows)
		rows = append(rows, f)
	}
	fs = rows
	if len(fs) == 0 {
		p.printf("No fields.\n\n")
		return
	}
	p.printf("| field | type | bounds | default | description |\n|---|---|---|---|---|\n")
	for _, f := range fs {
		dflt := "`" + f.Default + "`"
		switch {
		case f.Cond != "" && f.Required:
			dflt = "*required* when " + f.Cond
		case f.Required:
			dflt = "*required*"
		case f.Default == "":
			dflt = ""
		}
		if f.Cond != "" && !f.Required {
			// A field declared only under a condition is refused elsewhere.
			dflt = strings.TrimSpace(dflt + " only when " + f.Cond)
		}
		p.printf("| `%s` | %s | %s | %s | %s |\n", f.Path, cell(f.Type), cell(f.Bounds), cell(dflt), cell(f.Doc))
	}
	p.printf("\n")
}

func (p *langPage) builtin(id string, ex *example) error {
	m := p.cat.Builtins[id]
	dn := defName(id)
	d := p.schemas.defs[dn]
	if d == nil {
		return fmt.Errorf("builtin %s has no definition %s in schemas/", id, dn)
	}
	p.printf("### `%s`\n\n%s.\n\n", id, strings.TrimSuffix(m.Doc, "."))
	var traits []string
	for _, t := range m.Traits {
		traits = append(traits, "`"+t+"`")
	}
	if len(traits) == 0 {
		traits = []string{"none"}
	}
	rep := "no: at most once per chain ([`order/duplicate`](rules.md#order-duplicate))"
	if len(m.DistinctBy) > 0 {
		var fs []string
		for _, f := range m.DistinctBy {
			fs = append(fs, "`"+f+"`")
		}
		rep = fmt.Sprintf("once per chain with the same %s ([`order/duplicate`](rules.md#order-duplicate)); entries that differ in one of them keep separate state and may share a chain (give each a `name`)",
			orList(fs))
	}
	if m.Repeatable {
		rep = "yes: it may appear more than once in a chain (give each a `name`)"
	}
	p.printf("- **Stages:** %s\n- **Traits:** %s ([traits](#traits))\n- **Repeatable:** %s\n- **Schema:** `%s` in [%s](../%s)\n\n",
		strings.Join(m.Stages, ", "), strings.Join(traits, ", "), rep, dn, d.File, d.File)
	p.printf("#### Fields of `%s`\n\n", id)
	if fs := fields(d.Expr, p.link); len(fs) > 0 {
		p.table(fs, true)
	} else {
		p.printf("Only the [common entry fields](#chain-entries).\n\n")
	}

	if lines := p.ordering(id); len(lines) > 0 {
		p.printf("#### Ordering of `%s`\n\nThe ordering constraints it ships, checked by `agentc vet`:\n\n%s\n", id, strings.Join(lines, ""))
	}

	sem, err := p.semantics(id)
	if err != nil {
		return err
	}
	p.printf("#### Semantics of `%s`\n\n%s\n", id, sem)

	if ex == nil {
		return fmt.Errorf("builtin %s: no example: no policy in examples/ or conformance/testdata uses it", id)
	}
	p.printf("#### Example of `%s`\n\nFrom [%s](../%s):\n\n```cue\n%s\n```\n\n", id, ex.File, ex.File, ex.Text)
	return nil
}

// ordering lists the builtin constraints naming id, grouped by rule.
func (p *langPage) ordering(id string) []string {
	type group struct {
		rule, severity, why, when string
		outer                     bool // id is the outer layer
		others                    []string
		stage                     string
	}
	groups := map[string]*group{}
	var keys []string
	for _, k := range sortedKeys(p.cat.Constraints) {
		c := p.cat.Constraints[k]
		var other string
		var outer bool
		switch id {
		case c.Outer:
			other, outer = c.Inner, true
		case c.Inner:
			other = c.Outer
		default:
			continue
		}
		gk := fmt.Sprintf("%s|%v|%s|%s|%s", c.ID, outer, c.Why, c.When, c.Stage)
		g := groups[gk]
		if g == nil {
			g = &group{rule: "order/" + c.ID, severity: c.Severity, why: c.Why, when: c.When, outer: outer, stage: c.Stage}
			groups[gk] = g
			keys = append(keys, gk)
		}
		g.others = append(g.others, "`"+other+"`")
	}
	var out []string
	for _, k := range keys {
		g := groups[k]
		var s string
		if g.outer {
			s = fmt.Sprintf("`%s` sits outside %s", id, orList(g.others))
		} else {
			verb := "sits"
			if len(g.others) > 1 {
				verb = "sit"
			}
			s = fmt.Sprintf("%s %s outside `%s`", orList(g.others), verb, id)
		}
		if g.stage != "" {
			s += " in the " + g.stage + " chain"
		}
		if g.when != "" {
			s += fmt.Sprintf(" when `%s`", g.when)
		}
		out = append(out, fmt.Sprintf("- [`%s`](rules.md#%s) (%s): %s, because %s.\n", g.rule, sarif.Anchor(g.rule), g.severity, s, strings.TrimSuffix(g.why, ".")))
	}
	return out
}

func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// semantics renders the package documentation of a builtin as markdown.
func (p *langPage) semantics(id string) (string, error) {
	dir := filepath.Join(p.root, filepath.FromSlash(pkgDir(id)))
	name := filepath.Join(dir, "doc.go")
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return "", fmt.Errorf("builtin %s: %w", id, err)
	}
	if f.Doc == nil {
		return "", fmt.Errorf("builtin %s: %s/doc.go has no package documentation", id, pkgDir(id))
	}
	var cp comment.Parser
	d := cp.Parse(f.Doc.Text())
	pr := comment.Printer{HeadingLevel: 5}
	// Backquotes in the package documentation mark code, as in the
	// schemas' comments.
	return strings.ReplaceAll(string(pr.Markdown(d)), "\\`", "`"), nil
}

// celSection lists the variables of each stage and the fields of their
// types, from the predicate environments.
func (p *langPage) celSection() {
	p.printf("## CEL predicates\n\n" +
		"Guards (`deny`, `require`), every entry's `when` and the top-level `admit` are CEL, " +
		"type-checked at vet time against the variables of their stage " +
		"([`cel/type`](rules.md#cel-type)). A guard with `phase: \"after\"` also sees the call's outcome; " +
		"every other predicate runs before the call. A message's `content` is its whole text: a string, or its text and `tool_result` parts and the text its image parts carry in place of an image " +
		"(`data:text/plain,...`, which pii, security and content_filter read too), in order, as the model reads them: " +
		"adjacent text parts run together (a Claude model reads separate text blocks so, a `cache_control` breakpoint between them or not, and OpenAI's API content parts; " +
		"the openai provider sends them so), and a line break where an image, a document, a tool result, thinking or a tool call stands between two texts, and between the texts of a tool message (one result). " +
		"So a guard reads a message sent as parts as it reads one sent as a string, and `\"wire\"` and `\" transfer\"` as `\"wire transfer\"`, never as the `\"wire\\ntransfer\"` no model reads. A guard reads a turn whole too: where consecutive messages a provider sends as one turn (user messages, and tool results with the user's text beside them; assistant messages; system messages) hold texts read apart, it reads the messages again with the `content` of the turn's last message the turn's texts run together, a `deny` blocking when either reading holds and a `require` when either fails, so `\"wire\"` in one user message (or a tool result) and `\" transfer\"` in the next are found as pii, security and content_filter find them; the roles and count of the messages do not change. In that reading a message's `tool_result` parts (each with its result's images) come first, before its content and its other parts, wherever the client put them, as both providers send them (Anthropic's API as the first blocks of the user turn, OpenAI's as tool messages before the user's) and as pii and redact read a turn. That last message thus holds the whole turn's text under its role, so a `require` bounding `m.content.size()` bounds a turn's, and a tool result's text reads as the user's after it; where an image, a thinking block, a tool call or a document stands between two texts of the turn a line break does, as in a message's own content. A chat layer's `when` reads both ways too, applying the layer when either reading holds. In the tool stage, `args` is typed from the JSON Schema of the tools " +
		"an entry is scoped to with `tools:`; unscoped, it is an untyped map ([`cel/untyped-args`](rules.md#cel-untyped-args)), " +
		"and so is an object argument whose schema lists no properties (`{type: \"object\"}`, additionalProperties open): a scoped entry reading a field of it (`args.opts.sudo`) gets the same warning, at the read, as the field may be misspelt or hold a value of any type (`{\"sudo\": \"true\"}` is not `true`); " +
		"but reading an argument no declared tool's closed schema has, or a field of an object argument its closed schema lacks (`args.shipping.zipp`), is still a `cel/type` error, and so is testing it with has(), which is always false (a read that has() guards is not). " +
		"A typed `args` is an object, not a map: its fields are read by name, and a name that is not an identifier goes between backticks (``args.`x-api-key` ``, ``has(args.`x-api-key`)``); `args['x-api-key']` and `'x-api-key' in args` are `cel/type` errors that say so. " +
		"An argument whose schema is a `$ref` to a definition of the same schema (`\"$ref\": \"#/$defs/addr\"`, as schemas generated from typed models write nested objects) is typed as that definition. A field that may be null (pydantic's `anyOf: [{type: X}, {type: \"null\"}]`, a type list with `\"null\"`, OpenAPI's `nullable: true`) is an X that must be tested with `has()`: a null reads as absent, so `!has(args.note)` is true for a null and `args.note == null` is a `cel/type` error naming that test. So is comparing with null a field typed as an object, whether the schema requires it, makes it optional or lets it be null: `args.ship == null` is never true, as a null ship reads as absent (the read is a \"no such key\" error, and the guard fails as its `on_error` says) and a ship that is there is an object, so a `deny` with it never fires; `!has(args.ship)` is the test, and `!('home' in args.books)` for an entry of a map read by its key (`args.books['home'] == null`); `args` itself is always an object, and `args == null` is refused too, as is comparing with null a variable of the stage or an object field of one (`request.params == null`, `response.usage != null`): each is always there. `allOf` and a `$ref` with siblings merge their objects' fields; an `enum` or `const` without a type is typed by its values; a union of objects (`anyOf`, `oneOf`, a discriminated union) has the fields of every branch, typed where the branches agree, and a field one branch lacks needs `has()`; a union of kinds that differ and the elements of a tuple are untyped. " +
		"A null reads as absent in every object a predicate reads, typed or not: in `args` and the objects and maps inside it, `run.meta`, `session.meta`, `item.metadata`, a tool result and a tool call's `args`, `has()` is false for it, an optional read (`args.?reason`, `args.?ship.?zip`, `m[?'k']`) is empty and `orValue` gives its default, `'k' in m` is false, `size()` and iteration skip it, and a plain read is a \"no such key\" error, so `deny: \"args.?reason.orValue('') == ''\"` blocks `{\"reason\": null}` as it blocks a call without a reason; only a list keeps its null elements (`args.tags[0] == null`), and a map's values are typed as the schema types them, a null among them absent. " +
		"A predicate reading a key of an optional map (`item.metadata.KEY` in `admit`, `run.meta.KEY`, `session.meta.KEY`, `request.params.metadata.KEY`, a map below the `args` of an entry scoped to tools: `args.headers['X-Debug']` where `headers` is an object whose keys are free) without testing the key first is warned about " +
		"([`cel/unchecked-key`](rules.md#cel-unchecked-key)): where the key is absent the read fails, and unless the rest of the predicate decides it, `admit` refuses the item, a guard follows its `on_error` (blocking by default), a `when` applies its layer. " +
		"Reading a list by a constant index without testing its size is caught the same way ([`cel/unchecked-index`](rules.md#cel-unchecked-index)): `deny: \"response.tool_calls[0].name == 'refund'\"` fails on every answer without tool calls, blocking it by default, an error where nothing else in the predicate can decide it first; test `size(response.tool_calls) > 0 && ...` or read `response.tool_calls[?0]`. " +
		"A number is read as the call carries it, never as a neighbour: an argument typed `integer` is an int (`9007199254740993` exactly, not the `float64` `9007199254740992`), " +
		"untyped it is an int where only an int holds it and a double otherwise, and a number the type cannot hold exactly (that integer read where the schema says `number`, a double; " +
		"a decimal with more digits than a double holds in a tool result) is an evaluation error, decided by `on_error`; a call whose arguments hold a number that neither a `float64` " +
		"nor an `int64` holds is refused by layer `tools` before any guard runs ([embedding.md](embedding.md#calls)). " +
		"An int and a double compare (`==`, `!=`, `<`, `<=`, `>`, `>=`, and a list's elements for `in`) as the numbers they are, where CEL itself rounds the int to a double first: " +
		"a result's `account_id` of `9007199254740993` (an int) is not equal to an argument's `9007199254740992` (a double), and `9223372036854775807` is below `9223372036854775808.0`; " +
		"so do the elements of two lists and the values of two maps (an untyped `args.ids` of `[9007199254740993]` is not equal to `[9007199254740992.0]`). " +
		"That holds where the checker lets the comparison through: `<`, `<=`, `>` and `>=` of an int with a double always, `==`, `!=` and `in` where one side's type is not known before the call " +
		"(an untyped argument, a tool result, `dyn(...)`). Where both are typed, one an int and the other a double (an argument the schema types `integer` against one it types `number`, or against a constant), " +
		"`==`, `!=` and `in` are a `cel/type` error, as in CEL, and the error says what to write: `args.amount == double(args.count)`, `args.amount in [100.0, 200.0]`, `args.count != 100`. " +
		"`string()` writes a double in plain decimal form, as `tool_policy`'s `arg_patterns` read a number (`string(1e6)` is `'1000000'`, not CEL's `'1e+06'`; -0 is `'0'`), " +
		"so a guard reading an account's digits (`string(args.acct).startsWith('4111')`) reads them however the call spells the number; " +
		"`double()` of an int, a uint or a decimal string a double does not hold exactly (`9007199254740993`, `'100.000000000000001'`) is an evaluation error, not the neighbour CEL rounds it to. " +
		"A constraint's `when` reads `outer` and `inner`, the configs of the two entries it orders, " +
		"typed from the config fields of their builtins (`outer.trial` for an `audit` layer is a `cel/type` error). " +
		"A state handler's `deny` and `set` ([`state`](#state)) read `value` (the value set, or the element appended), " +
		"typed from the field's JSON Schema, and `state`, an object of the run's fields typed from theirs (a field not set is absent: test it with `has`); " +
		"`set` computes a value of the field's type instead of a bool. " +
		"The functions beyond CEL's standard library are listed in the [README](../README.md#cel-predicates).\n\n")
	p.printf("### CEL variables\n\n| stage | variable | type | available | holds |\n|---|---|---|---|---|\n")
	for _, st := range []predicate.Stage{predicate.Chat, predicate.Tool, predicate.Turn, predicate.Admit, predicate.State} {
		for _, v := range predicate.Variables(st) {
			when := "before and after the call"
			switch {
			case v.AfterOnly:
				when = "after the call (`phase: \"after\"`)"
			case st == predicate.Admit:
				when = "for each retrieved item"
			case st == predicate.State:
				when = "on each set or append"
			}
			p.printf("| %s | `%s` | %s | %s | %s |\n", st, v.Name, cell(celTypeLink(v.Type)), when, cell(v.Doc))
		}
	}
	p.printf("\n### CEL types\n\n")
	for _, name := range predicate.ObjectTypes() {
		fs, _ := predicate.ObjectFields(name)
		p.printf("#### `%s`\n\n| field | type | holds |\n|---|---|---|\n", name)
		for _, f := range fs {
			p.printf("| `%s` | %s | %s |\n", f.Name, cell(celTypeLink(f.Type)), cell(f.Doc))
		}
		p.printf("\n")
	}
}

var celTypeName = regexp.MustCompile(`agentc\.[a-z_]+`)

// celTypeLink renders a CEL type, linking the agentc object types it names
// to their tables: list(agentc.message) -> `list(`[`agentc.message`](#...)`)`.
func celTypeLink(t string) string {
	var b strings.Builder
	code := func(s string) {
		if s != "" {
			b.WriteString("`" + s + "`")
		}
	}
	last := 0
	for _, m := range celTypeName.FindAllStringIndex(t, -1) {
		code(t[last:m[0]])
		name := t[m[0]:m[1]]
		fmt.Fprintf(&b, "[`%s`](#%s)", name, slug("`"+name+"`"))
		last = m[1]
	}
	code(t[last:])
	return b.String()
}
