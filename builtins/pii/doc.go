// Package pii detects and redacts personal data in text and in JSON-like values: email
// addresses (internationalized ones included), phone numbers (international "+" form and
// formatted North American numbers, with an "x" or "ext." extension), US social security
// numbers, payment card numbers (13 to 19 digits that pass the Luhn check and start like a
// card), and IPv4 (with an optional CIDR prefix length) and IPv6 addresses.
//
// The detectors are hand-written scanners rather than broad regular expressions so that they
// can refuse the usual false positives: a number glued to letters or to a dotted version, dates
// and times, order ids, plain digit runs without the formatting a phone number carries, and
// 16-digit numbers that fail the Luhn check.
//
// A Scanner is immutable after New and safe for concurrent use.
//
// The pii builtin (Middleware, stages chat and tool) uses a Scanner built once from `kinds`
// ("ip" selects IPv4 and IPv6). With `action: "block"` a match in the latest user message
// (chat) or in any argument (tool) blocks the call with a *runtime.BlockedError that names the
// kinds and the argument's JSON Pointer, never the data. With `action: "redact"` the inner
// layers see a redacted copy: every user message of the transcript (the caller keeps the raw
// transcript and resends it) or the arguments. The caller's messages and maps are never
// modified.
package pii
