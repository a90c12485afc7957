package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	_ "github.com/agentc-dev/agentc/providers/all" // the model providers of the policy's models
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/serve"
)

func cmdServe(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "serve")
	listen := fs.String("listen", "127.0.0.1:8080", "`ADDR` to listen on, HOST:PORT (:PORT listens on every interface)")
	shutdown := fs.Duration("grace", 10*time.Second, "how long requests in flight may finish at SIGTERM")
	drain := fs.Duration("drain", 0, "at SIGTERM, how long /readyz answers 503 while requests are still accepted, before the listener closes")
	watch := fs.Duration("watch", time.Second, "how often the policy files are checked for changes (0: never)")
	runIdle := fs.Duration("idle", 15*time.Minute, "end a named run after this long without a request")
	maxBody := fs.Int64("maxbody", 4<<20, "largest request body, in bytes")
	maxResult := fs.Int64("maxresult", 4<<20, "largest result of an upstream MCP tool call, in bytes")
	maxMessages := fs.Int("maxmessages", serve.DefaultMaxMessages, "most messages of a chat request (more: 400; 0: no bound)")
	maxParts := fs.Int("maxparts", serve.DefaultMaxParts, "most content parts, blocks and tool calls of a chat request (more: 400; 0: no bound)")
	maxToolCalls := fs.Int("maxtoolcalls", runtime.DefaultAgentMaxToolCalls, "most tool calls of one model answer relayed, as an agent run's bound (more: 502, none relayed)")
	maxInFlight := fs.Int("maxinflight", serve.DefaultMaxInFlight, "most chat, token count and MCP calls served at once (more: 503 with Retry-After; 0: no bound)")
	maxInFlightTenant := fs.Int("maxinflighttenant", 0, "most of those calls one tenant is served at once, where the keys name more than one tenant (more: 503 with Retry-After; 0: half of -maxinflight)")
	maxInFlightBytes := fs.Int64("maxinflightbytes", serve.DefaultMaxInFlightBytes, "most bytes of request bodies held at once by chat, token count and MCP calls (more: 503 with Retry-After; 0: no bound)")
	maxInFlightBytesTenant := fs.Int64("maxinflightbytestenant", 0, "most of those bytes one tenant holds at once, where the keys name more than one tenant (more: 503 with Retry-After; 0: half of -maxinflightbytes, at least -maxbody)")
	maxRuns := fs.Int("maxruns", 10000, "named runs a tenant keeps (more: its runs idle the longest end)")
	maxSessions := fs.Int("maxsessions", 1000, "MCP sessions a key keeps open (more: those used the longest ago are closed)")
	logFormat := fs.String("log", "text", "access and server log format: text or json")
	allowReset := fs.Bool("allowreset", false, "apply a reload whose change starts idempotency records afresh (calls made before it would run again if repeated); without it such a reload is refused")
	metricsAddr := fs.String("metrics", "", "serve /metrics, /healthz and /readyz on this `ADDR` (HOST:PORT, an internal one), and /metrics no longer on -listen")
	cacheUsage := fs.String("cacheusage", "auto", "whether the prompt-cache figures of a call's usage reach the client: auto (withheld when the keys name more than one tenant), report or withhold")
	keyless := fs.Bool("keyless", false, "serve a policy that declares no keys on an address other than a loopback one (every caller that reaches it is served); without it such a policy is refused, at start and at a reload")
	var allowHosts hostNames
	fs.Var(&allowHosts, "allowhost", "a host `NAME` requests may name in their Host header besides localhost and IP addresses, checked on loopback connections and, under a policy without keys, on every connection (repeatable)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	for _, a := range []struct{ flag, addr string }{{"-listen", *listen}, {"-metrics", *metricsAddr}} {
		if err := checkListenAddr(a.addr); a.addr != "" && err != nil {
			return fail(env, "serve: %s %s: %v (want HOST:PORT, such as 127.0.0.1:8080)", a.flag, a.addr, err)
		}
	}
	if *drain < 0 {
		return fail(env, "serve: -drain must not be negative")
	}
	if *maxRuns < 1 || *maxSessions < 1 {
		return fail(env, "serve: -maxruns and -maxsessions must be at least 1")
	}
	if *maxToolCalls < 1 {
		return fail(env, "serve: -maxtoolcalls must be at least 1, got %d (an answer of more calls fails with a 502)", *maxToolCalls)
	}
	if *maxMessages < 0 || *maxParts < 0 || *maxInFlight < 0 || *maxInFlightBytes < 0 {
		return fail(env, "serve: -maxmessages, -maxparts, -maxinflight and -maxinflightbytes must not be negative (0: no bound)")
	}
	if *maxInFlightTenant < 0 || *maxInFlightBytesTenant < 0 {
		return fail(env, "serve: -maxinflighttenant and -maxinflightbytestenant must not be negative (0: half of -maxinflight, of -maxinflightbytes)")
	}
	// 0 is no bound, which Options reads as the default.
	unbounded := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	if *maxInFlightBytes == 0 {
		*maxInFlightBytes = -1 // no bound
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(env.stderr, nil)
	case "json":
		handler = slog.NewJSONHandler(env.stderr, nil)
	default:
		return fail(env, "serve: -log must be text or json, got %q", *logFormat)
	}
	logger := slog.New(handler)
	// OpenTelemetry's own lines (an exporter's configuration it cannot
	// read) go to the log, scrubbed, from the start.
	otel.SetLogger(otelLogger(handler))
	redis.LogTo(logger)
	postgres.LogTo(logger)
	if *watch == 0 {
		*watch = -1
	}
	// The first SIGINT or SIGTERM starts the graceful shutdown (ctx ends);
	// a second one stops at once (srv.Abort). Only the signals count: ctx
	// ending from outside is not a first signal.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan struct{})
	defer close(served)
	second := make(chan struct{})
	go func() {
		for n := 0; n < 2; n++ {
			select {
			case sig := <-sigs:
				if n == 0 {
					logger.Info("shutting down; a second signal stops at once", "signal", sig.String())
					stop()
				} else {
					logger.Warn("second signal: stopping at once", "signal", sig.String())
					close(second)
				}
			case <-served:
				return
			}
		}
	}()
	// The tracing layers' spans go to an OTLP exporter when the OTEL_*
	// variables configure one; the batch still held is sent when the
	// command ends. The provider outlives the generations a reload
	// retires: their calls still running end their spans into it.
	var deps runtime.Deps
	tp, flush, err := startTracing(ctx, os.Getenv, logger)
	if err != nil {
		return fail(env, "serve: %v", err)
	}
	defer flush()
	if tp != nil {
		deps.TracerProvider = tp
	}
	// OTEL_PROPAGATORS=none turns W3C Trace Context off: no caller's
	// traceparent is read, and none is sent upstream.
	noTraceContext, ignoredPropagators := propagators(os.Getenv)
	if ignoredPropagators != nil {
		logger.Warn("tracing: OTEL_PROPAGATORS names propagators agentc does not run; it reads and sends W3C Trace Context only", "ignored", strings.Join(ignoredPropagators, ","))
	}
	serve.PoolUpstreamConnections(256)
	srv, err := serve.New(ctx, serve.Options{
		Deps:   deps,
		Source: policySource(fs.Arg(0), env, logger), Logger: logger,
		ShutdownTimeout: *shutdown, DrainDelay: *drain, WatchInterval: *watch, RunIdle: *runIdle, MaxBodyBytes: *maxBody,
		MaxToolResultBytes: *maxResult, MaxRuns: *maxRuns, MaxSessions: *maxSessions,
		MaxMessages: unbounded(*maxMessages), MaxParts: unbounded(*maxParts), MaxToolCalls: *maxToolCalls, MaxInFlight: unbounded(*maxInFlight),
		MaxInFlightBytes: *maxInFlightBytes, MaxInFlightPerTenant: *maxInFlightTenant,
		MaxInFlightBytesPerTenant: *maxInFlightBytesTenant,
		MetricsElsewhere:          *metricsAddr != "", AllowStateReset: *allowReset, AllowHosts: allowHosts,
		RequireKeys: !*keyless && !serve.LoopbackAddr(*listen), CacheUsage: serve.CacheUsage(*cacheUsage),
		NoTraceContext: noTraceContext,
	})
	if oe := (*serve.OptionsError)(nil); errors.As(err, &oe) {
		return fail(env, "%v", err) // the options' error, not the policy's
	}
	if err != nil {
		if place := servePlace(env, fs.Arg(0), err); place != "" {
			return fail(env, "%s: serve %s: %v", place, fs.Arg(0), err)
		}
		return fail(env, "serve %s: %v", fs.Arg(0), err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = srv.Close()
		return fail(env, "serve: %s", listenError("-listen", *listen, err))
	}
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			_ = ln.Close()
			_ = srv.Close()
			return fail(env, "serve: %s", listenError("-metrics", *metricsAddr, err))
		}
		ops := srv.OpsHTTPServer()
		logger.Info("serving metrics", "addr", mln.Addr().String())
		go func() { _ = ops.Serve(mln) }()
		defer ops.Close()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: reloading")
				_ = srv.Reload(ctx)
			}
		}
	}()
	go func() {
		select {
		case <-second:
			srv.Abort()
		case <-served:
		}
	}()
	if err := srv.Serve(ctx, ln); errors.Is(err, serve.ErrAborted) {
		fmt.Fprintln(env.stderr, "agentc: serve: stopped at once by a second signal; the requests in flight were cut")
		return exitProblems
	} else if err != nil {
		return fail(env, "serve: %v", err)
	}
	return exitOK
}

// listenError says why the address of flag could not be listened on, and
// for an address in use what to do about it.
func listenError(flag, addr string, err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Sprintf("%s %s: another process listens there (an agentc serve still running?): stop it, or give %s another address", flag, addr, flag)
	}
	return fmt.Sprintf("%s: %v", flag, err)
}

// checkListenAddr reports what is wrong with a listen address before the
// policy loads: a missing or invalid port (a port alone, "8080", is not an
// address; ":8080" listens on every interface).
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return errors.New(ae.Err)
		}
		return err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil && strings.Trim(port, "0123456789") == "" && port != "" {
		return fmt.Errorf("invalid port %s", port)
	}
	return nil
}

// hostNames is a repeatable flag's values.
type hostNames []string

func (h *hostNames) String() string { return strings.Join(*h, ",") }

func (h *hostNames) Set(v string) error {
	if err := serve.CheckHostName(v); err != nil {
		return err
	}
	*h = append(*h, v)
	return nil
}

// policySource loads the policy at path for the server: a compiled plan
// (.json) as it is, a policy through the compiler, whose warnings are
// logged and whose errors fail the load with every diagnostic.
// servePlace returns the position of the layer that did not build (a
// store it opens that cannot be, a setting it refuses) when err is such a
// failure of the policy at path, relative to the working directory as
// agentc test and prove place it; "" otherwise. A compiled plan's
// positions are its policy's, written as they were.
func servePlace(env *cliEnv, path string, err error) string {
	var le *runtime.LayerError
	if !errors.As(err, &le) || le.Pos == "" {
		return ""
	}
	if strings.HasSuffix(path, ".json") {
		return le.Pos
	}
	return placeIn(env, policyDir(path), le.Pos)
}

func policySource(path string, env *cliEnv, logger *slog.Logger) serve.Source {
	// Until a load succeeds the errors end the command: on a terminal they
	// are shown with their source lines, as agentc vet shows them. A
	// reload's go to the log, a line each.
	started := false
	return serve.SourceFunc(func(ctx context.Context) (*serve.Loaded, error) {
		dir := policyDir(path)
		if strings.HasSuffix(path, ".json") {
			p, err := plan.Load(path)
			if err == nil {
				err = clientless(p)
			}
			if err != nil {
				return &serve.Loaded{Files: []string{path}}, err
			}
			return &serve.Loaded{Plan: p, Dir: dir, Files: []string{path}}, nil
		}
		c, err := compiler.Compile(ctx, []string{path}, compiler.Options{})
		if err != nil {
			return nil, err
		}
		ds := c.Diagnostics.Relative(env.wd).Sort()
		var errs []string
		src := &sources{wd: env.wd}
		for _, d := range ds {
			if d.Severity == dsl.Error {
				if env.excerpts && !started {
					errs = append(errs, withExcerpt(src, d))
				} else {
					errs = append(errs, d.String())
				}
			} else {
				logger.Warn("policy", "diagnostic", d.String())
			}
		}
		if c.Plan == nil {
			if len(errs) == 0 {
				errs = append(errs, "the policy did not compile")
			}
			return nil, errors.New(strings.Join(errs, "\n"))
		}
		if err := clientless(c.Plan); err != nil {
			return nil, err
		}
		ld := &serve.Loaded{Plan: c.Plan, Dir: dir}
		if c.Policy != nil {
			ld.Files = c.Policy.Files
			ld.Dir = c.Policy.Dir
		}
		// The log names the plan's positions as the diagnostics name
		// their files: from the working directory.
		ld.PosDir = rel(env, ld.Dir)
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			ld.WatchDirs = []string{filepath.Clean(path)}
		}
		started = true
		return ld, nil
	})
}

// clientless refuses a plan with a model that declares no provider: the
// command has no client of its own to give such a model, so every request
// for it would fail.
func clientless(p *plan.Plan) error {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(p.Models)) {
		if p.Models[name].Provider == "" {
			names = append(names, strconv.Quote(name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) > 1 {
		return fmt.Errorf("models %s declare no provider: agentc serve has no client for them (give each provider, model and api_key_env: docs/providers.md)", strings.Join(names, ", "))
	}
	return fmt.Errorf("model %s declares no provider: agentc serve has no client for it (give it provider, model and api_key_env: docs/providers.md)", names[0])
}
