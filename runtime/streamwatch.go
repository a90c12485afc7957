package runtime

import "context"

// StreamWatcher is told of each delta a model client yields inside a
// context that carries it (WithStreamWatcher): Arrived when the delta
// leaves the client, before it enters the chat chain, and Delivered once
// the chain has taken it (the layers above, up to the consumer, returned).
// A layer that bounds the time between deltas (retry's idle_timeout)
// measures there what the upstream sends, not what reaches it: a layer
// between it and the model that holds deltas is no stall, and the time a
// delta spends above it, in a slow consumer, is not the upstream's. Several
// model calls under one context (a hedge's racers, a fallback's models) call
// one watcher, concurrently for racers.
type StreamWatcher interface {
	Arrived()
	Delivered()
}

type streamWatchKey struct{}

// streamWatchers is the chain of watchers a context carries, innermost
// first.
type streamWatchers struct {
	w     StreamWatcher
	outer *streamWatchers
}

// WithStreamWatcher returns ctx whose model calls tell w of their deltas,
// as well as every watcher ctx already carries (an outer layer's).
func WithStreamWatcher(ctx context.Context, w StreamWatcher) context.Context {
	outer, _ := ctx.Value(streamWatchKey{}).(*streamWatchers)
	return context.WithValue(ctx, streamWatchKey{}, &streamWatchers{w: w, outer: outer})
}

func streamWatchersOf(ctx context.Context) *streamWatchers {
	s, _ := ctx.Value(streamWatchKey{}).(*streamWatchers)
	return s
}

func (s *streamWatchers) arrived() {
	for ; s != nil; s = s.outer {
		s.w.Arrived()
	}
}

func (s *streamWatchers) delivered() {
	for ; s != nil; s = s.outer {
		s.w.Delivered()
	}
}
