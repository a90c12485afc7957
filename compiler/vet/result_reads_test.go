package vet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/compiler/vet"
)

func TestResultReads(t *testing.T) {
	src := "result.note == 'é' && has(result.ok) || result['code'] == 1 || result.contains('x') || [1].exists(r, r == 1)"
	got := vet.ResultReads(src)
	var fields []string
	for _, r := range got {
		fields = append(fields, r.Field)
		assert.Equal(t, r.Field, src[r.Offset:r.Offset+len(r.Field)], "the offset of %s", r.Field)
	}
	assert.Equal(t, []string{"note", "ok", "code"}, fields)
	assert.Empty(t, vet.ResultReads("type(result) == string"))
}

func TestArgReads(t *testing.T) {
	src := "args.path.endsWith('.env') || has(args.dest) && args.dest != '' && args['files'].size() > 0 && result.path == ''"
	var fields []string
	for _, r := range vet.ArgReads(src) {
		fields = append(fields, r.Field)
		assert.Equal(t, r.Field, src[r.Offset:r.Offset+len(r.Field)], "the offset of %s", r.Field)
	}
	assert.Equal(t, []string{"path", "dest", "files"}, fields)
	assert.Empty(t, vet.ArgReads("string(args).contains('x')"))
}
