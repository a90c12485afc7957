// Package truncate implements the truncate builtin (stage tool): it trims an
// over-long tool result to `max_chars` characters (Unicode code points)
// before the result enters the model's context.
//
// A string result longer than max_chars is cut to its first max_chars
// characters and followed by a marker, "\n[truncated: kept N of M
// characters]", so that the model (and a reader of the transcript) can tell
// that text is missing. Bytes and raw JSON (json.RawMessage) are measured
// as the text they hold. Any other result is measured as its JSON text,
// with "<", ">" and "&" written as themselves (one character each, as the
// model reads them, not the six of "\u003c"); when that is too long the
// result becomes a string holding the first max_chars characters of the
// JSON text followed by the same marker (the truncated JSON is no longer
// valid JSON, which the marker makes plain). A layer outside truncate that
// checks the result's structure (an output_coerce against an object
// schema, a phase "after" guard reading result.status) then sees that
// string, not the object: place such checks inside truncate
// (order/check-outside-truncate). A result with no JSON form (a
// host's Go value holding a NaN or a channel) cannot be measured: the call
// fails closed with a permanent *runtime.CallError naming the layer,
// marked runtime.Ran (the tool ran; its effect stands), rather than
// reaching the model unbounded. A result within the limit is returned as
// it is. A failed call's error reaches the model too ("error: the tool
// failed: " and its text: an MCP tool's isError answer, an HTTP tool
// quoting the body of its 500): its text is cut the same way, and the
// error it wraps still tells its kind, its layer and whether the tool ran.
// The tool's own value is never modified.
//
// A text that ends with a marker whose kept count is the length of the
// text before it was cut by a truncate layer inside this one (two layers in
// a row) and is measured without its marker: kept within max_chars it
// passes as it is (at most max_chars characters and the marker), and cut
// again it is cut from its kept text, the new marker reporting the length
// of the tool's own result, not of the first cut. Text that merely looks
// like a marker (its kept count is not the text's length before it, or its
// counts are not numbers) is measured and cut as any other.
package truncate
