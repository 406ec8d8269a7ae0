package redisproc_test

import (
	"bufio"
	"net"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/redisx/redisproc"
)

// answering listens on loopback and answers every line with reply.
func answering(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					_, _ = c.Write([]byte(reply))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestPingTellsARedisFromAnythingElse(t *testing.T) {
	require.NoError(t, redisproc.Ping(answering(t, "+PONG\r\n")))
	err := redisproc.Ping(answering(t, "-LOADING Redis is loading the dataset in memory\r\n"))
	require.ErrorContains(t, err, `PING answered "-LOADING`)
	require.Error(t, redisproc.Ping(answering(t, "HTTP/1.1 400 Bad Request\r\n")))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	require.Error(t, redisproc.Ping(addr), "nothing listening")
}

func TestCommandIsAPrivateServer(t *testing.T) {
	cmd := redisproc.Command("/usr/bin/redis-server", 6390, "/tmp/r")
	args := cmd.Args[1:]
	for _, pair := range [][2]string{{"--port", "6390"}, {"--bind", "127.0.0.1"}, {"--save", ""}, {"--appendonly", "no"}, {"--dir", "/tmp/r"}, {"--daemonize", "no"}} {
		i := slices.Index(args, pair[0])
		require.GreaterOrEqual(t, i, 0, "%s is set", pair[0])
		require.Equal(t, pair[1], args[i+1], pair[0])
	}
}
