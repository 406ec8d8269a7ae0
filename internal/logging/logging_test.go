package logging

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFormatAndLevel(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "warn", "json")
	require.NoError(t, err)
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "one JSON line: %s", buf.String())
	require.Equal(t, "shown", line["msg"])

	buf.Reset()
	log, err = New(&buf, "debug", "text")
	require.NoError(t, err)
	log.Debug("visible")
	require.Contains(t, buf.String(), "msg=visible")
}

func TestRejectsUnknownValues(t *testing.T) {
	_, err := New(&bytes.Buffer{}, "loud", "text")
	require.ErrorContains(t, err, "LOG_LEVEL")
	_, err = New(&bytes.Buffer{}, "info", "xml")
	require.ErrorContains(t, err, "LOG_FORMAT")
}
