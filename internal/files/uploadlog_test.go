package files

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// At the default level a small upload logs one line, when it is done, and
// that line says what was stored; the line when it starts is a debug one.
func TestUploadLogsOneLineAtInfo(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"upload finished"}},
		{slog.LevelDebug, []string{"upload started", "upload finished"}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var out bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: tc.level}))
			ids := []string{"A", "B", "C"}
			s, _ := newService(t, newGateNodes(ids...), ids, func(o *Options) { o.Logger = log })
			res, err := s.Upload(context.Background(), UploadRequest{FileName: "notes.txt", Body: strings.NewReader("hello")})
			require.NoError(t, err)

			var msgs []string
			var last map[string]any
			for line := range strings.Lines(out.String()) {
				last = map[string]any{}
				require.NoError(t, json.Unmarshal([]byte(line), &last))
				msgs = append(msgs, last["msg"].(string))
			}
			require.Equal(t, tc.want, msgs)
			require.Equal(t, res.FileID, last["file"])
			require.Equal(t, "notes.txt", last["name"])
			require.EqualValues(t, 5, last["bytes"])
			require.EqualValues(t, 3, last["copies"])
		})
	}
}
