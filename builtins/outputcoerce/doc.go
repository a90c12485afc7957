// Package outputcoerce implements the output_coerce builtin (stages chat and
// tool): it validates a model's output, or a tool's result, against a JSON
// Schema.
//
// Without partial, the layer holds the response's deltas until the stream
// completes: the output is validated whole, so a caller behind
// output_coerce sees no delta before validation, and streaming degrades to
// one burst at the end (partial, below, streams instead). It then
// strips markdown fences (the content of the first ``` block when there is
// one, else the trimmed text), parses the text as JSON (numbers as
// json.Number; an object giving a key twice, keys differing only in case
// counting as one, is not valid: the check would read the last, and the
// caller's parser may read the first, or, as Go's encoding/json into a
// struct, the other case as the field) and validates it against `schema`
// (any draft the
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
// A stream that failed is returned as is, without validation. A response
// that calls a tool is not the final output (the answer comes once the
// results are back): it is released as it came, its text unchecked too.
// Nor is a refusal (text the model marked as its refusal to answer,
// runtime.Delta.Refusal: OpenAI's refusal): coercing it into the schema, or
// re-asking the model to answer what it declined, would be wrong. In either
// mode it is released as it came, still marked, unchecked and without an
// annotation, as the Chat Completions API delivers a refusal under a
// response format: outside the schema, in its refusal field. The caller
// tells it from an answer by the mark (ChatResponse.Refusal). Nor is a turn
// the provider paused (finish reason pause_turn, runtime.FinishPauseTurn:
// Anthropic pauses a turn that runs a long server tool, and the client
// continues it by sending the response back): its text is released as it
// came, unchecked and without an annotation, and no retry re-asks the model
// for it. Nor is a call a layer outside makes of its own (runtime.OwnCall:
// a judge's verdict, a summarizing compaction's summary): its output is
// that layer's, in the form the layer asks for, not the answer the schema
// describes, so it gets no response format and passes unchecked, whatever
// the layer's when. A judge or compaction outside output_coerce reads its
// verdicts and summaries as their models wrote them; agentc explain says
// so on their path.
//
// With `partial: true` (chat stage only) the layer streams while it parses:
// each delta is fed to an incremental JSON parser and forwarded as soon as
// the text read so far is a valid prefix, so the caller sees the output as
// the model writes it. A delta after which the output can no longer become
// valid is not forwarded: the layer stops the model's stream and fails the
// call (enforce) or records the annotation invalid and lets the rest
// through (annotate). The output read with partial is: optional leading
// whitespace, optionally a code fence opening it (``` and a language tag up
// to the end of the line), one JSON value, then only whitespace, or the
// closing fence and anything after it. Prose before the value is refused at
// its first byte (without partial, the first fence anywhere in the text is
// read instead).
//
// A valid prefix is one where none of these holds:
//   - it is not the start of a JSON text (a byte that no JSON text can
//     have there, or text after the value);
//   - a value starts with a type that a schema applying at its location
//     excludes (type, const or enum, or the false schema): refused at the
//     value's first byte;
//   - an object key that additionalProperties: false refuses (not in
//     properties nor matched by patternProperties), refused when the key's
//     closing quote arrives; a member past maxProperties, or an element
//     past maxItems, refused when it starts;
//   - a value that is complete (a string at its closing quote, a number at
//     the byte after it, a literal at its last letter, an object or array at
//     its closing bracket) does not match, in full, a schema applying at
//     its location: so required is checked at the closing brace, maxLength
//     and pattern at the closing quote, minimum at the number's end.
//
// The schemas applying at a location are the root schema, then those
// reached from the schemas of the enclosing value through properties,
// patternProperties, additionalProperties, prefixItems, items and
// additionalItems, each with its $ref targets and allOf members. Keywords
// under anyOf, oneOf, not, if/then/else and the dependent keywords are
// checked when the enclosing value completes, at the latest with the whole
// value at the end of the stream, which is validated in full as without
// partial. A completed object or array inside the value is checked against
// its subschemas while the checks so far have gone over at most 16 values
// per value read (a container counts its values times its nesting height);
// past that it is left to the check of the whole value, so that deep
// nesting (4,000 levels under a recursive schema) is read in time close to
// one whole validation, not quadratic in the depth. The checks are
// necessary conditions: a prefix that passes them
// may still be unable to end valid (a oneOf no branch of which can hold),
// and then fails when the value that holds the keyword completes. Diagnostics and feedback are those of a whole-output failure;
// the rejected output is the text up to and including the refused delta.
//
// The deltas a caller received are the model's own (fences included): with
// partial the layer never rewrites the output. A failure after a delta
// reached the caller is a mid-stream failure: a retry outside re-asks only
// when the refused delta was the first. Once a delta carries a tool call, or
// text marked a refusal, the response is not the final output and the rest
// streams unchecked; a paused turn is not checked whole at its end.
//
// In the tool stage the layer checks tool results: each successful result
// (raw JSON bytes parsed, refused as output is when an object gives a key
// twice; any other value marshalled to JSON) is validated
// against `schema` when it is set, else against the called tool's declared
// `result_schema` (a tool without one passes). An MCP tool result (an
// object holding a "content" list and a "structuredContent" value that is
// not null, as agentc serve passes an upstream's result that is not text
// only) is validated by its structured content: a tool that declares an
// outputSchema returns its value there, and a result schema is written for
// that value; the result passes whole. A string result (raw JSON bytes
// aside) is checked as a string; when the schema refuses it and it is the
// JSON text of another value (an object, an array, a number, a boolean,
// null), that value is checked instead and the result passes unchanged,
// as the text it was: a tool that answers JSON as text (an MCP server
// without an outputSchema, whose result agentc serve passes as its text) is
// checked by what it encodes, so a result schema of type "object" can be
// written for it. When that value fails too, the diagnostics are its own
// if the schema refused the string by its type alone, else the string's.
// Mode "enforce" fails an
// invalid result with a *ResultError naming the layer and the tool, which
// unwraps to a permanent *runtime.CallError and is marked runtime.Ran (the
// tool has run; running it again would not fix its result and could repeat
// its effects): an idempotent layer outside keeps it as the call's outcome,
// so that a duplicate gets it without running the tool again, an audit
// layer outside records the decision "ran", and a meter outside charges
// the call. Mode "annotate" logs a warning and returns the result
// unchanged.
package outputcoerce
