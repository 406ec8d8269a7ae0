//go:build unix

package redistest

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/redisx/redisproc"
)

func TestKillRestart(t *testing.T) {
	s := Start(t)
	require.NoError(t, redisproc.Ping(s.Addr()))
	require.Contains(t, s.URL(), s.Addr())

	s.Kill()
	require.Error(t, redisproc.Ping(s.Addr()), "a killed server does not answer")

	s.Restart()
	require.NoError(t, redisproc.Ping(s.Addr()), "the restarted server answers on the same address")
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	s.Pause()
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err, "the kernel still accepts connections to a paused server")
	defer c.Close()
	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = c.Read(make([]byte, 16))
	require.Error(t, err, "a paused server answers nothing")

	s.Resume()
	require.NoError(t, redisproc.Ping(s.Addr()))
}

func TestTwoServersDoNotShareAPort(t *testing.T) {
	a, b := Start(t), Start(t)
	require.NotEqual(t, a.Addr(), b.Addr())
	a.Kill()
	require.NoError(t, redisproc.Ping(b.Addr()), "killing one server leaves the other running")
}
