package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want Info
	}{
		{
			name: "release build from a clean tree",
			bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.modified", Value: "false"},
			}},
			want: Info{Version: "v1.2.3", GoVersion: "go1.26.0", Commit: "0123456789abcdef0123456789abcdef01234567"},
		},
		{
			name: "working tree with changes",
			bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "abc"},
				{Key: "vcs.modified", Value: "true"},
			}},
			want: Info{Version: "devel", GoVersion: "go1.26.0", Commit: "abc", Modified: true},
		},
		{
			name: "no VCS information (go run, -buildvcs=false)",
			bi:   debug.BuildInfo{Main: debug.Module{Version: ""}},
			want: Info{Version: "devel", GoVersion: runtime.Version(), Commit: "unknown"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "v1.2.3", GoVersion: "go1.26.0", Commit: "abc", Modified: true}
	if got, want := i.String(), "mosaic v1.2.3 (commit abc, modified) go1.26.0"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestRead checks that a test binary's own build information is read: it
// has a Go version, whatever the rest says.
func TestRead(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Commit == "" {
		t.Errorf("Read() = %+v", i)
	}
}
