package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// Checkpoint is one saved version of a run: its transcript, its tool
// results and its state fields, numbered from 1 per run.
type Checkpoint struct {
	RunID   string    `json:"run_id"`
	Version int       `json:"version"`
	Status  RunStatus `json:"status"`
	Time    time.Time `json:"time"`
	// Transcript is the run's transcript after its latest agent turn
	// (RunAgent) or as the host recorded it (RecordTranscript).
	Transcript []Message `json:"transcript,omitempty"`
	// Tools are the run's tool results, in the order they returned.
	Tools []ToolRecord `json:"tools,omitempty"`
	// Calls records when the run's latest agent turn recorded its tool
	// calls, before any of them ran (nil: none, or a checkpoint of an
	// earlier version).
	Calls *CallIntent `json:"calls,omitempty"`
	// Fields are the run's state fields.
	Fields map[string]any `json:"fields,omitempty"`
	// Keep, when above 0, bounds the versions of the run a save leaves in
	// the store: SaveCheckpoint deletes those older than the latest Keep
	// with the version it stores. 0 keeps every version. It is an
	// instruction to the save, never stored (a checkpoint read back has 0).
	Keep int `json:"-"`
}

// DefaultCheckpointKeep is how many versions of a run a save leaves in the
// store when neither the checkpoint layer's keep nor Checkpointer.WithKeep
// says otherwise: the latest and the nine before it.
const DefaultCheckpointKeep = 10

// CheckpointStore is the checkpoint port of a store. Implementations must
// be safe for concurrent use, and across the processes that share the
// store for the kinds that are shared.
type CheckpointStore interface {
	// SaveCheckpoint stores cp as the run's next version (its latest plus
	// one, atomically) and returns that version. When the run's latest
	// version is terminal nothing is stored and the error wraps a
	// *TerminalRunError (a run that ended stays ended). When cp.Version is
	// above 0 the save is conditional: it is stored as that version only
	// if the run's latest is the one before it (none, for version 1);
	// otherwise nothing is stored and the error wraps a
	// *CheckpointConflictError (another process saved the run meanwhile).
	// When cp.Keep is above 0 the save also deletes the run's versions
	// older than the latest cp.Keep (the one it stores among them), in the
	// same transaction: a run never has more than cp.Keep versions after
	// a save, and its latest is never deleted. Version numbers go on
	// increasing; a deleted version is absent from CheckpointAt and
	// CheckpointVersions.
	SaveCheckpoint(ctx context.Context, cp Checkpoint) (int, error)
	// LatestCheckpoint returns the run's highest version.
	LatestCheckpoint(ctx context.Context, runID string) (Checkpoint, bool, error)
	// CheckpointAt returns one version of the run.
	CheckpointAt(ctx context.Context, runID string, version int) (Checkpoint, bool, error)
	// CheckpointVersions lists the run's versions, ascending: consecutive
	// numbers, from 1 unless the older ones were pruned (cp.Keep).
	CheckpointVersions(ctx context.Context, runID string) ([]int, error)
	// DeleteCheckpoints removes every version of the run; a run without
	// any is not an error.
	DeleteCheckpoints(ctx context.Context, runID string) error
}

// MarshalCheckpoint returns the JSON a store keeps of cp: without its
// version, which the store numbers and keeps beside it.
func MarshalCheckpoint(cp Checkpoint) ([]byte, error) {
	cp.Version = 0
	b, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint of run %s: %w", cp.RunID, err)
	}
	return b, nil
}

// UnmarshalCheckpoint decodes what MarshalCheckpoint wrote and stamps the
// version the store kept. A property this build does not know (a
// checkpoint a later build wrote) is an error rather than left out: a run
// resumed without it would lose it at its next save.
func UnmarshalCheckpoint(data []byte, version int) (Checkpoint, error) {
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&cp)
	if err == nil && dec.More() {
		err = errors.New("data after the checkpoint's JSON")
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("decode checkpoint version %d: %w", version, err)
	}
	cp.Version = version
	return cp, nil
}

// UnmarshalStoredCheckpoint is UnmarshalCheckpoint for a store that keeps
// the version's status beside its JSON (the column its saves check): the
// two must agree, or the checkpoint is corrupt.
func UnmarshalStoredCheckpoint(data []byte, version int, status string) (Checkpoint, error) {
	cp, err := UnmarshalCheckpoint(data, version)
	if err == nil && string(cp.Status) != status {
		err = fmt.Errorf("checkpoint version %d of run %s is corrupt: its status is %q, its data's %q", version, cp.RunID, status, cp.Status)
	}
	return cp, err
}

// UnmarshalJSON decodes a checkpoint as encoding/json does, but its Fields
// as DecodeArgs decodes numbers: a state field holding an integer above
// 2^53 reads back as the int64 it held, not as a float64 neighbour. A
// property this build does not know is an error (UnmarshalCheckpoint).
func (cp *Checkpoint) UnmarshalJSON(b []byte) error {
	type plain Checkpoint
	v := struct {
		*plain
		Fields map[string]json.RawMessage `json:"fields,omitempty"`
	}{plain: (*plain)(cp)}
	cp.Fields = nil
	if err := decodeKnown(b, &v); err != nil {
		return err
	}
	if v.Fields == nil {
		return nil
	}
	cp.Fields = make(map[string]any, len(v.Fields))
	for k, raw := range v.Fields {
		var f any
		if err := DecodeArgs(raw, &f); err != nil {
			return fmt.Errorf("field %s: %w", k, err)
		}
		cp.Fields[k] = f
	}
	return nil
}

// SecretError is why a checkpoint was refused: the value at Path (a JSON
// path into the checkpoint: "fields.api_token", "transcript[3].content",
// "tools[0].result.token") is secret and would be persisted in clear.
type SecretError struct {
	Path string
}

// Error implements error.
func (e *SecretError) Error() string {
	return fmt.Sprintf("%s holds a secret value in clear; a checkpoint never persists one (redact it first)", e.Path)
}

// TerminalRunError is why Resume refused a run, or a store refused to save
// a new version of it: its latest checkpoint says it ended.
type TerminalRunError struct {
	RunID   string
	Status  RunStatus
	Version int
}

// Error implements error.
func (e *TerminalRunError) Error() string {
	return fmt.Sprintf("run %s is %s (checkpoint version %d); a run in a terminal state is neither resumed nor saved again", e.RunID, e.Status, e.Version)
}

// CheckpointConflictError is why a store refused a conditional save: the
// saving process last saw (saved or resumed) version Want-1 of the run, but
// the run's latest version is Latest: another process resumed the run and
// saved it since. The process no longer holds the run; a turn refused so
// ends before its tool calls run.
type CheckpointConflictError struct {
	RunID  string
	Want   int
	Latest int
}

// Error implements error.
func (e *CheckpointConflictError) Error() string {
	if e.Latest < e.Want-1 {
		return fmt.Sprintf("run %s has checkpoint version %d, not %d as this process last saw it (its versions were deleted); resume it again to carry on",
			e.RunID, e.Latest, e.Want-1)
	}
	if e.Want == 1 {
		return fmt.Sprintf("run %s: another process saved version %d of it, or this one did before the run's state was dropped (EndRun, run_idle), and this process did not resume it; resume it to carry on from there",
			e.RunID, e.Latest)
	}
	return fmt.Sprintf("run %s: another process saved version %d of it since this one saved or resumed version %d; the run is no longer this process's (resume it again to take it over)",
		e.RunID, e.Latest, e.Want-1)
}

// SaveRefusal is the error of a store that refused to save cp, the run's
// latest version being latest (0: none) of status: a *TerminalRunError when
// that status is terminal, else a *CheckpointConflictError.
func SaveRefusal(cp Checkpoint, latest int, status RunStatus) error {
	if status.Terminal() {
		return &TerminalRunError{RunID: cp.RunID, Status: status, Version: latest}
	}
	return &CheckpointConflictError{RunID: cp.RunID, Want: cp.Version, Latest: latest}
}

// ErrNoCheckpoint is returned by Resume for a run without a checkpoint.
var ErrNoCheckpoint = errors.New("no checkpoint")

// ErrCheckpointPruned is wrapped by the error of Checkpointer.At for a
// version a save deleted (the store keeps the latest versions of a run only,
// Checkpoint.Keep).
var ErrCheckpointPruned = errors.New("checkpoint version pruned")

// LayerCheckpoint names the checkpoint refusals: a secret in clear, a
// terminal run.
const LayerCheckpoint = "checkpoint"

// Checkpointer saves and restores the runs of a pipeline in one checkpoint
// store. It is safe for concurrent use.
type Checkpointer struct {
	pl    *Pipeline
	store CheckpointStore
	// name is the store's name; keep the versions a save leaves (below
	// 0: the pipeline's for the store, see Keep).
	name string
	keep int
}

// Checkpointer returns the checkpointer of the store named store ("" is
// the default store): Deps.Checkpoints for the default store when set,
// else the store the policy declares (opened once), else an in-memory one.
// It turns on the recording of the runs' transcripts and tool results.
func (pl *Pipeline) Checkpointer(store string) (*Checkpointer, error) {
	cs, err := resolvePort(context.Background(), pl, "checkpoint store", store, nil, pl.deps.Checkpoints, pl.deps.Checkpoints != nil)
	if err != nil {
		return nil, err
	}
	pl.recordRuns.Store(true)
	return &Checkpointer{pl: pl, store: cs, name: StoreName(store), keep: -1}, nil
}

// Checkpoints returns the checkpointer of the store named store, resolved
// as Pipeline.Checkpointer does.
func (b *BuildContext) Checkpoints(store string) (*Checkpointer, error) {
	cs, err := resolvePort(b.Context, b.p, "checkpoint store", store, nil, b.p.deps.Checkpoints, b.p.deps.Checkpoints != nil)
	if err != nil {
		return nil, err
	}
	b.p.recordRuns.Store(true)
	return &Checkpointer{pl: b.p, store: cs, name: StoreName(store), keep: -1}, nil
}

// KeepCheckpoints declares that the saves of the pipeline's runs in the
// checkpoint store named store leave the latest n versions of a run (0:
// every version), as a checkpoint layer's keep does; the pipeline's
// checkpointers of that store save so (Checkpointer.Keep). It is called
// during Provision only.
func (b *BuildContext) KeepCheckpoints(store string, n int) {
	if b.p.checkpointKeep == nil {
		b.p.checkpointKeep = map[string]int{}
	}
	b.p.checkpointKeep[StoreName(store)] = n
}

// StoreName is the name of a store, "" being the default store.
func StoreName(store string) string {
	if store == "" {
		return DefaultStore
	}
	return store
}

// Store returns the checkpointer's store.
func (c *Checkpointer) Store() CheckpointStore { return c.store }

// WithKeep returns a checkpointer of the same store whose saves leave the
// latest n versions of a run (0: every version; below 0: as the checkpointer
// the pipeline returns, see Keep).
func (c *Checkpointer) WithKeep(n int) *Checkpointer {
	cc := *c
	cc.keep = max(n, -1)
	return &cc
}

// Keep returns how many versions of a run a save leaves in the store (0:
// every version): the checkpointer's own (WithKeep), else the keep of the
// pipeline's checkpoint layer on the store (KeepCheckpoints), else
// DefaultCheckpointKeep.
func (c *Checkpointer) Keep() int {
	if c.keep >= 0 {
		return c.keep
	}
	if n, ok := c.pl.checkpointKeep[c.name]; ok {
		return n
	}
	return DefaultCheckpointKeep
}

// Save saves the run ctx carries as its next version with status running,
// and returns it. A secret value in clear refuses the save with a
// *BlockedError of layer LayerCheckpoint wrapping a *SecretError that
// names its path, and a run whose latest version is terminal with one
// wrapping a *TerminalRunError; nothing is written then.
func (c *Checkpointer) Save(ctx context.Context) (Checkpoint, error) {
	return c.save(ctx, RunRunning)
}

// Finish saves the run ctx carries with a terminal status (RunDone,
// RunFailed, RunCancelled): Resume refuses it from then on.
func (c *Checkpointer) Finish(ctx context.Context, status RunStatus) (Checkpoint, error) {
	if !status.Terminal() {
		return Checkpoint{}, fmt.Errorf("checkpoint: status %q is not terminal (done, failed, cancelled)", status)
	}
	return c.save(ctx, status)
}

func (c *Checkpointer) save(ctx context.Context, status RunStatus) (Checkpoint, error) {
	run := RunOf(ctx)
	if run.ID == "" {
		return Checkpoint{}, errors.New("checkpoint: the context carries no run id (use WithRun)")
	}
	if run.own {
		// A call made without a run got a run of its own that ends with
		// it: no one could resume it, so nothing is saved.
		return Checkpoint{}, nil
	}
	s := c.pl.runState(run.ID)
	// One save of the run at a time: each is the version after the one
	// this process last saved or resumed, and its snapshot holds what the
	// saves before it held.
	defer lockSaves(s)()
	s.mu.Lock()
	base := s.version
	s.mu.Unlock()
	cp, err := c.pl.snapshot(run.ID, s, status)
	if err != nil {
		return Checkpoint{}, err
	}
	cp.Version = base + 1
	cp.Keep = c.Keep()
	v, err := c.store.SaveCheckpoint(ctx, cp)
	var (
		te *TerminalRunError
		ce *CheckpointConflictError
	)
	if errors.As(err, &te) {
		return Checkpoint{}, &BlockedError{Layer: LayerCheckpoint, Message: "the run is not saved", Err: te}
	}
	if errors.As(err, &ce) {
		return Checkpoint{}, &BlockedError{Layer: LayerCheckpoint, Message: "the run is not saved", Err: ce}
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: save run %s: %w", run.ID, StoreFailed(err))
	}
	cp.Version, cp.Keep = v, 0
	s.mu.Lock()
	s.version, s.status = v, status
	s.mu.Unlock()
	return cp, nil
}

// CheckpointHeads is implemented by a CheckpointStore that reads where a
// run stands, its latest version and that version's status, without
// reading the version's data (Checkpointer.Check). A store without it is
// read with LatestCheckpoint.
type CheckpointHeads interface {
	// LatestCheckpointHead returns the number and status of the run's
	// latest version (false: the run has none).
	LatestCheckpointHead(ctx context.Context, runID string) (version int, status RunStatus, ok bool, err error)
}

// Check returns nil when this process holds the run ctx carries, as its
// next save would find it: the run's latest version in the store is the
// one this process last saved or resumed (or the run has none, and this
// process neither saved nor resumed it), and it is not terminal. Else it
// returns the refusal that save would get, a *BlockedError of layer
// LayerCheckpoint wrapping a *TerminalRunError (the run ended, here or in
// another process) or a *CheckpointConflictError (another process saved
// the run since, or this one never resumed it), without writing anything;
// a store that could not be read fails with its error. A checkpoint layer
// checks so before each turn (BuildContext.OnTurnStart), so that a turn
// of a run this process no longer holds is refused before its model is
// called or its tools run. A call made without a run id has nothing to
// check. One round trip: the store's LatestCheckpointHead when it has one
// (CheckpointHeads), else its LatestCheckpoint.
func (c *Checkpointer) Check(ctx context.Context) error {
	run := RunOf(ctx)
	if run.ID == "" || run.own {
		return nil
	}
	base := 0
	if s := c.pl.lookupRunState(run.ID); s != nil {
		// A save of the run under way here ends first: the version
		// compared is the one it leaves.
		defer lockSaves(s)()
		s.mu.Lock()
		base = s.version
		s.mu.Unlock()
	}
	var (
		latest int
		status RunStatus
		ok     bool
		err    error
	)
	if h, has := c.store.(CheckpointHeads); has {
		latest, status, ok, err = h.LatestCheckpointHead(ctx, run.ID)
	} else {
		var cp Checkpoint
		cp, ok, err = c.store.LatestCheckpoint(ctx, run.ID)
		latest, status = cp.Version, cp.Status
	}
	if err != nil {
		return fmt.Errorf("checkpoint: read run %s: %w", run.ID, err)
	}
	if !ok {
		latest, status = 0, ""
	}
	switch {
	case status.Terminal():
		te := &TerminalRunError{RunID: run.ID, Status: status, Version: latest}
		return &BlockedError{Layer: LayerCheckpoint, Message: "the turn is not run", Err: te}
	case latest != base:
		ce := &CheckpointConflictError{RunID: run.ID, Want: base + 1, Latest: latest}
		return &BlockedError{Layer: LayerCheckpoint, Message: "the turn is not run", Err: ce}
	}
	return nil
}

// Latest returns the run's latest checkpoint.
func (c *Checkpointer) Latest(ctx context.Context, runID string) (Checkpoint, bool, error) {
	return c.store.LatestCheckpoint(ctx, runID)
}

// At returns version v of the run. A version the run no longer has because
// a save deleted it (Keep) is not found, with an error wrapping
// ErrCheckpointPruned that names the oldest version kept.
func (c *Checkpointer) At(ctx context.Context, runID string, v int) (Checkpoint, bool, error) {
	cp, ok, err := c.store.CheckpointAt(ctx, runID, v)
	if ok || err != nil || v < 1 {
		return cp, ok, err
	}
	vs, err := c.store.CheckpointVersions(ctx, runID)
	if err != nil {
		return Checkpoint{}, false, err
	}
	if len(vs) > 0 && v < vs[0] {
		return Checkpoint{}, false, fmt.Errorf("checkpoint: run %s has no version %d: %w (the store keeps its latest versions only, %d to %d)",
			runID, v, ErrCheckpointPruned, vs[0], vs[len(vs)-1])
	}
	return Checkpoint{}, false, nil
}

// Versions lists the run's versions, ascending.
func (c *Checkpointer) Versions(ctx context.Context, runID string) ([]int, error) {
	return c.store.CheckpointVersions(ctx, runID)
}

// Delete removes every version of the run; the next save of the run in
// this process is its version 1.
func (c *Checkpointer) Delete(ctx context.Context, runID string) error {
	s := c.pl.lookupRunState(runID)
	if s != nil {
		defer lockSaves(s)()
	}
	if err := c.store.DeleteCheckpoints(ctx, runID); err != nil {
		return err
	}
	if s != nil {
		s.mu.Lock()
		s.version, s.status = 0, ""
		s.mu.Unlock()
	}
	return nil
}

// saveLocks serialises the saves of each run within the process. A save
// is conditional on the version the process last saw: two at once (the
// results of two tool calls of one step) would both ask for the same
// version, and without the lock the one with the older snapshot could be
// written last.
var saveLocks = struct {
	sync.Mutex
	m map[*RunState]*saveLock
}{m: map[*RunState]*saveLock{}}

type saveLock struct {
	sync.Mutex
	refs int
}

// lockSaves takes the save lock of the run s and returns its release.
func lockSaves(s *RunState) func() {
	saveLocks.Lock()
	l := saveLocks.m[s]
	if l == nil {
		l = &saveLock{}
		saveLocks.m[s] = l
	}
	l.refs++
	saveLocks.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		saveLocks.Lock()
		if l.refs--; l.refs == 0 {
			delete(saveLocks.m, s)
		}
		saveLocks.Unlock()
	}
}

// Resume restores the run from its latest checkpoint: its state fields,
// transcript and tool results become the run's in this pipeline, and the
// next save is the following version. A run whose latest checkpoint is
// terminal is refused with a *BlockedError of layer LayerCheckpoint
// wrapping a *TerminalRunError, and a run without checkpoints fails with
// ErrNoCheckpoint; the run's state is untouched then.
func (c *Checkpointer) Resume(ctx context.Context, runID string) (Checkpoint, error) {
	cp, ok, err := c.store.LatestCheckpoint(ctx, runID)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: resume run %s: %w", runID, err)
	}
	if !ok {
		return Checkpoint{}, fmt.Errorf("checkpoint: resume run %s: %w", runID, ErrNoCheckpoint)
	}
	if cp.Status.Terminal() {
		te := &TerminalRunError{RunID: runID, Status: cp.Status, Version: cp.Version}
		return cp, &BlockedError{Layer: LayerCheckpoint, Message: "the run is not resumed", Err: te}
	}
	if cp.Status != RunRunning {
		return cp, fmt.Errorf("checkpoint: resume run %s: version %d has status %q, which is not running, done, failed or cancelled; the run is not resumed",
			runID, cp.Version, cp.Status)
	}
	if cp.RunID != runID {
		return cp, fmt.Errorf("checkpoint: resume run %s: version %d is of run %q; the run is not resumed", runID, cp.Version, cp.RunID)
	}
	s := c.pl.runState(runID)
	defer lockSaves(s)()
	s.mu.Lock()
	s.fields = map[string]any{}
	for k, v := range cp.Fields {
		s.fields[k] = cloneJSON(v)
		// A saved value passed the taint check: it is clean.
		s.clean[k] = true
	}
	s.transcript = slices.Clone(cp.Transcript)
	s.tools = slices.Clone(cp.Tools)
	s.intent = nil
	if cp.Calls != nil {
		s.intent = cp.Calls.clone()
	}
	s.version, s.status = cp.Version, cp.Status
	s.mu.Unlock()
	return cp, nil
}

// ResumeAll resumes each run of runIDs that can be: a run in a terminal
// state is skipped (listed in skipped), as is one without checkpoints.
// Other errors stop it.
func (c *Checkpointer) ResumeAll(ctx context.Context, runIDs []string) (resumed []Checkpoint, skipped []string, err error) {
	for _, id := range runIDs {
		cp, err := c.Resume(ctx, id)
		var te *TerminalRunError
		switch {
		case err == nil:
			resumed = append(resumed, cp)
		case errors.As(err, &te), errors.Is(err, ErrNoCheckpoint):
			skipped = append(skipped, id)
		default:
			return resumed, skipped, err
		}
	}
	return resumed, skipped, nil
}

// RecordTranscript records msgs as the transcript of the run ctx carries,
// for a host that runs its turns without RunAgent. It is a no-op until a
// checkpointer exists.
func (pl *Pipeline) RecordTranscript(ctx context.Context, msgs []Message) {
	if id := RunOf(ctx).ID; id != "" && pl.recordRuns.Load() {
		s := pl.runState(id)
		s.mu.Lock()
		s.transcript = slices.Clone(msgs)
		s.mu.Unlock()
	}
}

// Transcript returns the recorded transcript of the run ctx carries (after
// a Resume, the checkpoint's).
func (pl *Pipeline) Transcript(ctx context.Context) []Message {
	t, _ := readRunState(pl, RunOf(ctx).ID, func(s *RunState) []Message { return slices.Clone(s.transcript) })
	return t
}

// recordTool records a tool result of a run, as the tool chain returned it.
func (pl *Pipeline) recordTool(runID, tool, call string, v any, err error) {
	if runID == "" || !pl.recordRuns.Load() {
		return
	}
	r := ToolRecord{Tool: tool, Call: call}
	if err != nil {
		r.Error = err.Error()
		r.InDoubt = Classify(err) == ClassInDoubt || errors.Is(err, ErrOutcomeUnrecorded)
		r.Class, r.Layer = Classify(err).String(), LayerOf(err)
		var b *BlockedError
		if r.Class == ClassBlocked.String() && errors.As(err, &b) {
			r.Reason = b.Message
		}
	} else if jv, jerr := exactJSONValue(v); jerr == nil {
		r.Result = jv
	} else {
		r.Error = fmt.Sprintf("result is not JSON: %v", jerr)
	}
	s := pl.runState(runID)
	s.mu.Lock()
	s.tools = append(s.tools, r)
	s.mu.Unlock()
}

// OnToolResult registers fn to run after each tool call of the pipeline
// has returned through the tool chain and its result was recorded (a
// checkpoint layer with after_tool saves there). An error fn returns is
// the tool call's error. It is called during Provision only.
func (b *BuildContext) OnToolResult(fn func(ctx context.Context) error) {
	b.p.toolHooks = append(b.p.toolHooks, fn)
}

// OnToolCalls registers fn to run when an agent turn (RunAgent) has
// recorded the model's tool calls in the run's transcript, before any of
// them runs (a checkpoint layer with after_tool saves there, so a resumed
// run knows which calls were made). An error fn returns ends the turn and
// no call runs. It is called during Provision only.
func (b *BuildContext) OnToolCalls(fn func(ctx context.Context) error) {
	b.p.callHooks = append(b.p.callHooks, fn)
}

// OnTurnStart registers fn to run before a turn of a run (Pipeline.Turn,
// RunAgent) enters the turn chain, once the turn holds the run (ErrRunBusy):
// a checkpoint layer checks there that this process still holds the run
// (Checkpointer.Check), so that a turn of a run another process ended or
// saved since is refused before its model is called or its tools run. An
// error fn returns is the turn's, and nothing of the turn runs. It does not
// run for a turn nested in a turn of the same run (the outer turn's ran),
// nor for a turn made without a run id. It is called during Provision only.
func (b *BuildContext) OnTurnStart(fn func(ctx context.Context) error) {
	b.p.turnHooks = append(b.p.turnHooks, fn)
}

// SecretMasker returns a function that masks the secrets of a run in a
// record a layer writes (an audit's arguments): it returns args with every
// string and number that holds a secret value of the run in clear (the
// result of a secret_result tool, as a checkpoint looks for it) replaced by
// "[SECRET]", and every object key that holds one replaced by "[SECRET]"
// too. args is not modified; when the run holds no secret it is returned
// as it is. Arguments without a JSON form are withheld whole.
func (b *BuildContext) SecretMasker() func(runID string, args map[string]any) map[string]any {
	return b.p.maskSecrets
}

func (pl *Pipeline) maskSecrets(runID string, args map[string]any) map[string]any {
	if len(args) == 0 {
		return args
	}
	taint, _ := readRunState(pl, runID, (*RunState).secrets)
	if len(taint) == 0 {
		return args
	}
	jv, err := exactJSONValue(args)
	m, ok := jv.(map[string]any)
	if err != nil || !ok {
		return map[string]any{secretMark: "the arguments have no JSON form; withheld"}
	}
	return maskTaint(m, taint).(map[string]any)
}

// maskTaint returns v (a JSON value) with each string, number and key
// holding a secret string replaced by secretMark.
func maskTaint(v any, taint []string) any {
	switch x := v.(type) {
	case string:
		if holdsTaint(x, taint) {
			return secretMark
		}
	case float64, int64, json.Number:
		if holdsTaint(scalarText(x), taint) {
			return secretMark
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskTaint(e, taint)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if holdsTaint(k, taint) {
				k = secretMark
			}
			out[k] = maskTaint(e, taint)
		}
		return out
	}
	return v
}

// taintResult records the raw result of a secret_result tool as secret
// for its run, before any layer sees it.
func (pl *Pipeline) taintResult(runID string, v any) {
	if runID == "" {
		return
	}
	jv, err := exactJSONValue(v)
	if err != nil {
		return
	}
	s := pl.runState(runID)
	s.mu.Lock()
	addTaint(s.taint, jv)
	s.mu.Unlock()
}

// snapshot builds the checkpoint of a run and checks it for secrets in
// clear.
func (pl *Pipeline) snapshot(runID string, s *RunState, status RunStatus) (Checkpoint, error) {
	s.mu.Lock()
	cp := Checkpoint{RunID: runID, Status: status, Time: pl.now(), Transcript: slices.Clone(s.transcript),
		Tools: slices.Clone(s.tools)}
	if s.intent != nil {
		cp.Calls = s.intent.clone()
	}
	if len(s.fields) > 0 {
		cp.Fields = map[string]any{}
		for k, v := range s.fields {
			cp.Fields[k] = cloneJSON(v)
		}
	}
	taint := slices.Collect(maps.Keys(s.taint))
	var dirty []string
	if pl.state != nil {
		for name := range s.fields {
			if f := pl.state.fields[name]; f != nil && f.secret && !s.clean[name] {
				dirty = append(dirty, name)
			}
		}
	}
	s.mu.Unlock()
	if len(dirty) > 0 {
		slices.Sort(dirty)
		return cp, secretRefusal("fields." + dirty[0])
	}
	if len(taint) == 0 {
		return cp, nil
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return cp, fmt.Errorf("checkpoint: encode run %s: %w", runID, err)
	}
	var doc any
	if err := jsonnum.Decode(b, &doc); err != nil {
		return cp, fmt.Errorf("checkpoint: encode run %s: %w", runID, err)
	}
	slices.Sort(taint)
	if path := findTaint(doc, "", taint); path != "" {
		return cp, secretRefusal(path)
	}
	return cp, nil
}

func secretRefusal(path string) error {
	se := &SecretError{Path: path}
	return &BlockedError{Layer: LayerCheckpoint, Message: "the run is not saved", Err: se}
}

// findTaint returns the path of the first string, number or object key
// of doc (in key order) that contains a secret string, or "".
func findTaint(doc any, path string, taint []string) string {
	switch x := doc.(type) {
	case string:
		if holdsTaint(x, taint) {
			return path
		}
	case float64, int64, json.Number:
		if holdsTaint(scalarText(x), taint) {
			return path
		}
	case []any:
		for i, e := range x {
			if p := findTaint(e, path+"["+strconv.Itoa(i)+"]", taint); p != "" {
				return p
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if holdsTaint(k, taint) {
				return sub
			}
			if p := findTaint(x[k], sub, taint); p != "" {
				return p
			}
		}
	}
	return ""
}

// holdsTaint reports whether s contains one of the secret strings.
func holdsTaint(s string, taint []string) bool {
	return slices.ContainsFunc(taint, func(t string) bool { return strings.Contains(s, t) })
}

// MemoryCheckpoints is an in-memory CheckpointStore, safe for concurrent
// use. Checkpoints are kept as their JSON, so a saved one never shares
// memory with the run.
type MemoryCheckpoints struct {
	mu   sync.Mutex
	runs map[string]*memoryRun
}

type memoryRun struct {
	latest   int
	status   RunStatus
	versions map[int][]byte
}

// NewMemoryCheckpoints returns an empty store.
func NewMemoryCheckpoints() *MemoryCheckpoints {
	return &MemoryCheckpoints{runs: map[string]*memoryRun{}}
}

// SaveCheckpoint implements CheckpointStore.
func (m *MemoryCheckpoints) SaveCheckpoint(_ context.Context, cp Checkpoint) (int, error) {
	b, err := MarshalCheckpoint(cp)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[cp.RunID]
	if r == nil {
		r = &memoryRun{versions: map[int][]byte{}}
	}
	if r.status.Terminal() {
		return 0, &TerminalRunError{RunID: cp.RunID, Status: r.status, Version: r.latest}
	}
	if cp.Version > 0 && cp.Version != r.latest+1 {
		return 0, &CheckpointConflictError{RunID: cp.RunID, Want: cp.Version, Latest: r.latest}
	}
	m.runs[cp.RunID] = r
	r.latest++
	r.status = cp.Status
	r.versions[r.latest] = b
	if cp.Keep > 0 {
		for v := range r.versions {
			if v <= r.latest-cp.Keep {
				delete(r.versions, v)
			}
		}
	}
	return r.latest, nil
}

func (m *MemoryCheckpoints) get(runID string, v int) (Checkpoint, bool, error) {
	r := m.runs[runID]
	if r == nil {
		return Checkpoint{}, false, nil
	}
	b, ok := r.versions[v]
	if !ok {
		return Checkpoint{}, false, nil
	}
	cp, err := UnmarshalCheckpoint(b, v)
	return cp, err == nil, err
}

// LatestCheckpoint implements CheckpointStore.
func (m *MemoryCheckpoints) LatestCheckpoint(_ context.Context, runID string) (Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[runID]; r != nil {
		return m.get(runID, r.latest)
	}
	return Checkpoint{}, false, nil
}

// LatestCheckpointHead implements CheckpointHeads.
func (m *MemoryCheckpoints) LatestCheckpointHead(_ context.Context, runID string) (int, RunStatus, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[runID]; r != nil {
		return r.latest, r.status, true, nil
	}
	return 0, "", false, nil
}

// CheckpointAt implements CheckpointStore.
func (m *MemoryCheckpoints) CheckpointAt(_ context.Context, runID string, v int) (Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.get(runID, v)
}

// CheckpointVersions implements CheckpointStore.
func (m *MemoryCheckpoints) CheckpointVersions(_ context.Context, runID string) ([]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[runID]; r != nil {
		return slices.Sorted(maps.Keys(r.versions)), nil
	}
	return nil, nil
}

// DeleteCheckpoints implements CheckpointStore.
func (m *MemoryCheckpoints) DeleteCheckpoints(_ context.Context, runID string) error {
	m.mu.Lock()
	delete(m.runs, runID)
	m.mu.Unlock()
	return nil
}

var (
	_ CheckpointStore = (*MemoryCheckpoints)(nil)
	_ CheckpointHeads = (*MemoryCheckpoints)(nil)
)
