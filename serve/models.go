package serve

import "time"

// listModels answers GET /v1/models: the policy's models (what a client may
// name in "model"), in OpenAI's list format, or in Anthropic's when the
// request carries the anthropic-version header (Anthropic clients send it).
func (s *Server) listModels(x *exchange) {
	now := time.Now()
	if x.r.Header.Get("anthropic-version") != "" {
		type model struct {
			ID          string `json:"id"`
			Type        string `json:"type"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		}
		out := struct {
			Data    []model `json:"data"`
			HasMore bool    `json:"has_more"`
			FirstID *string `json:"first_id"`
			LastID  *string `json:"last_id"`
		}{Data: []model{}}
		for _, name := range x.g.models {
			out.Data = append(out.Data, model{ID: name, Type: "model", DisplayName: name, CreatedAt: now.UTC().Format(time.RFC3339)})
		}
		if n := len(out.Data); n > 0 {
			out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
		}
		x.writeJSON(200, out)
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range x.g.models {
		out.Data = append(out.Data, model{ID: name, Object: "model", Created: now.Unix(), OwnedBy: x.g.plan.Policy})
	}
	x.writeJSON(200, out)
}
