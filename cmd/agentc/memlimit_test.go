package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "800MB": 800e6, "4096": 4096, " 1 GiB ": 1 << 30, "64KiB": 64 << 10} {
		got, err := parseBytes(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-5MiB", "1.5GiB", "12x", "GiB", "99999999999GiB"} {
		_, err := parseBytes(in)
		assert.Error(t, err, in)
	}
}

func TestMaxMemoryFromTheEnvironment(t *testing.T) {
	t.Setenv("AGENTC_MAX_MEMORY", "")
	n, err := maxMemory()
	require.NoError(t, err)
	assert.Equal(t, defaultMaxMemory, n)
	t.Setenv("AGENTC_MAX_MEMORY", "300MiB")
	n, err = maxMemory()
	require.NoError(t, err)
	assert.Equal(t, int64(300<<20), n)
	t.Setenv("AGENTC_MAX_MEMORY", "lots")
	_, err = maxMemory()
	assert.ErrorContains(t, err, `AGENTC_MAX_MEMORY="lots": want a positive size`)
}
