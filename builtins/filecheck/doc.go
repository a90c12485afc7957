// Package filecheck vets file-path arguments before a tool touches the file: the logic behind
// the file_check builtin.
//
// A path is confined to a set of root directories. Relative paths are taken from the first
// root; ".." may move around inside a root but never out of it. Symbolic links are resolved,
// including those in the parent directories of a file that does not exist yet, and the real
// path must still lie inside a root, so a link cannot lead out. A dangling link is refused
// (writing through it would create a file wherever it points). Extensions, existence and size
// are checked on the real file. A hard link cannot be traced that way: a regular file with
// more than one name may be a name inside the roots for a file outside them, so one is
// refused unless Config.AllowHardLinks admits them (on unix systems, which count a file's
// names; elsewhere the count is not read and a hard link passes). A path another reader could take for a different file is
// refused rather than guessed at: one with a backslash (a separator to code written for
// Windows), a percent escape of ".", "/", "\\", NUL or "%" (decoded by a tool that hands the
// path on in a URL), a leading "~" (expanded by a shell) or a control character.
//
// Check returns the resolved real path: callers should open that path, not the one they were
// given. The check cannot stop a concurrent process from swapping a directory for a link
// between the check and the open; confine the tool's own process as well where that matters.
//
// The file_check builtin (Middleware, stage tool) checks every path the path_arg of a tool
// references before the inner layers run: a top-level argument name, a JSON pointer into the
// arguments ("/files/*/path", "*" being every element of an array), or a list of them. A
// refusal of any one, a referenced argument that is missing or not a string, or an object
// member beside a referenced one whose name differs from it only in case (which a tool
// decoding case-insensitively may read instead) blocks the call with a *runtime.BlockedError
// naming the layer, and on success the tool sees each resolved real path in its arguments (a
// copy; the caller's arguments are untouched). Only the layers inside it (after it in the chain) see
// the resolved path; a layer outside it sees the path as the call spells it, so a check of
// the path (a tool_policy arg_patterns entry on the argument, a guard reading args.path)
// belongs inside file_check, where "ws/./private/p.txt", "ws/.env/.", a relative path and a
// link all read as the one real path: vet reports one outside it
// (order/path-check-outside-file-check). A call proposed rather than run here
// (Middleware.AdmitTool: a gateway relays it to the client, which runs the tool on the path as
// the model wrote it) must give absolute paths: a relative one is refused; the layers inside
// it decide the proposal on the resolved real path as well, which is the file the client
// opens, while the call is relayed as the model wrote it. A tool without
// path_arg passes unchecked, but for one the layer's tools: names (an MCP tool the policy does
// not declare, one an upstream added after the load): the layer was scoped to it to check its
// paths and cannot tell which argument holds one, so its calls are refused. Relative roots are taken from runtime.Deps.Dir
// (the policy's directory under the agentc commands), else from the working directory at Build.
package filecheck
