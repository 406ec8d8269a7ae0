package api

import (
	"mime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContentDispositionHasAPlainFallbackBesideTheEncodedName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"report.pdf", `attachment; filename=report.pdf`},
		{`a "quoted" name.txt`, `attachment; filename="a \"quoted\" name.txt"`},
		{"café menü.txt", `attachment; filename="caf_ men_.txt"; filename*=utf-8''caf%C3%A9%20men%C3%BC.txt`},
		{"日本.txt", `attachment; filename=__.txt; filename*=utf-8''%E6%97%A5%E6%9C%AC.txt`},
		{`C:\tmp\"é".txt`, `attachment; filename="C:\\tmp\\\"_\".txt"; filename*=utf-8''C%3A%5Ctmp%5C%22%C3%A9%22.txt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := contentDisposition(tc.name)
			require.Equal(t, tc.want, got)
			_, params, err := mime.ParseMediaType(got)
			require.NoError(t, err)
			require.Equal(t, tc.name, params["filename"], "a reader of filename* gets the exact name")
		})
	}
}
