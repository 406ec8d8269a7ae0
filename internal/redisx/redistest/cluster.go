//go:build unix

package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is how long a cluster node goes unanswered before the
// others count it failed; short, so that a test's kill is noticed within
// about a second.
const clusterNodeTimeout = time.Second

// Cluster is a private Redis Cluster of masters without replicas, put
// together by redis-cli --cluster create: the slots are split evenly, and
// killing a node loses its slots' keys until it is restarted (empty) while
// the other nodes go on serving theirs.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
}

// StartCluster starts a cluster of the given number of masters (at least 3,
// as redis-cli requires) and stops it when the test ends. It returns once
// every node reports the cluster's state ok and knows every other. Without
// redis-server or redis-cli the test is skipped, except under CI, where it
// fails.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	server := lookPath(t, "redis-server")
	cli := lookPath(t, "redis-cli")
	c := &Cluster{t: t}
	for range masters {
		c.Nodes = append(c.Nodes, start(t, server, true))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for i := range c.Nodes {
		c.AwaitOK(i)
	}
	return c
}

// Addrs is every node's host:port, as REDIS_CLUSTER_ADDRS lists them.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Node is the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Restart starts node i again after a Kill and returns once it serves its
// slots (see AwaitOK).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Nodes[i].Restart()
	c.AwaitOK(i)
}

// AwaitOK waits until node i reports cluster_state:ok with every slot
// assigned and every node known.
func (c *Cluster) AwaitOK(i int) {
	c.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: c.Nodes[i].Addr(), DisableIdentity: true})
	defer rdb.Close()
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_known_nodes":    strconv.Itoa(len(c.Nodes)),
	}
	var info string
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, _ = rdb.ClusterInfo(ctx).Result()
		cancel()
		if clusterInfoHas(info, want) {
			return
		}
	}
	c.t.Fatalf("redistest: cluster node %s is not ok after %v:\n%s", c.Nodes[i].Addr(), startTimeout, info)
}

// clusterInfoHas reports whether CLUSTER INFO's answer has each field at
// the value wanted.
func clusterInfoHas(info string, want map[string]string) bool {
	got := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
