package postgres_test

import (
	"testing"

	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func TestCheckpoints(t *testing.T) {
	s := open(t)
	storetest.Checkpoints(t, s)
}
