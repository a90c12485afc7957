package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// fingerprint is what the watcher compares: each watched file's identity,
// size and modification time, and the .cue and .json files of the watched
// directories.
type fingerprint struct {
	files map[string]fileStamp
}

// fileStamp is a file as stat saw it (through symlinks). The identity
// (the inode on Unix) tells a file renamed over the old one, as an atomic
// save or a Kubernetes ConfigMap update does, even with the same size and
// a modification time the kernel's coarse clock left the same.
type fileStamp struct {
	size int64
	mod  time.Time
	ok   bool
	id   os.FileInfo
}

// same reports whether a and b stamp the same file, unchanged.
func (a fileStamp) same(b fileStamp) bool {
	if a.ok != b.ok || a.size != b.size || !a.mod.Equal(b.mod) {
		return false
	}
	if a.id == nil || b.id == nil {
		return a.id == nil && b.id == nil
	}
	return os.SameFile(a.id, b.id)
}

func takeFingerprint(files, dirs []string) fingerprint {
	fp := fingerprint{files: map[string]fileStamp{}}
	add := func(path string) {
		st, err := os.Stat(path)
		if err != nil {
			fp.files[path] = fileStamp{}
			return
		}
		fp.files[path] = fileStamp{size: st.Size(), mod: st.ModTime(), ok: true, id: st}
	}
	for _, f := range files {
		add(f)
	}
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			// An editor's lock or backup file (".#policy.cue") is not
			// the policy's (dsl.IsPolicyFileName).
			if name := e.Name(); !e.IsDir() && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_") &&
				(strings.HasSuffix(name, ".cue") || strings.HasSuffix(name, ".json")) {
				add(filepath.Join(d, e.Name()))
			}
		}
	}
	return fp
}

// changed returns the paths whose stamps differ between fp and now.
func (fp fingerprint) changed(now fingerprint) []string {
	var diff []string
	for path, st := range now.files {
		if old, ok := fp.files[path]; !ok || !old.same(st) {
			diff = append(diff, path)
		}
	}
	for path := range fp.files {
		if _, ok := now.files[path]; !ok {
			diff = append(diff, path)
		}
	}
	slices.Sort(diff)
	return diff
}

// asBefore returns now with the stamps of before, taken as a load began,
// for the files now and before share, and a missing file's stamp for those
// before did not have: a file written while it was read is then a change
// from what was loaded, and reloaded, rather than taken as loaded.
func (now fingerprint) asBefore(before fingerprint) fingerprint {
	out := fingerprint{files: make(map[string]fileStamp, len(now.files))}
	for path := range now.files {
		out.files[path] = before.files[path]
	}
	return out
}

func (fp fingerprint) paths() (files []string) {
	for p := range fp.files {
		files = append(files, p)
	}
	return files
}

// watch reloads the policy whenever one of its files changes, checking
// every WatchInterval. A change is acted on once the files have stood
// still for one interval (the same stamps on two checks in a row), so a
// file seen while it is being written is not loaded half done: that
// reload would fail, be counted and logged, for a write that was fine.
func (s *Server) watch(ctx context.Context) {
	if s.opts.WatchInterval < 0 {
		return
	}
	t := time.NewTicker(s.opts.WatchInterval)
	defer t.Stop()
	var w settle
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.reloadMu.Lock()
		old := s.watched
		files, dirs := old.paths(), s.watchDirs
		s.reloadMu.Unlock()
		if diff := w.due(old, takeFingerprint(files, dirs)); len(diff) > 0 {
			s.log.Info("policy files changed; reloading", "files", diff)
			_ = s.Reload(ctx)
		}
	}
}

// settle decides, check after check, when a change of the watched files
// is due for a reload: once the same changed stamps are seen twice in a
// row.
type settle struct {
	pending *fingerprint // the changed files, seen once
}

// due returns the paths that changed from loaded to now when they have
// stood still since the previous check, or nil.
func (w *settle) due(loaded, now fingerprint) []string {
	diff := loaded.changed(now)
	switch {
	case len(diff) == 0:
		w.pending = nil
		return nil
	case w.pending == nil || len(w.pending.changed(now)) > 0:
		w.pending = &now // still moving: look again next time
		return nil
	}
	w.pending = nil
	return diff
}

// reloadRetryFirst is the wait before a reload that failed for a reason
// that may pass (transientReload) is tried again; each failure of the
// retry doubles the wait, up to reloadRetryMax.
var reloadRetryFirst, reloadRetryMax = time.Second, 5 * time.Second

// reloadRetry is a reload due again after a transient failure.
type reloadRetry struct {
	timer   *time.Timer
	wait    time.Duration
	attempt int
}

// upstreamError is the failure to connect to an MCP upstream, or to list
// its tools: it may pass without a change of the policy. A failure of
// what the policy says of the servers (a variable not set, a tool name
// two servers expose) is not one.
type upstreamError struct{ err error }

func (e *upstreamError) Error() string { return e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// transientReload reports whether a reload failed for a reason that may
// pass without a change of the files: a declared store it could not open
// (runtime.ErrStoreOpen), an MCP upstream it could not reach. A policy
// that does not load, vet or build, or a refused change, waits for the
// files to change.
func transientReload(err error) bool {
	var ue *upstreamError
	return errors.Is(err, runtime.ErrStoreOpen) || errors.As(err, &ue)
}

// retryLater schedules the reload that failed with err again when the
// failure is transient, and returns the wait: reloadRetryFirst after a
// reload of a change or a signal, twice the previous wait (up to
// reloadRetryMax) after the retry prev failed. Otherwise, a reload that
// applied (err nil) included, it drops the retry due and returns 0. The
// retry reloads the files as they are then, so a change made meanwhile
// is what it applies. reloadMu is held.
func (s *Server) retryLater(err error, prev *reloadRetry) time.Duration {
	if s.retry != nil {
		s.retry.timer.Stop()
		s.retry = nil
	}
	if err == nil || !transientReload(err) || s.closed.Load() {
		return 0
	}
	r := &reloadRetry{wait: reloadRetryFirst, attempt: 1}
	if prev != nil {
		r.wait, r.attempt = min(prev.wait*2, reloadRetryMax), prev.attempt+1
	}
	r.timer = time.AfterFunc(r.wait, func() { _ = s.reload(s.stopNow, r) })
	s.retry = r
	return r.wait
}
