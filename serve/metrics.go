package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// metrics are the server's Prometheus collectors, registered on one
// registry per server.
type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	inflight  prometheus.Gauge
	calls     prometheus.Gauge
	blocks    *prometheus.CounterVec
	retries   *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	spendUSD  *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	toolCalls *prometheus.CounterVec
	// repeated counts the calls left out of a model's answer as repeats
	// (Server.repeatedCalls).
	repeated  *prometheus.CounterVec
	storeErrs *prometheus.CounterVec
	withheld  *prometheus.GaugeVec
	// upstreamSessions counts the callers' sessions open with each
	// upstream MCP server, upstreamRefused the calls refused one past its
	// max_sessions.
	upstreamSessions *prometheus.GaugeVec
	upstreamRefused  *prometheus.CounterVec
	// listWaits counts the calls waiting for an upstream MCP server's
	// tools to be listed again (awaitListing).
	listWaits  *prometheus.GaugeVec
	registry   *prometheus.Registry
	generation prometheus.Gauge
	// own lists the server's collectors, without the Go and process
	// ones: the metrics docs/serve.md lists.
	own []prometheus.Collector
	// registered are the collectors newMetrics registered: own, and the
	// Go and process collectors unless the registry held them already.
	registered []prometheus.Collector
	// served holds the request counter and latency histogram of each
	// route, model and status seen, up to maxServedSeries of them, so that
	// a request does not look its series up by their label values.
	served  sync.Map // servedKey → *servedSeries
	nServed atomic.Int64
}

// servedKey names the series of requests a request is counted in.
type servedKey struct {
	route, model string
	code         int
}

// servedSeries are the series of requests a request is counted in.
type servedSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// maxServedSeries bounds the series metrics.served holds; past it, the
// series are looked up by their labels.
const maxServedSeries = 4096

// observeRequest counts a request of route and model (or tool) answered
// with code, after d seconds.
func (m *metrics) observeRequest(route, model string, code int, d float64) {
	k := servedKey{route, model, code}
	var ss *servedSeries
	if v, ok := m.served.Load(k); ok {
		ss = v.(*servedSeries)
	} else {
		ss = &servedSeries{m.requests.WithLabelValues(route, model, strconv.Itoa(code)), m.latency.WithLabelValues(route, model)}
		if m.nServed.Load() < maxServedSeries {
			if _, loaded := m.served.LoadOrStore(k, ss); !loaded {
				m.nServed.Add(1)
			}
		}
	}
	ss.requests.Inc()
	ss.latency.Observe(d)
}

// newMetrics registers the server's collectors on reg; bodyBytes reads
// the bytes of request bodies in flight (Server.bodyBytes). A registry
// that already holds a collector of the server's metrics (another
// server's, not closed) is an error, and nothing is left registered.
func newMetrics(reg *prometheus.Registry, bodyBytes func() int64, settled *settlements) (*metrics, error) {
	m := &metrics{
		registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_requests_total",
			Help: "HTTP requests by route, model (or tool) and status code."}, []string{"route", "model", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentc_serve_request_duration_seconds",
			Help:    "HTTP request latency by route and model (or tool), to the end of the response.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
			[]string{"route", "model"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentc_serve_requests_in_flight",
			Help: "HTTP requests being served."}),
		calls: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentc_serve_calls_in_flight",
			Help: "Chat, token count and MCP calls (POST /mcp) being served: the requests Options.MaxInFlight bounds."}),
		blocks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_blocks_total",
			Help: "Calls blocked by a policy layer, by stage and layer."}, []string{"stage", "layer"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_budget_refusals_total",
			Help: "Calls refused by a budget ceiling, by stage and layer."}, []string{"stage", "layer"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_retries_total",
			Help: "Attempts beyond the first, by stage."}, []string{"stage"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_fallbacks_total",
			Help: "Chat calls served by another model than the one requested, by requested and serving model."},
			[]string{"requested", "served"}),
		spendUSD: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_budget_spend_usd_total",
			Help: "Cost of the model calls made for the requests served (a layer's own calls included), in US dollars at the policy's prices, by tenant and model."},
			[]string{"tenant", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_tokens_total",
			Help: "Tokens of the model calls served, by tenant, model and direction (input, output)."},
			[]string{"tenant", "model", "direction"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_tool_calls_total",
			Help: "MCP tool calls by tool and outcome (ok, replayed, cached, blocked, budget, in_doubt, error); replayed and cached calls did not reach the upstream."}, []string{"tool", "outcome"}),
		repeated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_repeated_calls_dropped_total",
			Help: "Tool calls left out of a model's answer before it was relayed, as they repeat an earlier side-effecting call of the answer (the same tool and arguments), by tool."}, []string{"tool"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_store_errors_total",
			Help: "Calls that failed, or were refused before they ran, because a layer's store failed or did not answer within its timeout, by stage, layer and store."},
			[]string{"stage", "layer", "store"}),
		withheld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentc_serve_mcp_tools_withheld",
			Help: "Upstream MCP tools the policy generation served withholds, their definition blocked by a security layer, by server and layer."},
			[]string{"server", "layer"}),
		upstreamSessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentc_serve_mcp_upstream_sessions",
			Help: "Sessions open with an upstream MCP server for its callers (one per client session or per tenant, as its session field says; processes for a command server), by server. The session that lists its tools is not counted."},
			[]string{"server"}),
		upstreamRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_mcp_upstream_sessions_refused_total",
			Help: "Tool calls refused because their upstream MCP server had max_sessions sessions open, or their tenant its share of them, and the call needed another, by server."},
			[]string{"server"}),
		listWaits: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentc_serve_mcp_calls_waiting_for_list",
			Help: "Tool calls waiting for their upstream MCP server's tools to be listed again (a change it announced, a new session that lists them otherwise, a call of a tool not listed), each 30 s at most in all, by server."},
			[]string{"server"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentc_serve_reloads_total",
			Help: "Policy reloads by result (ok, failed, refused)."}, []string{"result"}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentc_serve_policy_generation",
			Help: "The number of the policy generation being served (1 at start, +1 per successful reload and per change of an upstream MCP server's tool list)."}),
	}
	bodies := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentc_serve_request_body_bytes_in_flight",
		Help: "Bytes of request bodies held by the calls in flight: what Options.MaxInFlightBytes bounds."},
		func() float64 { return float64(bodyBytes()) })
	lost := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentc_serve_meter_settlements_lost_total",
		Help: "Settlements of the server's meter charges given up sending to their ledger store (each logged with its charge): the store did not take them in time, or too many waited, or one a close stopped waiting for failed afterwards."},
		func() float64 { n, _ := settled.counts(); return float64(n) })
	unconfirmed := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentc_serve_meter_settlements_unconfirmed_total",
		Help: "Settlements of the server's meter charges still being sent to their ledger store when a close stopped waiting for them (each logged with its charge): the store may have taken them; one that then fails is counted lost too."},
		func() float64 { _, n := settled.counts(); return float64(n) })
	m.own = []prometheus.Collector{m.requests, m.latency, m.inflight, m.calls, bodies, lost, unconfirmed, m.blocks, m.refusals, m.retries,
		m.fallbacks, m.spendUSD, m.tokens, m.toolCalls, m.repeated, m.storeErrs, m.withheld, m.upstreamSessions, m.upstreamRefused, m.listWaits, m.reloads, m.generation}
	for _, c := range m.own {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("serve: Options.Registry cannot take the server's metrics (%w): it holds another server's, which Close removes, or collectors of the same names; give each server a registry of its own", err)
		}
		m.registered = append(m.registered, c)
	}
	// The host's registry may serve the Go and process metrics already
	// (collectors.NewGoCollector, NewProcessCollector): those are kept.
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if reg.Register(c) == nil {
			m.registered = append(m.registered, c)
		}
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	m.reloads.WithLabelValues("refused")
	return m, nil
}

// unregister removes from the registry the collectors newMetrics
// registered, so that another server may register its own there.
func (m *metrics) unregister() {
	for _, c := range m.registered {
		m.registry.Unregister(c)
	}
	m.registered = nil
}

// observeStoreError counts err, the failure of a call of stage, when a
// layer's store caused it (a *runtime.StoreError in it), by the layer and
// the store the layer names in the policy serving.
func (s *Server) observeStoreError(stage string, err error) {
	var se *runtime.StoreError
	if !errors.As(err, &se) {
		return
	}
	layer := runtime.LayerOf(err)
	s.metrics.storeErrs.WithLabelValues(stage, layer, layerStore(s.cur.Load().plan, plan.Stage(stage), layer)).Inc()
}

// layerStore is the store the layer named layer of stage's chain of p
// keeps its state in: the one its store, sink or index field names, else
// the default store; "" when p has no such layer.
func layerStore(p *plan.Plan, stage plan.Stage, layer string) string {
	for _, l := range p.Chains.Of(stage) {
		if l.Name != layer && (l.Name != "" || l.Use != layer) {
			continue
		}
		var c struct{ Store, Sink, Index string }
		_ = json.Unmarshal(l.Config, &c)
		for _, name := range []string{c.Store, c.Sink, c.Index} {
			if name != "" {
				return name
			}
		}
		return runtime.DefaultStore
	}
	return ""
}
