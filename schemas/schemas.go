// Package schemas embeds agentc's schemas: the CUE definitions of a policy
// (#Policy and one closed definition per builtin, with the builtins' metadata
// and ordering constraints) and the JSON Schema of a compiled plan.
//
// The package holds data only and imports no CUE code, so the runtime can use
// the plan schema without linking CUE.
package schemas

import "embed"

// CUE holds the CUE files of package schemas (policy.cue and one file per
// builtin).
//
//go:embed *.cue
var CUE embed.FS

// CatalogJSON is the builtins' metadata and ordering constraints (the
// `builtins` and `constraints` fields of the CUE schema) evaluated to JSON,
// so that tools need not evaluate CUE to list them. A test keeps it in step
// with the CUE files.
//
//go:embed catalog.json
var CatalogJSON []byte

// PlanJSONSchema is the JSON Schema (draft 2020-12) of a compiled plan.
//
//go:embed plan.schema.json
var PlanJSONSchema []byte

// IdentifierPattern is the pattern of #Identifier (policy.cue), the names
// a policy writes for models, tools, stores, entries and tenants: ASCII
// letters, digits and _ . : / -, starting with a letter or _. A test keeps
// it in step with the CUE schema; code outside CUE (the MCP proxy, which
// withholds an upstream tool no rule could name) reads it from here.
const IdentifierPattern = `^[A-Za-z_][A-Za-z0-9_.:/-]*$`
