package redisx

import (
	"log/slog"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Fault tests make go-redis print a line per failed dial.
	RouteDriverLogs(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}
