// Package log implements the log builtin (stages chat, tool and turn): one
// structured slog line per call, written when the call returns (for chat, when
// the stream ends). The line carries the layer, stage, run id, outcome
// ("ok", "blocked", "budget", "in_doubt", "failed"), duration and attempts, plus the
// model, served model, deltas and usage (chat), the tool (tool) or the
// output length (turn), and the error: its kind (error_kind) and, since a
// tool's error may quote its arguments ("card 4111... declined"), its text
// only with include_errors: true. By default the error reads `layer "bank";
// text withheld, sha256 HEX`, as an audit record's does: the layer the
// error names (left out when it names none), preceded by "panic; " for a
// panic, and the hex SHA-256 of the text (`hmac-sha256 HEX`, keyed,
// with settings.digest_key_env), which matches the error the caller got. In
// the tool chain a pii layer masks a failed call's error for the caller on
// its way out: for each pii layer outside it, the layer masks the text as
// that one will (its kinds and regions), and so for each redact layer
// outside it (its patterns, the secrets), before it logs or digests it, so
// the line holds the text the caller reads, never the personal data pii
// keeps from the caller (one inside it has masked the text already). With include_args it also logs the messages, the tool
// arguments or the turn input. A successful call is
// logged at `level`; a failed one at least at warn. A call whose inner
// layers panic gets its line too (outcome "failed", error_kind "panic", with
// include_errors the panic's value as the error) before the panic goes on unchanged. The logger is
// Deps.Logger (slog.Default() when unset). A host that decides after the
// chat chain whether an answer goes out (runtime.AnswerVerdict) has the
// line of a chat call that succeeded written once it has: agentc serve
// refuses with a 403 an answer holding a tool call the model proposed that
// the tool chain refuses, and the line says outcome "blocked", naming that
// layer, as the access log's status does.
package log
