package serve

import (
	"encoding/json"
	"slices"

	"github.com/agentc-dev/agentc/builtins/tracing"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// warnUntraced logs one warning when p's chains the gateway runs (chat and
// tool) hold tracing layers and the server has no OpenTelemetry provider
// to give them (Options.Deps.TracerProvider unset and none installed
// globally; agentc serve installs one when an OTLP exporter is
// configured): their spans are dropped, or written to the log only for a
// layer with log: true. A reload warns again only when those layers
// differ from the last warning's. reloadMu is held.
func (s *Server) warnUntraced(p *plan.Plan) {
	var dropped, logged []string
	if !tracing.Exports(s.opts.Deps.TracerProvider) {
		for _, stage := range []plan.Stage{plan.StageChat, plan.StageTool} {
			for _, l := range p.Chains.Of(stage) {
				if l.Use != tracing.ID {
					continue
				}
				var cfg struct {
					Log bool `json:"log"`
				}
				_ = json.Unmarshal(l.Config, &cfg)
				name := string(stage) + ":" + l.Name
				if l.Name == "" {
					name = string(stage) + ":" + l.Use
				}
				if cfg.Log {
					logged = append(logged, name)
				} else {
					dropped = append(dropped, name)
				}
			}
		}
	}
	warned := append(slices.Clone(dropped), logged...)
	if slices.Equal(warned, s.untraced) {
		return
	}
	s.untraced = warned
	if len(warned) == 0 {
		return
	}
	var attrs []any
	if len(dropped) > 0 {
		attrs = append(attrs, "dropped", dropped)
	}
	if len(logged) > 0 {
		attrs = append(attrs, "logged", logged)
	}
	s.log.Warn("the policy's tracing layers export no spans: no OpenTelemetry exporter is configured "+
		"(agentc serve: set OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp; a host: Options.Deps.TracerProvider); "+
		"the spans of the layers dropped are lost, those of the layers logged are written to this log only", attrs...)
}
