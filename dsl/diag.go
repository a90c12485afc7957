package dsl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pos is a position in a policy file: 1-based line and column. The zero Pos
// means "no position".
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// IsValid reports whether p names a place in a file.
func (p Pos) IsValid() bool { return p.File != "" && p.Line > 0 }

// String formats p as file:line:col.
func (p Pos) String() string {
	if !p.IsValid() {
		if p.File != "" {
			return QuoteFile(p.File)
		}
		return "-"
	}
	return fmt.Sprintf("%s:%d:%d", QuoteFile(p.File), p.Line, p.Col)
}

// QuoteFile returns name as it is when it prints safely on one line, and
// Go-quoted otherwise: a name holding a control byte (a newline, an escape
// sequence), invalid UTF-8 or a leading quote would break the
// "file:line:col: ..." line format or the terminal.
func QuoteFile(name string) string {
	if !utf8.ValidString(name) || strings.HasPrefix(name, `"`) {
		return strconv.Quote(name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(name)
		}
	}
	return name
}

// Before orders positions by file, line and column.
func (p Pos) Before(q Pos) bool {
	if p.File != q.File {
		return p.File < q.File
	}
	if p.Line != q.Line {
		return p.Line < q.Line
	}
	return p.Col < q.Col
}

// Severity of a diagnostic.
type Severity string

// The severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Related is a secondary position of a diagnostic, such as the other layer of
// an ordering violation.
type Related struct {
	Pos     Pos    `json:"pos"`
	Message string `json:"message"`
}

// Diagnostic is one problem found in a policy. Rule is a stable id such as
// "schema/unknown-field"; tests and tools match on it, never on Message.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Rule     string
	Message  string
	Related  []Related
}

// Diagnostics is a list of problems.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Count returns the number of errors and warnings.
func (ds Diagnostics) Count() (errs, warns int) {
	for _, d := range ds {
		if d.Severity == Error {
			errs++
		} else {
			warns++
		}
	}
	return errs, warns
}

// Sort orders ds by position, then rule id, then message, and drops exact
// duplicates.
func (ds Diagnostics) Sort() Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Pos != b.Pos {
			return a.Pos.Before(b.Pos)
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Message < b.Message
	})
	out := ds[:0]
	for i, d := range ds {
		if i > 0 && d.Pos == ds[i-1].Pos && d.Rule == ds[i-1].Rule && d.Message == ds[i-1].Message {
			continue
		}
		out = append(out, d)
	}
	return out
}

// Relative rewrites every file name to be relative to dir when it lies below
// it; other names are kept as they are.
func (ds Diagnostics) Relative(dir string) Diagnostics {
	rel := func(p Pos) Pos {
		if p.File == "" || !filepath.IsAbs(p.File) {
			return p
		}
		if r, err := filepath.Rel(dir, p.File); err == nil && !strings.HasPrefix(r, "..") {
			p.File = r
		}
		return p
	}
	for i := range ds {
		ds[i].Pos = rel(ds[i].Pos)
		for j := range ds[i].Related {
			ds[i].Related[j].Pos = rel(ds[i].Related[j].Pos)
		}
	}
	return ds
}

// String formats d as "file:line:col: severity rule-id: message", with
// related positions on indented lines below.
func (d Diagnostic) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s: %s", d.Pos, d.Severity, d.Rule, d.Message)
	for _, r := range d.Related {
		fmt.Fprintf(&b, "\n\t%s: %s", r.Pos, r.Message)
	}
	return b.String()
}

// Error makes a Diagnostic usable as an error.
func (d Diagnostic) Error() string { return d.String() }

// jsonDiagnostic is the JSON form fixed by the CLI contract.
type jsonDiagnostic struct {
	File     string    `json:"file"`
	Line     int       `json:"line"`
	Col      int       `json:"col"`
	Severity Severity  `json:"severity"`
	Rule     string    `json:"rule"`
	Message  string    `json:"message"`
	Related  []Related `json:"related,omitempty"`
}

// MarshalJSON encodes d as {"file","line","col","severity","rule","message"}
// (plus "related" when there are related positions), without HTML escaping.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jsonDiagnostic{d.Pos.File, d.Pos.Line, d.Pos.Col, d.Severity, d.Rule, d.Message, d.Related}); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (d *Diagnostic) UnmarshalJSON(b []byte) error {
	var j jsonDiagnostic
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Diagnostic{Pos{j.File, j.Line, j.Col}, j.Severity, j.Rule, j.Message, j.Related}
	return nil
}

// Errorf returns an error diagnostic at pos.
func Errorf(pos Pos, rule, format string, args ...any) Diagnostic {
	return Diagnostic{Pos: pos, Severity: Error, Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// Warnf returns a warning diagnostic at pos.
func Warnf(pos Pos, rule, format string, args ...any) Diagnostic {
	return Diagnostic{Pos: pos, Severity: Warning, Rule: rule, Message: fmt.Sprintf(format, args...)}
}
