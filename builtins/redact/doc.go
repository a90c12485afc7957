// Package redact masks secrets (API keys, tokens, private keys, passwords) in text and in
// JSON-like values: the logic behind the redact builtin, which cleans tool results before
// they enter the model's context.
//
// Each rule is an RE2 expression with an id. A match is replaced by "[REDACTED:<id>]"; when
// the expression has a capture group named "secret", only that group is replaced, so
// "password=hunter2" becomes "password=[REDACTED:password-assignment]" and the surrounding
// structure stays readable. Redacting already redacted text changes nothing.
//
// A Redactor is immutable after New and safe for concurrent use.
package redact
