package harness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvListTakesKeyValuePairsOnly(t *testing.T) {
	var l EnvList
	require.NoError(t, l.Set("A=1"))
	require.NoError(t, l.Set("B="))
	require.Error(t, l.Set("novalue"))
	require.Error(t, l.Set("=x"))
	require.Equal(t, EnvList{"A=1", "B="}, l)
	require.Equal(t, "A=1 B=", l.String())
}
