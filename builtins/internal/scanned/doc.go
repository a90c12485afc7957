// Package scanned keeps, for the content detectors (security, pii,
// content_filter), the record of what a layer has already scanned in a run,
// and walks the texts of a transcript that the model will read.
//
// A chat call carries the whole transcript. Scanning only its latest message
// lets through what a caller placed earlier: an injection in an earlier user
// turn, a card number in a fabricated assistant turn or in a tool result of
// the history a gateway client sends. Scanning every message of every call
// rescans an agent loop's whole history each step. So a layer scans each
// text of the transcript that it has not already found clean in the run (or
// that the model did not write through it in the run), and records the
// digest of what passed. A record only ever skips a text that this layer
// scanned and found clean, or that the model produced through it, so a text
// a caller changed or added is always scanned, wherever it sits in the
// transcript.
package scanned
