package runtime

import (
	"encoding/json"
	"fmt"
)

// ValidateConfig checks a layer's config the way Build does before it
// provisions anything: it creates the module registered under id, decodes
// raw into it (unknown fields are errors) and runs its Validate. It opens no
// store and needs no deps, so agentc vet can run it. known is false when no
// module is registered under id (nothing was checked). A Validate that
// depends on provisioned state and panics without it is treated as passing:
// Build checks it again.
func ValidateConfig(id string, raw json.RawMessage) (known bool, err error) {
	m, ok := LookupModule(id)
	if !ok {
		return false, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = nil
		}
	}()
	inst := m.New()
	if err := decodeConfig(inst, raw); err != nil {
		return true, fmt.Errorf("decode config: %w", err)
	}
	if v, ok := inst.(Validator); ok {
		if err := v.Validate(); err != nil {
			return true, err
		}
	}
	return true, nil
}
