package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/serve"
)

// Server serves the pipeline of one plan over HTTP.
type Server struct {
	pl   *runtime.Pipeline
	mux  *http.ServeMux
	runs *runTracker
}

// NewServer builds the plan's pipeline with deps. It keeps at most
// defaultMaxRuns named runs open, forgetting those idle for the plan's
// settings.run_idle.
func NewServer(ctx context.Context, p *plan.Plan, deps runtime.Deps) (*Server, error) {
	idle, err := time.ParseDuration(cmp.Or(p.Settings.RunIdle, plan.DefaultRunIdle))
	if err != nil {
		return nil, fmt.Errorf("settings.run_idle: %w", err)
	}
	pl, err := runtime.Build(ctx, p, deps)
	if err != nil {
		return nil, err
	}
	s := &Server{pl: pl, mux: http.NewServeMux(), runs: newRunTracker(defaultMaxRuns, idle, pl.ExpireIdleRuns)}
	s.mux.HandleFunc("POST /v1/chat", s.chat)
	s.mux.HandleFunc("POST /v1/tools/{name}", s.tool)
	s.mux.HandleFunc("POST /v1/turn", s.turn)
	s.mux.HandleFunc("POST /v1/admit", s.admit)
	s.mux.HandleFunc("POST /v1/runs/{id}/end", s.endRun)
	return s, nil
}

// Close releases the pipeline.
func (s *Server) Close() error { return s.pl.Close() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// runContext attaches the request's run to its context: the run named by the
// X-Run-ID header, or, when the header is missing, a run of its own with a
// generated id (echoed in the response's X-Run-ID header). Anonymous requests
// thus never share per-run state (a meter's ledger, a rate limit's bucket).
// The returned end func ends a generated run once the request is done (its
// state is dropped); a named run spans requests and is ended by its caller
// (POST /v1/runs/{id}/end), or once idle for settings.run_idle. A request
// naming a new run when the service keeps defaultMaxRuns open already is
// answered 503 with Retry-After (ok false).
func (s *Server) runContext(w http.ResponseWriter, r *http.Request) (ctx context.Context, end func(), ok bool) {
	id := r.Header.Get("X-Run-ID")
	if id == "" {
		id = "anon-" + rand.Text()
		w.Header().Set("X-Run-ID", id)
		end = func() { s.pl.EndRun(id) }
	} else {
		var err error
		if end, err = s.runs.begin(id); err != nil {
			var tm *tooManyRunsError
			if errors.As(err, &tm) {
				serve.SetRetryAfter(w.Header(), tm.retryAfter)
			}
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": errorBody{Kind: "too_many_runs", Message: err.Error()}})
			return nil, nil, false
		}
	}
	return runtime.WithRun(r.Context(), runtime.Run{ID: id, Agent: "service"}), end, true
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One JSON value, nothing after it but white space: a body with
		// more is malformed, not a request to take the first value of.
		if _, terr := dec.Token(); terr != io.EOF {
			err = terr
			if err == nil {
				err = errors.New("the body holds more than one JSON value")
			}
		}
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": errorBody{Kind: "body_too_large",
				Message: fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit)}})
			return false
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": errorBody{Kind: "bad_request", Message: err.Error()}})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// chat streams the response as NDJSON. Once the first delta is written the
// status is 200; a later failure arrives as a final {"error"} line.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req runtime.ChatRequest
	if !decode(w, r, &req) {
		return
	}
	ctx, end, ok := s.runContext(w, r)
	if !ok {
		return
	}
	defer end()
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	started := false
	resp, err := s.pl.Stream(ctx, req, func(d runtime.Delta) bool {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if enc.Encode(map[string]any{"delta": d.Text}) != nil {
			return false // the client went away
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	})
	if err != nil {
		if !started {
			writeError(w, r, err, nil)
			return
		}
		if r.Context().Err() == nil {
			_ = enc.Encode(map[string]any{"error": errorOf(err)})
		}
		return
	}
	if !started {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	_ = enc.Encode(map[string]any{"done": resp})
}

func (s *Server) tool(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Args json.RawMessage `json:"args"`
	}
	if !decode(w, r, &body) {
		return
	}
	// Numbers as written (runtime.DecodeArgs), not rounded to a float64:
	// the checks and the tool see the id the client sent.
	var args map[string]any
	if len(body.Args) > 0 {
		if err := runtime.DecodeArgs(body.Args, &args); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": errorBody{Kind: "bad_request", Message: "args: " + err.Error()}})
			return
		}
	}
	ctx, end, ok := s.runContext(w, r)
	if !ok {
		return
	}
	defer end()
	res, err := s.pl.Tool(ctx, runtime.ToolRequest{Name: r.PathValue("name"), Args: args,
		IdempotencyKey: r.Header.Get("Idempotency-Key")})
	if err != nil {
		writeError(w, r, err, map[string]any{"attempts": res.Attempts})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// turn runs one agent turn through the turn chain: a chat call on the
// input, whose text is the turn's output.
func (s *Server) turn(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Input string `json:"input"`
	}
	if !decode(w, r, &body) {
		return
	}
	ctx, end, ok := s.runContext(w, r)
	if !ok {
		return
	}
	defer end()
	res, err := s.pl.Turn(ctx, runtime.TurnRequest{Input: body.Input}, func(ctx context.Context) (string, error) {
		resp, err := s.pl.Complete(ctx, runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: body.Input}}})
		if err != nil {
			return "", err
		}
		return resp.Text, nil
	})
	if err != nil {
		writeError(w, r, err, nil)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"output": res.Output})
}

func (s *Server) admit(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Items []runtime.Item `json:"items"`
	}
	if !decode(w, r, &body) {
		return
	}
	items, err := s.pl.Admit(r.Context(), body.Items)
	if items == nil {
		items = []runtime.Item{}
	}
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"admitted": items, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"admitted": items})
}

// endRun ends a run: the agent calls it once the run's last call has
// returned, so that the layers drop what they keep per run (the meter's
// ledger). A run spans many requests, so only the caller knows when it ends.
func (s *Server) endRun(w http.ResponseWriter, r *http.Request) {
	s.runs.end(r.PathValue("id"))
	s.pl.EndRun(r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}
