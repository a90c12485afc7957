// Package security detects prompt-injection attempts in text: requests to ignore or override
// earlier instructions, to reveal the system prompt, role switches such as "you are now DAN"
// or "developer mode", and chat-template tokens smuggled into user content. Instructions
// hidden in base64 runs or rot13, or spelled in leetspeak ("1gn0r3 pr3v10us 1nstruct10ns"),
// are decoded and checked too.
//
// Patterns are RE2 regular expressions. Unless a Pattern is Raw it is matched against a
// normalized form of the text that makes the default set tolerant of case, spacing and
// punctuation tricks: letters are lower-cased, full-width forms, mathematical, circled and
// squared letters, small capitals and common Cyrillic and Greek look-alikes are folded to
// ASCII, Latin letters lose their diacritics, invisible format characters (zero-width spaces,
// soft hyphens) are dropped, and every run of other characters (whitespace, punctuation, symbols)
// becomes a single space. Offsets reported in a Match always refer to the original text.
//
// A Detector is immutable after New and safe for concurrent use.
//
// The security builtin (Middleware, stages chat and turn) blocks, with a *runtime.BlockedError
// naming the layer and the pattern id, a chat call whose latest user message or a turn whose
// input matches. `patterns` add expressions, each tried case-insensitively on the original
// and on the normalized text; `defaults: false` drops DefaultPatterns.
package security
