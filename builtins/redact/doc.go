// Package redact masks secrets (API keys, tokens, private keys, passwords) in text and in
// JSON-like values: the logic behind the redact builtin, which cleans tool results before
// they enter the model's context.
//
// Each rule is an RE2 expression with an id. A match is replaced by "[REDACTED:<id>]"; when
// the expression has a capture group named "secret", only that group is replaced, so
// "password=hunter2" becomes "password=[REDACTED:password-assignment]" and the surrounding
// structure stays readable. Redacting already redacted text changes nothing. The text is
// also read folded, so a secret with zero-width characters inside or written in full-width or
// look-alike letters is masked whole. In a JSON-like value the object keys are redacted too:
// a key holding a secret ({"sk-live-...": 1}) is renamed to its masked form, followed by "#2",
// "#3"... when two keys mask alike or the name is taken, so no value is lost; an integral
// number is read as its digits, and one a rule matches (an account number a configured pattern
// masks, sent as a JSON number) becomes its masked string.
//
// A Redactor is immutable after New and safe for concurrent use.
//
// The redact builtin (Middleware, stages tool and chat) masks tool results (a copy; bytes are
// read as text, as the agent loop reads them, and other values that are not JSON-like, or
// hold such a value at any depth (a struct in a map), are converted to their JSON form
// first; a result with no JSON form, a NaN, fails the call with a permanent error naming
// the layer rather than going on unchecked; a failed call's error text, which the model reads
// as it reads a result (an MCP tool's isError answer, an HTTP tool quoting the body of its
// 500), is masked too, and the error still tells its kind, its layer and whether the tool
// ran), the transcript a chat call sends to the model (every
// text on the call's own copy: system, user and assistant text, text carried in place of an
// image (an image part whose data: URL holds text goes on as a text part when it is masked),
// tool results, which a gateway
// client supplies itself, the arguments of earlier tool calls, and the names a message
// carries: its author, its tool calls' names and ids, its results' call ids, an id masked
// alike in a call and its result; the caller's messages are
// never modified) and streamed model output. Chat
// output is released line by line, each line redacted whole, so that a secret split across
// deltas is still caught; a PEM block is held from its BEGIN line to its END line, and a line
// ending where a value may follow ("password:", "Bearer") with the lines that complete it.
// See Middleware.WrapChat.
package redact
