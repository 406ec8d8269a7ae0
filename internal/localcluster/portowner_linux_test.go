package localcluster

import (
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdsPort tells the process that listens on a port from any other.
func TestHoldsPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.True(t, holdsPort(os.Getpid(), port), "this process listens on %d", port)

	other := exec.Command("sleep", "30")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	require.False(t, holdsPort(other.Process.Pid, port), "another process does not")

	require.NoError(t, l.Close())
	require.False(t, holdsPort(os.Getpid(), port), "a closed listener holds nothing")

	low, err := net.Listen("tcp6", "[::1]:0")
	if err == nil { // IPv6 loopback may be absent
		defer low.Close()
		require.True(t, holdsPort(os.Getpid(), low.Addr().(*net.TCPAddr).Port), "tcp6 listeners count too")
	}
}
