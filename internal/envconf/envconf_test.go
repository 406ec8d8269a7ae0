package envconf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "4096", want: 4096},
		{in: "512MB", want: 512 << 20},
		{in: "512MiB", want: 512 << 20},
		{in: "1GB", want: 1 << 30},
		{in: "1gib", want: 1 << 30},
		{in: "10 KB", want: 10 << 10},
		{in: "3KiB", want: 3 << 10},
		{in: "7B", want: 7},
		{in: "2T", want: 2 << 40},
		{in: "-1", bad: true},
		{in: "1.5GB", bad: true},
		{in: "MB", bad: true},
		{in: "lots", bad: true},
		{in: "9999999999999GB", bad: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseSize(c.in)
			if c.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestLoaderReadsTypedValues(t *testing.T) {
	l := FromMap(map[string]string{
		"S": "value", "I": "42", "B": "false", "D": "2m", "Z": "1KB", "P": "9000", "O": "JSON",
	})
	require.Equal(t, "value", l.String("S", "x"))
	require.Equal(t, 42, l.Int("I", 1, 0, 100))
	require.False(t, l.Bool("B", true))
	require.Equal(t, 2*time.Minute, l.Duration("D", time.Second))
	require.Equal(t, int64(1024), l.Size("Z", 1))
	require.Equal(t, 9000, l.Port("P", 1))
	require.Equal(t, "json", l.OneOf("O", "text", "text", "json"))
	require.NoError(t, l.Err())
}

func TestLoaderDurationOrZeroTakesZeroButNotLess(t *testing.T) {
	l := FromMap(map[string]string{"ZERO": "0s", "SOME": "250ms", "NEG": "-1s"})
	require.Equal(t, time.Duration(0), l.DurationOrZero("ZERO", time.Second))
	require.Equal(t, 250*time.Millisecond, l.DurationOrZero("SOME", time.Second))
	require.NoError(t, l.Err())
	require.Equal(t, time.Second, l.DurationOrZero("NEG", time.Second))
	require.ErrorContains(t, l.Err(), "NEG=")
	l.Duration("ZERO", time.Second)
	require.ErrorContains(t, l.Err(), "ZERO=", "Duration still refuses zero")
}

func TestLoaderDefaultsWhenUnsetOrBlank(t *testing.T) {
	l := FromMap(map[string]string{"BLANK": "   "})
	require.Equal(t, "d", l.String("BLANK", "d"))
	require.Equal(t, 7, l.Int("MISSING", 7, 0, 10))
	require.True(t, l.Bool("MISSING", true))
	require.Equal(t, time.Second, l.Duration("MISSING", time.Second))
	require.NoError(t, l.Err())
}

func TestLoaderReportsEveryBadVariableByName(t *testing.T) {
	l := FromMap(map[string]string{
		"I": "x", "R": "500", "B": "maybe", "D": "10", "N": "-1s", "Z": "big", "O": "yaml",
	})
	l.Int("I", 0, 0, 10)
	l.Int("R", 0, 0, 10)
	l.Bool("B", false)
	l.Duration("D", 0)
	l.Duration("N", 0)
	l.Size("Z", 0)
	l.OneOf("O", "text", "text", "json")
	err := l.Err()
	require.Error(t, err)
	for _, name := range []string{"I=", "R=", "B=", "D=", "N=", "Z=", "O="} {
		require.Contains(t, err.Error(), name)
	}
}
