package plan

import "path/filepath"

// PosIn returns pos, a position of the plan ("file:line:col", its file
// relative to the policy's directory as the compiler writes it), with its
// file joined to dir, the policy's directory as a command was given it
// ("pol" gives "pol/policy.cue:8:34"): the form vet and the other
// messages name a position in. An empty pos, or one whose file is
// absolute, and an empty dir leave pos as it is.
func PosIn(dir, pos string) string {
	if dir == "" || pos == "" || filepath.IsAbs(pos) {
		return pos
	}
	return filepath.Join(dir, filepath.FromSlash(pos))
}
