package idempotent

// KeyPrefix starts every store key of the layer.
const KeyPrefix = keyPrefix
