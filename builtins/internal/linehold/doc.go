// Package linehold holds a model's streamed text back until it can be
// checked whole, for the layers that scan or rewrite the model's output
// (redact, pii).
//
// A value can be split across deltas ("4111 1111" in one, " 1111 1111" in
// the next), so a layer that checks each delta on its own lets it through.
// Stream buffers the text and releases it in parts that end where the layer
// says no value can run on into the text still to come (at the latest, a
// line break), each part checked or rewritten as a whole before it goes out.
//
// The model's thinking is signed and cannot be rewritten: Stream relays a
// thinking block whole when the layer finds nothing in it, and leaves it
// out otherwise, failing the call when tool calls follow (the turn could
// not be continued without the block).
package linehold
