package postgres

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/testenv"
	"github.com/dfs-project/dfs/migrations"
)

func exec(t *testing.T, dbURL, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

func TestRefusesUnknownSchema(t *testing.T) {
	cases := []struct {
		name, update, want string
	}{
		{"newer version", `UPDATE schema_migrations SET version = 999`, "newer than this program knows"},
		{"dirty", `UPDATE schema_migrations SET dirty = true`, "dirty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := testenv.NewPostgresDB(t)
			s := openTest(t, dbURL)
			require.NoError(t, s.Close())
			exec(t, dbURL, tc.update)

			_, err := Open(context.Background(), dbURL, nil)
			require.Error(t, err)
			require.Equal(t, errs.Conflict, errs.KindOf(err))
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRestartKeepsData(t *testing.T) {
	dbURL := testenv.NewPostgresDB(t)
	ctx := context.Background()
	s, err := Open(ctx, dbURL, nil)
	require.NoError(t, err)
	n := &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}
	require.NoError(t, s.CreateNode(ctx, n))
	rec := &meta.FileRecord{
		File:     meta.File{ID: uuid.NewString(), Name: "a", Status: meta.FileActive, ReplicationFactor: 1, PrimaryNodeID: "node-1"},
		Replicas: []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}},
	}
	require.NoError(t, s.CreateFile(ctx, rec))
	require.NoError(t, s.Close())

	s = openTest(t, dbURL)
	gotNode, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, *n, gotNode)
	gotFile, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, gotFile)
}

// TestDownMigrationReverts runs the down migrations and then Open again, so
// the down files are known to be valid and complete.
func TestDownMigrationReverts(t *testing.T) {
	dbURL := testenv.NewPostgresDB(t)
	s := openTest(t, dbURL)
	db := stdlib.OpenDBFromPool(s.pool)
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	require.NoError(t, err)
	src, err := iofs.New(migrations.Postgres, migrations.PostgresDir)
	require.NoError(t, err)
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	require.NoError(t, err)
	require.NoError(t, m.Down())
	_, _ = m.Close()

	var tables int
	require.NoError(t, s.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'`).Scan(&tables))
	require.Zero(t, tables, "down drops every table")

	s = openTest(t, dbURL)
	require.NoError(t, s.CreateNode(context.Background(), &meta.Node{ID: "n", Host: "h", Port: 1, Status: meta.NodeHealthy}))
}

// proxy forwards TCP connections to target until it is stopped, so a test
// can take the database away from a running store without stopping the
// shared server.
type proxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target, addr string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p := &proxy{target: target, ln: ln}
	p.wg.Go(p.serve)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
	}
}

// stop closes the listener and cuts every connection, as a crashed server would.
func (p *proxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func viaAddr(t *testing.T, dbURL, addr string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Host = addr
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	return u.String()
}

func requireUnavailable(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err), "%v", err)
	require.Equal(t, "METADATA_UNAVAILABLE", errs.CodeOf(err), "%v", err)
}

func TestDatabaseDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := ln.Addr().String()
	require.NoError(t, ln.Close())

	start := time.Now()
	_, err = Open(context.Background(), viaAddr(t, testenv.PostgresURL(t), closedAddr), nil)
	requireUnavailable(t, err)
	t.Logf("Open against a closed port failed in %s: %v", time.Since(start), err)
}

// TestDatabaseSilent covers a server that accepts connections but never
// answers (a hung or SIGSTOPped database): the store gives up after its
// acquire timeout instead of waiting for the caller's context.
func TestDatabaseSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})

	start := time.Now()
	_, err = Open(context.Background(), viaAddr(t, testenv.PostgresURL(t), ln.Addr().String()), nil)
	requireUnavailable(t, err)
	t.Logf("Open against a silent server failed in %s: %v", time.Since(start), err)
}

// TestDatabaseLostAndBack takes the database away from a running store, then
// brings it back: calls fail as unavailable meanwhile and work again after,
// without reopening the store.
func TestDatabaseLostAndBack(t *testing.T) {
	dbURL := testenv.NewPostgresDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	p := startProxy(t, u.Host, "127.0.0.1:0")
	addr := p.ln.Addr().String()
	s := openTest(t, viaAddr(t, dbURL, addr))
	ctx := context.Background()
	require.NoError(t, s.CreateNode(ctx, &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}))

	p.stop()
	start := time.Now()
	_, err = s.GetNode(ctx, "node-1")
	requireUnavailable(t, err)
	requireUnavailable(t, s.Ping(ctx))
	_, err = s.ListNodes(ctx)
	requireUnavailable(t, err)
	t.Logf("three calls with the database gone failed in %s", time.Since(start))

	startProxy(t, u.Host, addr)
	require.Eventually(t, func() bool { return s.Ping(ctx) == nil }, 20*time.Second, 50*time.Millisecond,
		"the store reconnects by itself")
	n, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, "node-1", n.ID)
}

func TestMalformedURLIsInvalid(t *testing.T) {
	_, err := Open(context.Background(), "postgres://user:secret@127.0.0.1:5432/db?connect_timeout=soon", nil)
	require.Error(t, err)
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.NotContains(t, err.Error(), "secret", "the password is not repeated in errors")
}

// TestIndexedQueries checks that the failure, repair and join paths and a
// page of an S3 listing can be served by an index: with sequential scans
// disabled, the plan uses the expected index (a tiny test table would
// otherwise be scanned).
func TestIndexedQueries(t *testing.T) {
	s := openTest(t, testenv.NewPostgresDB(t))
	cases := []struct {
		name, query, index string
	}{
		{"files on a node", `SELECT DISTINCT file_id::text FROM file_replicas WHERE node_id = 'n' ORDER BY 1`, "file_replicas_node_status_idx"},
		{"files by status", `SELECT id::text FROM files WHERE status = ANY('{PENDING,DEGRADED}') AND updated_at < now() ORDER BY active_copies, updated_at, id LIMIT 5`, "files_status_updated_at_idx"},
		{"files in ranges", `SELECT f.id::text FROM unnest('{1,5}'::bigint[], '{2,9}'::bigint[]) AS r(lo, hi)
			JOIN files f ON f.ring_position BETWEEN r.lo AND r.hi ORDER BY f.ring_position, f.id`, "files_ring_position_idx"},
		{"files by risk", strings.Replace(sqlFileIDsByRisk, "$1", "'{0b6d5c1e-8f0a-4a8e-9c52-3d1f0f6e2a11}'", 1), "files_pkey"},
		{"repair queue", sqlRepairQueue, "files_durability_idx"},
		{"durability of chunked files", strings.ReplaceAll(sqlDurabilityChunked, "$1", "'{node-1}'::text[]"), "files_durability_idx"},
		{"durability of chunked files by node", strings.ReplaceAll(sqlDurabilityChunkedByNode, "$1", "'{node-1}'::text[]"), "files_durability_idx"},
		{"a page of a bucket's keys", strings.NewReplacer("$1", "'b'", "$2", `'\x61'::bytea`, "$3", `'\x61'::bytea`, "$4", `'\x62'::bytea`,
			"$5", "10").Replace(objectsAfterSQL), "objects_pkey"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := s.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off`)
			require.NoError(t, err)
			rows, err := tx.Query(ctx, `EXPLAIN `+tc.query)
			require.NoError(t, err)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			plan := strings.Join(lines, "\n")
			require.Contains(t, plan, tc.index, plan)
			require.NotContains(t, plan, "Seq Scan on files", plan)
		})
	}
}
