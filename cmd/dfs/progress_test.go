package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRenderProgress(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		label       string
		n, total    int64
		elapsed     time.Duration
		sent        time.Duration
		waiting     string
		final       bool
		want        string
		wantExactly bool
	}{
		{name: "start", label: "big.iso", n: 0, total: 100 * mib, elapsed: 0,
			want: "big.iso          [>                 ]   0%       0 B / 100.0 MiB -", wantExactly: true},
		{name: "half way", label: "big.iso", n: 50 * mib, total: 100 * mib, elapsed: 2 * time.Second,
			want: "big.iso          [=========>        ]  50%  50.0 MiB / 100.0 MiB 25.0 MiB/s", wantExactly: true},
		{name: "waiting after the last byte", label: "big.iso", n: 100 * mib, total: 100 * mib, elapsed: 5 * time.Second, waiting: "storing the copies…",
			want: "big.iso          [==================] 100% storing the copies…", wantExactly: true},
		{name: "unknown size", label: "stdin", n: 3 * mib, total: -1, elapsed: time.Second,
			want: "stdin               3.0 MiB  3.0 MiB/s", wantExactly: true},
		{name: "final", label: "big.iso", n: 100 * mib, total: 100 * mib, elapsed: 4 * time.Second,
			final: true, want: "big.iso          100.0 MiB in 4s (25.0 MiB/s)", wantExactly: true},
		{name: "final after waiting", label: "big.iso", n: 100 * mib, total: 100 * mib, elapsed: 4 * time.Second, sent: time.Second,
			waiting: "storing…", final: true, want: "big.iso          100.0 MiB in 4s (25.0 MiB/s); sent in 1s (100.0 MiB/s)", wantExactly: true},
		{name: "widest line", label: strings.Repeat("w", 16), n: 1023*mib + 900<<10, total: 1023<<30 + 900<<20, elapsed: time.Second,
			want: "1023.9 MiB / 1023.9 GiB 1023.9 MiB/s"},
		{name: "long label is cut", label: strings.Repeat("é", 30), n: 1, total: 2, elapsed: time.Second,
			want: strings.Repeat("é", 15) + "… ["},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderProgress(tt.label, tt.n, tt.total, tt.elapsed, tt.sent, tt.waiting, tt.final)
			if tt.wantExactly {
				require.Equal(t, tt.want, got)
			} else {
				require.Contains(t, got, tt.want)
			}
			require.LessOrEqual(t, len([]rune(got)), 80, "fits a terminal line")
		})
	}
}

func TestProgressDrawsOnlyWhenAsked(t *testing.T) {
	tests := []struct {
		name     string
		draw     bool
		total    int64
		wantDraw bool
	}{
		{"large on a terminal", true, 2 << 20, true},
		{"unknown size on a terminal", true, -1, true},
		{"small on a terminal", true, 1000, false},
		{"large into a pipe", false, 2 << 20, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var screen bytes.Buffer
			p := newProgress(&screen, tt.draw, "f", tt.total, "")
			var sink bytes.Buffer
			_, err := io.Copy(p.writer(&sink), strings.NewReader("12345"))
			require.NoError(t, err)
			p.done(true)
			require.Equal(t, int64(5), p.n.Load(), "counted either way")
			require.Equal(t, "12345", sink.String())
			if tt.wantDraw {
				require.Contains(t, screen.String(), "f                5 B in ")
				require.True(t, strings.HasSuffix(screen.String(), "\n"))
			} else {
				require.Empty(t, screen.String())
			}
		})
	}
}

func TestFailedTransferErasesTheBar(t *testing.T) {
	var screen bytes.Buffer
	p := newProgress(&screen, true, "f", 4<<20, "")
	_, err := io.Copy(io.Discard, p.reader(strings.NewReader("abc")))
	require.NoError(t, err)
	p.done(false)
	require.True(t, strings.HasSuffix(screen.String(), "\r\x1b[K"), "%q", screen.String())
}

func TestIsTerminal(t *testing.T) {
	require.False(t, isTerminal(&bytes.Buffer{}))
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	require.False(t, isTerminal(f), "a regular file is not a terminal")
}
