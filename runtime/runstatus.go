package runtime

import "strings"

// RunStatus is where a run stands, as a checkpoint records it.
type RunStatus string

// The run statuses. Done, failed and cancelled are terminal: a run in one
// of them is never resumed.
const (
	RunRunning   RunStatus = "running"
	RunDone      RunStatus = "done"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Terminal reports whether the status ends the run.
func (s RunStatus) Terminal() bool {
	return s == RunDone || s == RunFailed || s == RunCancelled
}

// ToolRecord is one tool result of a run, as a checkpoint saves it.
type ToolRecord struct {
	// Tool is the tool's name and Result what the tool chain returned
	// (Error its failure's text instead).
	Tool   string `json:"tool"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// minTaint is the shortest secret string a checkpoint looks for: shorter
// ones (a digit, "ok") would refuse saves of unrelated text.
const minTaint = 4

// addTaint records the strings (and the text of the numbers) of a secret
// value, so that no copy of them is persisted.
func addTaint(taint map[string]struct{}, v any) {
	switch x := v.(type) {
	case string:
		if s := strings.TrimSpace(x); len(s) >= minTaint {
			taint[s] = struct{}{}
		}
	case []any:
		for _, e := range x {
			addTaint(taint, e)
		}
	case map[string]any:
		for _, e := range x {
			addTaint(taint, e)
		}
	}
}
