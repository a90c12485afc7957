package gen

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/compiler/sarif"
	"github.com/agentc-dev/agentc/conformance"
)

// policyExample is a policy quoted from the rule testdata.
type policyExample struct {
	Source  string // the archive, relative to the repository root
	Name    string // the policy's directory in the archive ("" for its root)
	Comment string // what the archive or case says it shows
	Files   []txtar.File
}

// ruleGroups are the sections of the rules page: rule ids by prefix.
var ruleGroups = []struct {
	title, intro string
	prefixes     []string
}{
	{"Loading the policy", "The load rules: CUE syntax, the schema, references and stages. Until the policy loads without errors, no later rule runs.", []string{"cue/", "schema/"}},
	{"CEL predicates", "Every CEL predicate (a guard's `deny` or `require`, an entry's `when`, `admit`, a constraint's `when`) is parsed and type-checked against the variables of its stage. These rules run once the policy loads.", []string{"cel/"}},
	{"Ordering and vet rules", "Once the schema and the predicates are right, the ordering constraints (the builtins' and the policy's own) are checked and the vet rule suite runs. Every diagnostic of an ordering rule names both layers: the second position is on an indented line (a related location in SARIF).", []string{"order/", "guard/"}},
	{"Shared state", "The state rules check the stores a policy declares and the layers that use them: a store must be openable and offer what its layers need, and a policy served by several replicas must keep its limits, budgets and dedupe tables where every replica sees them.", []string{"state/"}},
}

func rulesPage(root string) ([]byte, error) {
	cases, err := conformance.Load(filepath.Join(root, "conformance", "testdata"))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pf("%s", header("Diagnostic rules", "compiler.Rules, the vet suite's documentation, compiler/vet/testdata and conformance/testdata"))
	pf("%s", rulesIntro)

	rules := compiler.Rules()
	grouped := map[string]bool{}
	pf("## All rules\n\n| rule | severity | reports |\n|---|---|---|\n")
	for _, g := range ruleGroups {
		for _, r := range rules {
			if hasPrefix(r.ID, g.prefixes) {
				pf("| [`%s`](#%s) | %s | %s |\n", r.ID, sarif.Anchor(r.ID), severityText(r.Severity), cell(r.Title))
				grouped[r.ID] = true
			}
		}
	}
	for _, r := range rules {
		if !grouped[r.ID] {
			return nil, fmt.Errorf("rule %s has no section on the rules page (ruleGroups)", r.ID)
		}
	}
	pf("\n")

	for _, g := range ruleGroups {
		pf("## %s\n\n%s\n\n", g.title, g.intro)
		for _, r := range rules {
			if !hasPrefix(r.ID, g.prefixes) {
				continue
			}
			fail, pass, more, err := ruleExamples(root, r, cases)
			if err != nil {
				return nil, err
			}
			pf("<a id=\"%s\"></a>\n\n### `%s`\n\n**Severity:** %s. %s.\n\n", sarif.Anchor(r.ID), r.ID, severityText(r.Severity), upper(r.Title))
			if doc := sarif.Flow(r.Doc); doc != "" {
				pf("%s\n\n", doc)
			}
			pf("**Fails**%s\n\n", exampleHead(fail))
			writePolicy(&b, fail)
			pf("**Passes**%s\n\n", exampleHead(pass))
			writePolicy(&b, pass)
			if len(more) > 0 {
				pf("More cases: %s.\n\n", strings.Join(more, ", "))
			}
		}
	}
	return []byte(b.String()), nil
}

const rulesIntro = `Every diagnostic agentc reports carries a rule id. Rule ids are stable: tools, tests and the
conformance cases match on them, never on the message. A rule's severity is error or warning;
` + "`agentc vet`" + ` exits 1 when a policy has errors (with ` + "`-strict`" + `, warnings too). ` + "`agentc vet -rules`" + `
lists the rules the installed version knows.

Each rule below shows a policy that fails it and one that passes, taken from the rule's
testdata (` + "`compiler/vet/testdata`" + ` for the vet rules, ` + "`conformance/testdata`" + ` for the others);
the line a diagnostic is reported at carries a ` + "`// vet:`" + ` comment with the rule id.

## Rounds

The compiler checks a policy in stages: the CUE schema and the references (` + "`cue/*`" + `,
` + "`schema/*`" + `), then the CEL predicates (` + "`cel/*`" + `), then the ordering and the vet suite. A stage
runs once the ones before it find no error, but what an error cannot mislead is checked in the
round that reports it: a builtin's own check of its config and a model's provider fields, for an
entry or a model with no error of its own, and each CEL predicate whose entry has no error and
whose typing reads no part with one. A predicate reads the settings (the cost limit) and, in the
tool chain, the tools its entry is scoped to (every declared tool when it is not scoped) and the
MCP servers; in the chat chain, the models and the tools' names; a state handler, the state's
fields; a custom invariant, the models' and the tools' names; the admit predicate, only itself.
A predicate that reads a part with an error is checked once that is fixed, so that no finding
follows from what the policy does not yet say: a guard on a tool whose args schema misspells
properties is not told that the argument it reads is undefined. An error in the settings, or
outside every section (an unknown top-level field, such as tols for tools), holds every predicate
back; one in stores, keys, grounding or constraints, which no predicate reads, holds none. The ordering
rules, and a constraint's when with them, run only on a policy with no error: they reason over
whole chains and the tools that reach them, which an entry with an error leaves unknown.

## Output formats

` + "`agentc vet -format FORMAT`" + ` chooses how diagnostics are printed:

- ` + "`text`" + ` (the default): one line per problem on standard error,
  ` + "`file:line:col: severity rule-id: message`" + `, sorted by position, with the related positions
  (the other layer of an ordering violation) on indented lines below. At most 200 are printed.
  On a terminal each problem is followed by its source line, indented, with a caret under the
  column (control characters shown as ` + "`?`" + `, a line over 120 columns cut around the caret).
- ` + "`json`" + ` (also ` + "`-json`" + `): a JSON array on standard output of
  ` + "`{\"file\",\"line\",\"col\",\"severity\",\"rule\",\"message\"}`" + `, plus ` + "`\"related\"`" + ` when there are related
  positions.
- ` + "`sarif`" + `: a [SARIF 2.1.0](https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html) log on
  standard output, for code-scanning tools. Its one run lists every rule as a descriptor (id,
  short and full description, default level, and a help URI at the rule's section of this page)
  and every diagnostic as a result with its level (` + "`error`" + ` or ` + "`warning`" + `), message, file, line and
  column (` + "`columnKind`" + ` is ` + "`unicodeCodePoints`" + `), and the related positions as related locations.
  Relative file names are relative to ` + "`%SRCROOT%`" + `, the directory agentc ran in, or, when a
  file lies outside it (` + "`agentc vet -format sarif ../policies/...`" + ` run in ` + "`ci/`" + `), the nearest
  directory above it that holds every file, so that no location climbs out of ` + "`%SRCROOT%`" + `
  (` + "`policies/bad/policy.cue`" + `, ` + "`%SRCROOT%`" + ` the checkout). A policy's own
  constraint gets a descriptor of its own, ` + "`order/<id>`" + `. The log is checked against the official
  SARIF 2.1.0 JSON Schema in agentc's tests.

` + "```sh" + `
agentc vet -format sarif ./policies/... > agentc.sarif   # then upload it to your code-scanning service
` + "```" + `

The exit code does not depend on the format.

`

func hasPrefix(id string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

func severityText(s any) string {
	switch v := fmt.Sprint(s); v {
	case "declared":
		return "as the constraint declares (error by default)"
	case "error/warning":
		return "error (milder findings: warning)"
	default:
		return v
	}
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func exampleHead(e *policyExample) string {
	src := fmt.Sprintf("[%s](../%s)", e.Source, e.Source)
	if e.Name != "" && e.Name != "." {
		src += ", policy `" + e.Name + "`"
	}
	s := " (" + src + ")"
	if e.Comment != "" {
		s += ": " + strings.TrimSuffix(sarif.Flow(e.Comment), ".") + "."
	} else {
		s += ":"
	}
	return s
}

// writePolicy writes the files of a policy as code blocks; with more than
// one file each is named.
func writePolicy(b *strings.Builder, e *policyExample) {
	for _, f := range e.Files {
		lang := "cue"
		if strings.HasSuffix(f.Name, ".json") {
			lang = "json"
		}
		if len(e.Files) > 1 {
			name := "`" + filepath.Base(f.Name) + "`"
			if strings.HasPrefix(f.Name, "baseline/") {
				name = "The deployed policy (`-baseline`), " + name
			}
			fmt.Fprintf(b, "%s:\n\n", name)
		}
		fmt.Fprintf(b, "```%s\n%s\n```\n\n", lang, strings.TrimRight(string(f.Data), "\n"))
	}
}

// ruleExamples finds a failing and a passing policy for r: for a vet rule,
// in its archive under compiler/vet/testdata; for the others, among the
// conformance cases.
func ruleExamples(root string, r compiler.Rule, cases []*conformance.Case) (fail, pass *policyExample, more []string, err error) {
	if (strings.HasPrefix(r.ID, "order/") || strings.HasPrefix(r.ID, "guard/") || strings.HasPrefix(r.ID, "state/")) && r.ID != compiler.RuleStateReset && r.ID != compiler.RuleStateCoverage {
		if f, p, err := vetExamples(root, r.ID); err != nil || f != nil {
			return f, p, nil, err
		}
	}
	var failing []*conformance.Case
	for _, c := range cases {
		for _, w := range c.WantVet {
			if strings.HasSuffix(w, " "+r.ID) {
				failing = append(failing, c)
				break
			}
		}
	}
	if len(failing) == 0 {
		return nil, nil, nil, fmt.Errorf("rule %s: no failing policy in compiler/vet/testdata or conformance/testdata", r.ID)
	}
	short := r.ID[strings.Index(r.ID, "/")+1:]
	// The case named after the rule, else the shortest name starting
	// with it, else the first.
	best := failing[0]
	bestLen := -1
	for _, c := range failing {
		base := c.Name[strings.LastIndex(c.Name, "/")+1:]
		if base == short {
			best = c
			break
		}
		if strings.HasPrefix(base, short) && (bestLen < 0 || len(base) < bestLen) {
			best, bestLen = c, len(base)
		}
	}
	for _, c := range failing {
		if c != best {
			src := "conformance/testdata/" + c.Name + ".txtar"
			more = append(more, fmt.Sprintf("[%s](../%s)", strings.TrimPrefix(c.Name, ""), src))
		}
	}
	fail = caseExample(best, r.ID)
	// The passing policy: the clean case of the failing case's directory,
	// else of schema/.
	dir := best.Name[:strings.LastIndex(best.Name, "/")+1]
	for _, name := range []string{dir + "clean", "schema/clean"} {
		for _, c := range cases {
			if c.Name == name && c.WantVet != nil && len(c.WantVet) == 0 {
				return fail, caseExample(c, ""), more, nil
			}
		}
	}
	return nil, nil, nil, fmt.Errorf("rule %s: no clean conformance case in %s or schema/", r.ID, dir)
}

// caseExample is the policy of a conformance case, with its wanted
// diagnostics of rule (all of them when rule is "") marked.
func caseExample(c *conformance.Case, rule string) *policyExample {
	e := &policyExample{Source: "conformance/testdata/" + c.Name + ".txtar", Comment: string(c.Archive.Comment)}
	marks := map[string][]string{} // "file:line" -> rules
	for _, w := range c.WantVet {
		pos, id, _ := strings.Cut(w, " ")
		if rule == "" || id == rule {
			marks[pos] = append(marks[pos], id)
		}
	}
	for _, f := range c.Archive.Files {
		if strings.HasPrefix(f.Name, "baseline/") {
			// The deployed policy a baseline case compares with.
			e.Files = append(e.Files, f)
			continue
		}
		if !strings.HasPrefix(f.Name, "policy/") {
			continue
		}
		name := strings.TrimPrefix(f.Name, "policy/")
		data := f.Data
		if strings.HasSuffix(name, ".cue") {
			data = markLines(name, data, marks)
		}
		e.Files = append(e.Files, txtar.File{Name: name, Data: data})
	}
	return e
}

// markLines appends `// vet: RULE` to the lines marks names.
func markLines(name string, data []byte, marks map[string][]string) []byte {
	lines := strings.Split(string(data), "\n")
	for i := range lines {
		ids := marks[fmt.Sprintf("%s:%d", name, i+1)]
		if len(ids) == 0 {
			continue
		}
		sort.Strings(ids)
		lines[i] += " // vet: " + strings.Join(ids, ", ")
	}
	return []byte(strings.Join(lines, "\n"))
}

var wantComment = regexp.MustCompile(`\s*//\s*want\s+(".*)$`)

// vetExamples reads the archive of a vet rule: its first policy with
// wanted diagnostics fails, its policy named "clean" (else its first
// without wants) passes.
func vetExamples(root, id string) (fail, pass *policyExample, err error) {
	rel := "compiler/vet/testdata/" + strings.ReplaceAll(id, "<id>", "user") + ".txtar"
	ar, err := txtar.ParseFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, nil, fmt.Errorf("rule %s: %w", id, err)
	}
	var order []string
	files := map[string][]txtar.File{}
	for _, f := range ar.Files {
		dir, name := ".", f.Name
		if i := strings.Index(f.Name, "/"); i >= 0 {
			dir, name = f.Name[:i], f.Name[i+1:]
		}
		if _, ok := files[dir]; !ok {
			order = append(order, dir)
		}
		files[dir] = append(files[dir], txtar.File{Name: name, Data: f.Data})
	}
	var firstClean *policyExample
	for _, dir := range order {
		e := &policyExample{Source: rel, Name: dir}
		wants := false
		for _, f := range files[dir] {
			data := f.Data
			if strings.HasSuffix(f.Name, ".cue") {
				lines := strings.Split(string(data), "\n")
				for i, l := range lines {
					if m := wantComment.FindStringSubmatchIndex(l); m != nil {
						n := countWants(l[m[2]:])
						ids := make([]string, n)
						for j := range ids {
							ids[j] = id
						}
						if id == "order/<id>" {
							ids = []string{"order/<its id>"}
						}
						lines[i] = l[:m[0]] + " // vet: " + strings.Join(ids, ", ")
						wants = true
					}
				}
				data = []byte(strings.Join(lines, "\n"))
			}
			e.Files = append(e.Files, txtar.File{Name: f.Name, Data: data})
		}
		switch {
		case wants && fail == nil:
			fail = e
		case !wants && dir == "clean":
			pass = e
		case !wants && firstClean == nil:
			firstClean = e
		}
	}
	if pass == nil {
		pass = firstClean
	}
	if fail == nil || pass == nil {
		return nil, nil, fmt.Errorf("rule %s: %s needs a policy with wants and one without", id, rel)
	}
	fail.Comment = string(ar.Comment)
	return fail, pass, nil
}

// countWants counts the quoted regexps of a want comment.
func countWants(s string) int {
	n := 0
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			break
		}
		n++
		s = s[len(q):]
	}
	if n == 0 {
		n = 1
	}
	return n
}
