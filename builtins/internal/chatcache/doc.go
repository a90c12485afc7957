// Package chatcache records a chat response as an Entry that a caching
// builtin (memoize, semantic_memoize) stores, and replays an Entry as the
// response of a later call.
package chatcache
