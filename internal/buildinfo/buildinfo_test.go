package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromInfo(t *testing.T) {
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "141c6d7abc"}
	cases := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"module version", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{rev}}, "v1.2.3"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{rev, {Key: "vcs.modified", Value: "false"}}}, "141c6d7abc"},
		{"dirty checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{rev, {Key: "vcs.modified", Value: "true"}}}, "141c6d7abc-dirty"},
		{"nothing known", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"no main version", debug.BuildInfo{}, "devel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, fromInfo(&tc.info))
		})
	}
}
