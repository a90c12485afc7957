package plan_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime/plan"
)

func TestPosIn(t *testing.T) {
	assert.Equal(t, filepath.FromSlash("pol/policy.cue:8:34"), plan.PosIn("pol", "policy.cue:8:34"))
	assert.Equal(t, filepath.FromSlash("pol/sub/a.cue:1:2"), plan.PosIn("./pol/", "sub/a.cue:1:2"))
	assert.Equal(t, "policy.cue:8:34", plan.PosIn("", "policy.cue:8:34"))
	assert.Equal(t, "", plan.PosIn("pol", ""))
	abs := filepath.Join(t.TempDir(), "policy.cue:1:1")
	assert.Equal(t, abs, plan.PosIn("pol", abs))
}
