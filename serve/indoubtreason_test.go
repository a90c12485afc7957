package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/runtime"
)

// A 409's body said the call was in doubt (kind in_doubt) and named the
// layer, but not why: a client telling a call whose key form changed
// (settle it by resuming with the digest key it was saved with) from one
// that stopped before its outcome was recorded had to parse the message.
// Both formats carry the reason (InDoubtError.Reason), and none for the
// zero reason (an earlier execution stopped), as before.
func TestAnInDoubtErrorBodySaysWhy(t *testing.T) {
	changed := fmt.Errorf("tool: %w", &runtime.InDoubtError{Layer: "checkpoint", Tool: "charge", Reason: runtime.InDoubtKeyFormChanged, Call: "1:c1:hmac-sha256:0123456789abcdef"})
	stopped := fmt.Errorf("tool: %w", &runtime.InDoubtError{Layer: "idempotent", Tool: "charge", IdempotencyKey: "k"})
	const path = "error" // both formats hold the error under "error"
	for _, a := range []api{apiOpenAI, apiAnthropic} {
		b, err := json.Marshal(callError(a, http.StatusConflict, changed).body(a))
		require.NoError(t, err)
		assert.Equal(t, string(runtime.InDoubtKeyFormChanged), gjson.GetBytes(b, path+".reason").String(), "api %d: %s", a, b)
		assert.Equal(t, "in_doubt", gjson.GetBytes(b, path+".kind").String())
		assert.Contains(t, gjson.GetBytes(b, path+".message").String(), "key form changed")

		b, err = json.Marshal(callError(a, http.StatusConflict, stopped).body(a))
		require.NoError(t, err)
		assert.False(t, gjson.GetBytes(b, path+".reason").Exists(), "api %d: %s", a, b)
	}
}
