package explain

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Formats lists the output formats Write accepts.
var Formats = []string{"text", "dot", "mermaid"}

// Write renders x in format ("text", "dot" or "mermaid"). It fails on an
// unknown format or a write error.
func Write(w io.Writer, x *Explanation, format string) error {
	switch format {
	case "text", "":
		return x.Text(w)
	case "dot":
		return x.Dot(w)
	case "mermaid":
		return x.Mermaid(w)
	}
	return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

// Text writes the explanation for a reader: per stage, the layers from the
// outermost in, each with what holds it in place, then the consequences.
func (x *Explanation) Text(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "policy %s\n", x.Policy)
	if len(x.Stages) == 0 {
		fmt.Fprintln(b, "\nno chains: every call goes straight through")
	}
	for _, st := range x.Stages {
		fmt.Fprintf(b, "\n%s chain: %d %s, outermost first\n", st.Name, len(st.Layers), plural(len(st.Layers), "layer", "layers"))
		width := 0
		for _, l := range st.Layers {
			width = max(width, len(l.Ref))
		}
		for _, l := range st.Layers {
			traits := "-"
			if len(l.Traits) > 0 {
				traits = strings.Join(l.Traits, ", ")
			}
			fmt.Fprintf(b, "  %d. %-*s  %s", l.Index+1, width, l.Ref, traits)
			if l.Pos != "" {
				fmt.Fprintf(b, "  (%s)", l.Pos)
			}
			fmt.Fprintln(b)
			indent := strings.Repeat(" ", len(fmt.Sprint(l.Index+1))+4)
			for _, s := range l.Scope {
				fmt.Fprintf(b, "%s%s\n", indent, s)
			}
			if len(l.Settings) > 0 {
				fmt.Fprintf(b, "%s%s\n", indent, strings.Join(l.Settings, "; "))
			}
			for _, st := range l.State {
				fmt.Fprintf(b, "%s%s\n", indent, st)
			}
			for _, h := range l.Held {
				fmt.Fprintf(b, "%s%s\n", indent, h.text())
			}
		}
		fmt.Fprintf(b, "     -> %s\n", st.Callee)
		if len(st.Consequences) > 0 {
			fmt.Fprintln(b, "  consequences:")
			for _, c := range st.Consequences {
				fmt.Fprintf(b, "    - %s\n", c)
			}
		}
	}
	return b.Flush()
}

func (h *Hold) text() string {
	side := "inside"
	if h.Outside {
		side = "outside"
	}
	s := fmt.Sprintf("%s %s [%s]: %s", side, h.Other, h.Rule, h.Why)
	if h.Violated {
		s = "VIOLATED: must be " + s
	}
	return s
}

// Dot writes a Graphviz digraph: one cluster per stage with the layers in
// call order down to the callee, and the constraints as dashed edges from
// the layer that must be outside to the one that must be inside (red when
// violated).
func (x *Explanation) Dot(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "digraph %s {\n", dotID(x.Policy))
	fmt.Fprintln(b, "\trankdir=TB;")
	fmt.Fprintln(b, "\tnode [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=11];")
	fmt.Fprintln(b, "\tedge [fontname=\"Helvetica\", fontsize=9];")
	for _, st := range x.Stages {
		fmt.Fprintf(b, "\tsubgraph cluster_%s {\n", st.Name)
		fmt.Fprintf(b, "\t\tlabel=%s;\n", dotString(st.Name+" chain"))
		for _, l := range st.Layers {
			attrs := ""
			if l.violated() {
				attrs = ", color=red"
			}
			fmt.Fprintf(b, "\t\t%s [label=%s%s];\n", nodeID(st.Name, l.Index), dotString(l.label(nil, "\n")), attrs)
		}
		fmt.Fprintf(b, "\t\t%s_call [label=%s, shape=ellipse, style=solid];\n", st.Name, dotString(st.Callee))
		for _, l := range st.Layers {
			next := fmt.Sprintf("%s_call", st.Name)
			if l.Index+1 < len(st.Layers) {
				next = nodeID(st.Name, l.Index+1)
			}
			fmt.Fprintf(b, "\t\t%s -> %s;\n", nodeID(st.Name, l.Index), next)
		}
		for _, e := range st.constraintEdges() {
			color := "gray40"
			if e.violated {
				color = "red"
			}
			fmt.Fprintf(b, "\t\t%s -> %s [style=dashed, color=%s, fontcolor=%s, constraint=false, label=%s];\n",
				nodeID(st.Name, e.from), nodeID(st.Name, e.to), color, color, dotString(strings.Join(e.rules, "\n")))
		}
		if len(st.Consequences) > 0 {
			fmt.Fprintf(b, "\t\t%s_notes [shape=note, style=solid, label=%s];\n", st.Name, dotString(strings.Join(st.Consequences, "\\l")+"\\l"))
			fmt.Fprintf(b, "\t\t%s_call -> %s_notes [style=invis];\n", st.Name, st.Name)
		}
		fmt.Fprintln(b, "\t}")
	}
	fmt.Fprintln(b, "}")
	return b.Flush()
}

// Mermaid writes a Mermaid flowchart of the same picture as Dot.
func (x *Explanation) Mermaid(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, "flowchart TB")
	var red []int
	link := 0
	for _, st := range x.Stages {
		fmt.Fprintf(b, "  subgraph %s[%s]\n", st.Name, mermaidString(st.Name+" chain"))
		fmt.Fprintln(b, "    direction TB")
		for _, l := range st.Layers {
			fmt.Fprintf(b, "    %s[\"%s\"]\n", nodeID(st.Name, l.Index), l.label(mermaidText, "<br/>"))
		}
		fmt.Fprintf(b, "    %s_call([%s])\n", st.Name, mermaidString(st.Callee))
		for _, l := range st.Layers {
			next := st.Name + "_call"
			if l.Index+1 < len(st.Layers) {
				next = nodeID(st.Name, l.Index+1)
			}
			fmt.Fprintf(b, "    %s --> %s\n", nodeID(st.Name, l.Index), next)
			link++
		}
		for _, e := range st.constraintEdges() {
			fmt.Fprintf(b, "    %s -.->|\"%s\"| %s\n", nodeID(st.Name, e.from), mermaidText(strings.Join(e.rules, ", ")), nodeID(st.Name, e.to))
			if e.violated {
				red = append(red, link)
			}
			link++
		}
		for _, l := range st.Layers {
			if l.violated() {
				fmt.Fprintf(b, "    style %s stroke:red\n", nodeID(st.Name, l.Index))
			}
		}
		if len(st.Consequences) > 0 {
			notes := make([]string, len(st.Consequences))
			for i, c := range st.Consequences {
				notes[i] = mermaidText(c)
			}
			fmt.Fprintf(b, "    %s_notes>\"%s\"]\n", st.Name, strings.Join(notes, "<br/>"))
		}
		fmt.Fprintln(b, "  end")
	}
	for _, i := range red {
		fmt.Fprintf(b, "  linkStyle %d stroke:red,color:red\n", i)
	}
	return b.Flush()
}

// violated reports whether a constraint holding l is broken.
func (l *Layer) violated() bool {
	for _, h := range l.Held {
		if h.Violated {
			return true
		}
	}
	return false
}

// label is the layer's box text: its ref, traits, scope, settings and
// where its state lives, each escaped (when escape is not nil) and joined
// by sep.
func (l *Layer) label(escape func(string) string, sep string) string {
	parts := []string{l.Ref}
	if len(l.Traits) > 0 {
		parts = append(parts, strings.Join(l.Traits, ", "))
	}
	parts = append(parts, l.Scope...)
	if len(l.Settings) > 0 {
		parts = append(parts, strings.Join(l.Settings, "; "))
	}
	parts = append(parts, l.State...)
	if escape != nil {
		for i := range parts {
			parts[i] = escape(parts[i])
		}
	}
	return strings.Join(parts, sep)
}

type constraintEdge struct {
	from, to int
	rules    []string
	violated bool
}

// constraintEdges returns one edge per ordered pair of layers a constraint
// holds, from the layer that must be outside to the one that must be
// inside.
func (st *Stage) constraintEdges() []constraintEdge {
	index := map[string]int{}
	for _, l := range st.Layers {
		index[l.Ref] = l.Index
	}
	var out []constraintEdge
	at := map[[2]int]int{}
	for _, l := range st.Layers {
		for _, h := range l.Held {
			if !h.Outside {
				continue
			}
			other, ok := index[h.Other]
			if !ok {
				continue // not a single layer
			}
			k := [2]int{l.Index, other}
			i, ok := at[k]
			if !ok {
				at[k] = len(out)
				out = append(out, constraintEdge{from: k[0], to: k[1]})
				i = len(out) - 1
			}
			if !contains(out[i].rules, h.Rule) {
				out[i].rules = append(out[i].rules, h.Rule)
			}
			out[i].violated = out[i].violated || h.Violated
		}
	}
	return out
}

func nodeID(stage string, i int) string { return fmt.Sprintf("%s_%d", stage, i) }

func dotID(s string) string {
	if s == "" {
		return "policy"
	}
	return dotString(s)
}

// dotString quotes s for Graphviz; "\n" becomes a centred line break and a
// literal `\l` is kept as a left-justified one.
func dotString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `\\l`, `\l`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	s = strings.ReplaceAll(s, "\n", `\n`)
	return `"` + s + `"`
}

// mermaidString quotes s as a Mermaid label.
func mermaidString(s string) string { return `"` + mermaidText(s) + `"` }

// mermaidText escapes the characters Mermaid labels cannot hold.
func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "`", "#96;", "|", "#124;", "&", "#amp;", "<", "#lt;", ">", "#gt;").Replace(s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
