// Package tracing implements the tracing builtin (stages chat, tool and
// turn): one OpenTelemetry span per call, named `span_name` or
// "agentc.<stage>", with the layer's `attributes`. The span starts before the
// inner layers run and ends when the call returns, so a chat span covers the
// whole stream; the inner layers and the model client see the span in their
// context. The span records the run id, the model requested and served, the
// deltas, usage and attempts (chat), the tool and attempts (tool), and the
// error with an error status on failure: its kind (agentc.error_kind) and
// outcome and, since a tool's error may quote its arguments ("no match for
// db_password=..."), its text only with include_errors: true (the run's
// secrets masked). By default the status message and the exception event's
// message read `layer "bank"; text withheld, sha256 HEX`, as a log line's
// and an audit record's do: the layer the error names (left out when it
// names none), preceded by "panic; " for a panic, and the hex SHA-256 of
// the text (`hmac-sha256 HEX`, keyed, with settings.digest_key_env), which
// matches the error the caller got. When the inner layers
// panic, the span still ends: it records the panic (error status,
// agentc.error_kind "panic") and the panic goes on with its value
// unchanged.
//
// Spans go to Deps.TracerProvider, or to the global provider when it is unset.
// Without a provider (none in Deps and none installed with
// otel.SetTracerProvider before Build) or with the trace/noop provider, the
// layer passes calls through and costs nothing, unless `log` is true: each
// span is then one slog record to Deps.Logger, written when it ends: message
// "span" (warn level with an error status, info otherwise) with the span's
// name, kind, duration (on the pipeline's clock), status, recorded errors
// ("exception") and attributes, the last value of each. Logged spans carry
// no trace id, and a provider installed later is not picked up until the
// pipeline is built again.
package tracing
