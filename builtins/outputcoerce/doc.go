// Package outputcoerce implements the output_coerce builtin (stages chat and
// tool): it validates a model's output, or a tool's result, against a JSON
// Schema.
//
// The layer holds the response's deltas until the stream completes: output
// can only be validated whole, so a caller behind output_coerce sees no delta
// before validation, and streaming degrades to one burst at the end. It then
// strips markdown fences (the content of the first ``` block when there is
// one, else the trimmed text), parses the text as JSON (numbers as
// json.Number) and validates it against `schema` (any draft the
// santhosh-tekuri/jsonschema/v5 compiler knows; 2020-12 when the schema has
// no $schema; remote $refs are refused).
//
// Mode "enforce" (the default): valid output is delivered as the stripped
// JSON text (the original deltas when nothing was stripped). Invalid output
// fails the call with a *CoercionError carrying per-field diagnostics sorted
// by instance location; nothing is delivered, so for the layers outside it is
// a failure before the stream, and a retry outside re-invokes the call. The
// error implements runtime.RetryFeedbacker: the retry builtin appends the
// feedback (the rejected output and the diagnostics) to the next attempt's
// transcript as a user message, so the model is re-asked with what was
// wrong. Without a retry outside, the error reaches the caller (vet warns:
// order/coerce-outside-retry).
//
// Mode "annotate" never fails the call: the original deltas are delivered
// and an Annotation (validity, the parsed value, the diagnostics) is recorded
// on the response under the layer's name; read it with AnnotationOf, which
// also reads it from a response a cache outside the layer (memoize,
// semantic_memoize) replayed, where it was stored as JSON.
//
// A stream that failed is returned as is, without validation.
//
// In the tool stage the layer checks tool results: each successful result
// (raw JSON bytes parsed, any other value marshalled to JSON) is validated
// against `schema` when it is set, else against the called tool's declared
// `result_schema` (a tool without one passes). Mode "enforce" fails an
// invalid result with a *ResultError naming the layer and the tool, which
// unwraps to a permanent *runtime.CallError (the tool has run; running it
// again would not fix its result and could repeat its effects); mode
// "annotate" logs a warning and returns the result unchanged.
package outputcoerce
