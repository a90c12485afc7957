// Package lease holds what the layers that claim calls through a
// runtime.Leaser share (idempotent, and memoize with single_flight): a
// Group that collapses concurrent identical calls in one process, and
// Renew, which keeps a held lease alive while its call runs.
package lease
