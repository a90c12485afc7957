package dsl

import (
	"regexp"
	"sync"

	"cuelang.org/go/cue"

	"github.com/agentc-dev/agentc/runtime/grounding"
)

// Grounding is the grounding section.
type Grounding struct {
	Pos Pos
	// Template is render.template (nil without render), MaxTokens
	// render.max_tokens (0: no budget) and Placement render.placement.
	Template  *Expr
	MaxTokens int
	Placement string
	// Record is record_grounding; Sink the store of its audit sink.
	Record bool
	Sink   string
	// EveryTurn is reground_every_turn.
	EveryTurn bool
}

// decodeGrounding decodes the grounding section, parses its template (a
// parse error or a field the template data lacks is placed inside the
// string) and checks its sink against the declared stores.
// queryField matches a template's use of the query.
var queryField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\.Query\b`) })

func (l *loader) decodeGrounding(p *Policy, v cue.Value) {
	gv := v.LookupPath(fieldPath("grounding"))
	if !gv.Exists() {
		return
	}
	g := &Grounding{Pos: l.userPos([]string{"grounding"})}
	g.Record, _ = gv.LookupPath(fieldPath("record_grounding")).Bool()
	g.EveryTurn, _ = gv.LookupPath(fieldPath("reground_every_turn")).Bool()
	if sv := gv.LookupPath(fieldPath("sink")); sv.Exists() {
		g.Sink, _ = sv.String()
		if _, ok := p.Stores[g.Sink]; !ok && g.Sink != "default" {
			l.errorf(l.userPos([]string{"grounding", "sink"}), "schema/bad-reference", "store %q is not declared in stores%s", g.Sink, suggestName(g.Sink, keys(p.Stores)))
		}
	}
	if rv := gv.LookupPath(fieldPath("render")); rv.Exists() {
		g.Placement, _ = rv.LookupPath(fieldPath("placement")).String()
		if n, err := rv.LookupPath(fieldPath("max_tokens")).Int64(); err == nil {
			g.MaxTokens = int(n)
		}
		path := []string{"grounding", "render", "template"}
		if tv := rv.LookupPath(fieldPath("template")); tv.Exists() {
			g.Template = l.expr(path, tv)
		}
		if g.Template != nil {
			if _, err := grounding.Parse(g.Template.Source); err != nil {
				pos := g.Template.Pos
				if ge, ok := err.(*grounding.Error); ok {
					pos = g.Template.PosAt(ge.Offset)
				}
				l.errorf(pos, "schema/invalid-value", "grounding.render.template: %v", err)
			} else if loc := queryField().FindStringIndex(g.Template.Source); loc != nil && g.Placement != "before_last_user" {
				// The default placement is a system message.
				l.warnf(g.Template.PosAt(loc[0]), "schema/invalid-value",
					"grounding.render.template renders .Query, the user's own text, into a system message (placement \"system\"), where it reads with the system prompt's authority; leave .Query out of the block, or set placement: \"before_last_user\"")
			}
		}
	}
	p.Grounding = g
}
