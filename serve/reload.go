package serve

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// fingerprint is what the watcher compares: each watched file's size and
// modification time, and the .cue and .json files of the watched
// directories.
type fingerprint struct {
	files map[string]fileStamp
}

type fileStamp struct {
	size int64
	mod  time.Time
	ok   bool
}

func takeFingerprint(files, dirs []string) fingerprint {
	fp := fingerprint{files: map[string]fileStamp{}}
	add := func(path string) {
		st, err := os.Stat(path)
		if err != nil {
			fp.files[path] = fileStamp{}
			return
		}
		fp.files[path] = fileStamp{size: st.Size(), mod: st.ModTime(), ok: true}
	}
	for _, f := range files {
		add(f)
	}
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".cue") || strings.HasSuffix(e.Name(), ".json")) {
				add(filepath.Join(d, e.Name()))
			}
		}
	}
	return fp
}

// changed reports whether the files differ from fp, and the paths that do.
func (fp fingerprint) changed(files, dirs []string) []string {
	now := takeFingerprint(files, dirs)
	var diff []string
	for path, st := range now.files {
		if old, ok := fp.files[path]; !ok || old != st {
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

func (fp fingerprint) paths() (files []string) {
	for p := range fp.files {
		files = append(files, p)
	}
	return files
}

// watch reloads the policy whenever one of its files changes, checking
// every WatchInterval. A file being written may be seen half done: the
// reload then fails, keeps the old policy, and the next change (the end of
// the write) reloads again.
func (s *Server) watch(ctx context.Context) {
	if s.opts.WatchInterval < 0 {
		return
	}
	t := time.NewTicker(s.opts.WatchInterval)
	defer t.Stop()
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
		diff := old.changed(files, dirs)
		if len(diff) == 0 {
			continue
		}
		s.log.Info("policy files changed; reloading", "files", diff)
		_ = s.Reload(ctx)
	}
}
