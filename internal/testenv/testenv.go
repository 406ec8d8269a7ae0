// Package testenv gives integration tests the services they need: a fresh
// PostgreSQL database per test and a Redis URL.
//
// Tests find the services through DFS_TEST_POSTGRES_URL and DFS_TEST_REDIS_URL
// (.ci/run and `make test` set both). When a variable is unset the test is
// skipped with a message naming it, except under CI (CI set to anything but
// "" or "false"), where a missing service fails the test: CI must never pass
// by skipping integration tests.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// InCI reports whether the tests run under continuous integration.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

func need(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if InCI() {
			t.Fatalf("%s is not set: integration tests cannot reach their service (run them through `make test` or .ci/run)", name)
		}
		t.Skipf("skipping: set %s to run this integration test (`make test` does)", name)
	}
	return v
}

// RedisURL returns the Redis URL for tests.
func RedisURL(t testing.TB) string {
	t.Helper()
	return need(t, "DFS_TEST_REDIS_URL")
}

// PostgresURL returns the server URL for tests (its database is a maintenance
// database; use NewPostgresDB for a database of one's own).
func PostgresURL(t testing.TB) string {
	t.Helper()
	return need(t, "DFS_TEST_POSTGRES_URL")
}

// NewPostgresDB creates an empty database for this test, drops it when the
// test ends, and returns its URL.
func NewPostgresDB(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL at DFS_TEST_POSTGRES_URL: %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "dfs_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse DFS_TEST_POSTGRES_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
