package daemonargs

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/buildinfo"
)

func TestHandle(t *testing.T) {
	cases := []struct {
		args         []string
		code         int
		handled      bool
		stdout, errs string
	}{
		{nil, ExitOK, false, "", ""},
		{[]string{"-h"}, ExitOK, true, "d: about\n\nhelp\nversion " + buildinfo.Version() + "\n", ""},
		{[]string{"-help"}, ExitOK, true, "d: about\n\nhelp\nversion " + buildinfo.Version() + "\n", ""},
		{[]string{"--help"}, ExitOK, true, "d: about\n\nhelp\nversion " + buildinfo.Version() + "\n", ""},
		{[]string{"--version"}, ExitOK, true, "d " + buildinfo.Version() + "\n", ""},
		{[]string{"-version"}, ExitOK, true, "d " + buildinfo.Version() + "\n", ""},
		{[]string{"-port"}, ExitUsage, true, "", `d: unexpected argument "-port"`},
		{[]string{"serve"}, ExitUsage, true, "", `d: unexpected argument "serve"`},
		{[]string{"-h", "x"}, ExitUsage, true, "", `d: unexpected argument "x"`},
		{[]string{"x", "-h"}, ExitUsage, true, "", `d: unexpected argument "x"`},
	}
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		code, handled := Handle("d", "about", "help", tc.args, &stdout, &stderr)
		require.Equal(t, tc.code, code, "%q", tc.args)
		require.Equal(t, tc.handled, handled, "%q", tc.args)
		require.Equal(t, tc.stdout, stdout.String(), "%q", tc.args)
		if tc.errs == "" {
			require.Empty(t, stderr.String(), "%q", tc.args)
		} else {
			require.Contains(t, stderr.String(), tc.errs, "%q", tc.args)
		}
	}
}
