//go:build unix

package redistest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// TestClusterKillRestart starts a three-master cluster, writes a key on
// every shard, kills the master of one and restarts it: the other shards
// keep their keys throughout, and the restarted one serves its slots again,
// empty.
func TestClusterKillRestart(t *testing.T) {
	c := StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// One key per shard: {a}, {b}, … until every master holds one.
	byNode := map[string]string{}
	for i := 0; len(byNode) < 3; i++ {
		key := "k{" + strconv.Itoa(i) + "}"
		m, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		if _, ok := byNode[m.Options().Addr]; !ok {
			byNode[m.Options().Addr] = key
			require.NoError(t, rdb.Set(ctx, key, "v", 0).Err())
		}
	}
	require.Len(t, byNode, 3, "every master holds slots")

	victim := c.Nodes[0].Addr()
	c.Nodes[0].Kill()
	for addr, key := range byNode {
		if addr == victim {
			continue
		}
		require.Equal(t, "v", rdb.Get(ctx, key).Val(), "a live shard keeps serving while another is dead")
	}

	c.Restart(0)
	require.Eventually(t, func() bool {
		return errors.Is(rdb.Get(ctx, byNode[victim]).Err(), redis.Nil)
	}, 10*time.Second, 50*time.Millisecond, "the restarted master serves its slots, without their keys")
}
