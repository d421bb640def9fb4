package watchcodec

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

func TestKubeTypesMinorIsGoMods(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api v0\.(\d+)\.`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/api v0.N.x")
	}
	if string(m[1]) != strconv.Itoa(KubeTypesMinor) {
		t.Fatalf("go.mod requires k8s.io/api v0.%s, KubeTypesMinor is %d", m[1], KubeTypesMinor)
	}
}

func TestProtobufLossless(t *testing.T) {
	built := KubeTypesMinor
	for _, c := range []struct {
		major, minor string
		want         bool
	}{
		{"1", strconv.Itoa(built), true},
		{"1", strconv.Itoa(built) + "+", true},
		{"1", strconv.Itoa(built - 5), true},
		{"1", strconv.Itoa(built + 1), false},
		{"1", strconv.Itoa(built+1) + "+", false},
		{"2", "0", false},
		{"1", "", false},
		{"", "", false},
		{"1", "x", false},
	} {
		got, why := ProtobufLossless(&version.Info{Major: c.major, Minor: c.minor})
		if got != c.want || (got == (why != "")) {
			t.Errorf("ProtobufLossless(%s.%s) = %v, %q; want %v (and a reason when false)", c.major, c.minor, got, why, c.want)
		}
	}
}

func TestProtobufKinds(t *testing.T) {
	for gvk, want := range map[schema.GroupVersionKind]bool{
		{Version: "v1", Kind: "Pod"}:                                     true,
		{Group: "apps", Version: "v1", Kind: "Deployment"}:               true,
		{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}:     true,
		{Version: "v1", Kind: "Status"}:                                  false,
		{Group: "apps", Version: "v1", Kind: "WatchEvent"}:               false,
		{Group: "apps", Version: "v1", Kind: "DeleteOptions"}:            false,
		{Group: "apps", Version: "v99", Kind: "Deployment"}:              false,
		{Group: "example.com", Version: "v1", Kind: "Widget"}:            false,
		{Group: "dcontroller.io", Version: "v1alpha1", Kind: "Operator"}: false,
	} {
		if got := Protobuf(gvk); got != want {
			t.Errorf("Protobuf(%v) = %v, want %v", gvk, got, want)
		}
	}
}
