// Package filecheck vets file-path arguments before a tool touches the file: the logic behind
// the file_check builtin.
//
// A path is confined to a set of root directories. Relative paths are taken from the first
// root; ".." may move around inside a root but never out of it. Symbolic links are resolved,
// including those in the parent directories of a file that does not exist yet, and the real
// path must still lie inside a root, so a link cannot lead out. A dangling link is refused
// (writing through it would create a file wherever it points). Extensions, existence and size
// are checked on the real file.
//
// Check returns the resolved real path: callers should open that path, not the one they were
// given. The check cannot stop a concurrent process from swapping a directory for a link
// between the check and the open; confine the tool's own process as well where that matters.
//
// The file_check builtin (Middleware, stage tool) checks the path_arg of a tool that declares
// one before the inner layers run; a refusal (or another argument whose name differs from
// path_arg only in case, which a tool decoding case-insensitively may read instead) blocks the
// call with a *runtime.BlockedError naming the layer, and on success the tool sees the resolved real path in its arguments (a
// copy; the caller's map is untouched). Relative roots are taken from the working directory
// at Build.
package filecheck
