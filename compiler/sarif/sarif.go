// Package sarif writes agentc diagnostics as a SARIF 2.1.0 log, the format
// code-scanning tools read (GitHub code scanning, IDE SARIF viewers).
//
// The log has one run whose tool is agentc. Its rule descriptors are the
// compiler's rules (compiler.Rules), each with a short description, the
// full text of its documentation and a help URI at the rule's anchor in
// docs/rules.md; a policy's own constraint (order/<id>) gets a descriptor
// of its own. Each diagnostic is a result at its file, line and column,
// with its related positions (the second layer of an ordering violation)
// as related locations. Columns are counted in Unicode code points, as the
// run's columnKind says: agentc's own columns count bytes, and the writer
// converts them with the file's text when it can read the file.
package sarif

import (
	"encoding/json"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
)

// Version is the SARIF version written.
const Version = "2.1.0"

// SchemaURI is the JSON Schema of the SARIF version written.
const SchemaURI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

// DocsURL is the page that documents every rule; a rule's help URI is its
// anchor on this page (see Anchor).
const DocsURL = "https://github.com/agentc-dev/agentc/blob/main/docs/rules.md"

// InformationURI is agentc's home page.
const InformationURI = "https://github.com/agentc-dev/agentc"

// Anchor returns the anchor of a rule's section in docs/rules.md:
// "order/nested-retry" -> "order-nested-retry", "order/<id>" -> "order-id".
func Anchor(ruleID string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(ruleID) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == '/' || r == '_' || r == '.':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Options configures a log.
type Options struct {
	// ToolVersion is agentc's version, as `agentc version` prints it.
	ToolVersion string
	// Rules are the rule descriptors (default compiler.Rules()).
	Rules []compiler.Rule
	// SrcRoot is the absolute directory relative file names are relative
	// to; it becomes the %SRCROOT% base of the run's artifact locations,
	// or, when a file lies outside it (../policies/p.cue), the nearest
	// directory above it that holds every file, so that no location climbs
	// out of %SRCROOT%. Empty leaves %SRCROOT% undefined.
	SrcRoot string
	// ReadFile reads a diagnostic's file, to convert its byte columns to
	// code points; nil, or a failing read, keeps the byte columns.
	ReadFile func(name string) ([]byte, error)
	// DocsURL overrides DocsURL in the rules' help URIs.
	DocsURL string
}

// Log is a SARIF log (the subset of sarifLog agentc writes).
type Log struct {
	Schema  string `json:"$schema"`
	Version string `json:"version"`
	Runs    []Run  `json:"runs"`
}

// Run is one run of a tool.
type Run struct {
	Tool               Tool                        `json:"tool"`
	Invocations        []Invocation                `json:"invocations,omitempty"`
	OriginalURIBaseIDs map[string]ArtifactLocation `json:"originalUriBaseIds,omitempty"`
	Results            []Result                    `json:"results"`
	ColumnKind         string                      `json:"columnKind"`
}

// Tool names the analysis tool.
type Tool struct {
	Driver Driver `json:"driver"`
}

// Driver is the tool component that ran: agentc, with its rules.
type Driver struct {
	Name           string       `json:"name"`
	Version        string       `json:"version,omitempty"`
	InformationURI string       `json:"informationUri"`
	Rules          []Descriptor `json:"rules"`
}

// Descriptor describes a rule.
type Descriptor struct {
	ID                   string        `json:"id"`
	Name                 string        `json:"name,omitempty"`
	ShortDescription     Message       `json:"shortDescription"`
	FullDescription      *Message      `json:"fullDescription,omitempty"`
	HelpURI              string        `json:"helpUri,omitempty"`
	DefaultConfiguration Configuration `json:"defaultConfiguration"`
}

// Configuration is a rule's default configuration.
type Configuration struct {
	Level string `json:"level"`
}

// Invocation records how the run ended.
type Invocation struct {
	ExecutionSuccessful bool `json:"executionSuccessful"`
}

// Message is a plain-text message.
type Message struct {
	Text string `json:"text"`
}

// Result is one diagnostic.
type Result struct {
	RuleID           string     `json:"ruleId"`
	RuleIndex        int        `json:"ruleIndex"`
	Level            string     `json:"level"`
	Message          Message    `json:"message"`
	Locations        []Location `json:"locations,omitempty"`
	RelatedLocations []Location `json:"relatedLocations,omitempty"`
}

// Location is a place in a file.
type Location struct {
	ID               *int             `json:"id,omitempty"`
	PhysicalLocation PhysicalLocation `json:"physicalLocation"`
	Message          *Message         `json:"message,omitempty"`
}

// PhysicalLocation is a file and a region of it.
type PhysicalLocation struct {
	ArtifactLocation ArtifactLocation `json:"artifactLocation"`
	Region           *Region          `json:"region,omitempty"`
}

// ArtifactLocation names a file by URI, relative to a base id or absolute.
type ArtifactLocation struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

// Region is a position: 1-based line and column.
type Region struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// srcRoot is the base id of relative file names.
const srcRoot = "%SRCROOT%"

// New builds the log of ds.
func New(ds dsl.Diagnostics, opts Options) *Log {
	rules := opts.Rules
	if rules == nil {
		rules = compiler.Rules()
	}
	docs := opts.DocsURL
	if docs == "" {
		docs = DocsURL
	}
	w := &writer{opts: opts, lines: map[string][]string{}, root: srcRootOf(ds, opts.SrcRoot)}
	driver := Driver{Name: "agentc", Version: opts.ToolVersion, InformationURI: InformationURI, Rules: []Descriptor{}}
	index := map[string]int{}
	add := func(d Descriptor) {
		index[d.ID] = len(driver.Rules)
		driver.Rules = append(driver.Rules, d)
	}
	for _, r := range rules {
		if r.ID == "order/<id>" {
			continue // a descriptor per constraint id, below
		}
		add(descriptor(r.ID, r.Title, r.Doc, level(r.Severity), docs+"#"+Anchor(r.ID)))
	}
	run := Run{Tool: Tool{Driver: driver}, Results: []Result{}, ColumnKind: "unicodeCodePoints"}
	for _, d := range ds {
		i, ok := index[d.Rule]
		if !ok {
			// A policy's own constraint, or a rule this version does not
			// list: its descriptor points at the order/<id> section.
			title := "a rule of the policy's own"
			if strings.HasPrefix(d.Rule, "order/") {
				title = "a constraint of the policy's own is violated"
			}
			add(descriptor(d.Rule, title, "", level(d.Severity), docs+"#"+Anchor("order/<id>")))
			i = index[d.Rule]
		}
		res := Result{RuleID: d.Rule, RuleIndex: i, Level: level(d.Severity), Message: Message{Text: d.Message}}
		if loc, ok := w.location(d.Pos); ok {
			res.Locations = []Location{loc}
		}
		for j, rel := range d.Related {
			loc, ok := w.location(rel.Pos)
			if !ok {
				continue
			}
			id := j + 1
			loc.ID = &id
			loc.Message = &Message{Text: rel.Message}
			res.RelatedLocations = append(res.RelatedLocations, loc)
		}
		run.Results = append(run.Results, res)
	}
	run.Tool.Driver.Rules = driver.Rules
	if w.root != "" {
		u := fileURI(w.root)
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		run.OriginalURIBaseIDs = map[string]ArtifactLocation{srcRoot: {URI: u}}
	}
	run.Invocations = []Invocation{{ExecutionSuccessful: true}}
	return &Log{Schema: SchemaURI, Version: Version, Runs: []Run{run}}
}

// Write writes the log of ds to w as indented JSON.
func Write(w io.Writer, ds dsl.Diagnostics, opts Options) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(New(ds, opts))
}

func descriptor(id, title, doc, lvl, help string) Descriptor {
	d := Descriptor{ID: id, Name: ruleName(id), ShortDescription: Message{Text: title}, HelpURI: help, DefaultConfiguration: Configuration{Level: lvl}}
	if doc = Flow(doc); doc != "" {
		d.FullDescription = &Message{Text: doc}
	}
	return d
}

// Flow rewraps a doc text: the lines of each paragraph joined with single
// spaces, paragraphs separated by a blank line.
func Flow(doc string) string {
	var paras []string
	for _, p := range strings.Split(strings.ReplaceAll(doc, "\r\n", "\n"), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paras = append(paras, p)
		}
	}
	return strings.Join(paras, "\n\n")
}

// ruleName turns a rule id into the PascalCase name SARIF viewers show:
// "order/nested-retry" -> "OrderNestedRetry".
func ruleName(id string) string {
	var b strings.Builder
	up := true
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z':
			if up {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			up = false
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

// level maps a severity to a SARIF level. A rule of severity error that
// reports milder findings as warnings ("error/warning") defaults to error;
// a rule whose severity is the constraint's own ("declared") to error, the
// default severity of a constraint.
func level(s dsl.Severity) string {
	if s == dsl.Warning {
		return "warning"
	}
	return "error"
}

type writer struct {
	opts  Options
	lines map[string][]string // file -> its lines, nil when unreadable
	// root is %SRCROOT%: opts.SrcRoot, or the directory above it that
	// holds every relative file of the log ("" when SrcRoot is).
	root string
}

// srcRootOf returns the directory that becomes %SRCROOT% for the files of
// ds, relative ones read from dir: dir, or the nearest directory above it
// that holds them all.
func srcRootOf(ds dsl.Diagnostics, dir string) string {
	if dir == "" {
		return ""
	}
	root := filepath.Clean(dir)
	hold := func(file string) {
		if file == "" || file == "-" || filepath.IsAbs(file) {
			return
		}
		abs := filepath.Join(dir, file)
		for !within(root, abs) {
			up := filepath.Dir(root)
			if up == root {
				return
			}
			root = up
		}
	}
	for _, d := range ds {
		hold(d.Pos.File)
		for _, r := range d.Related {
			hold(r.Pos.File)
		}
	}
	return root
}

// within reports whether file is dir or below it.
func within(dir, file string) bool {
	rel, err := filepath.Rel(dir, file)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// location returns the SARIF location of p; ok is false when p names no
// file.
func (w *writer) location(p dsl.Pos) (Location, bool) {
	if p.File == "" || p.File == "-" {
		return Location{}, false
	}
	loc := Location{PhysicalLocation: PhysicalLocation{ArtifactLocation: w.artifact(p.File)}}
	if p.Line > 0 {
		r := &Region{StartLine: p.Line}
		if p.Col > 0 {
			r.StartColumn = w.column(p)
		}
		loc.PhysicalLocation.Region = r
	}
	return loc, true
}

func (w *writer) artifact(file string) ArtifactLocation {
	if filepath.IsAbs(file) {
		return ArtifactLocation{URI: fileURI(file)}
	}
	if w.root != "" {
		if rel, err := filepath.Rel(w.root, filepath.Join(w.opts.SrcRoot, file)); err == nil {
			file = rel
		}
	}
	return ArtifactLocation{URI: relURI(file), URIBaseID: srcRoot}
}

// column converts p's byte column to a code-point column.
func (w *writer) column(p dsl.Pos) int {
	if w.opts.ReadFile == nil {
		return p.Col
	}
	lines, seen := w.lines[p.File]
	if !seen {
		if b, err := w.opts.ReadFile(p.File); err == nil {
			lines = strings.Split(string(b), "\n")
		}
		w.lines[p.File] = lines
	}
	if p.Line > len(lines) {
		return p.Col
	}
	line := lines[p.Line-1]
	if p.Col-1 > len(line) {
		return p.Col
	}
	return utf8.RuneCountInString(line[:p.Col-1]) + 1
}

// relURI is a relative file name as a relative URI reference.
func relURI(name string) string {
	parts := strings.Split(filepath.ToSlash(name), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// fileURI is an absolute file name as a file: URI.
func fileURI(name string) string {
	name = filepath.ToSlash(name)
	if !strings.HasPrefix(name, "/") {
		name = "/" + name // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: name}).String()
}
