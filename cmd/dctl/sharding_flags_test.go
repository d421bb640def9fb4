package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestShardingFlagErrors: dctl start refuses --sharding-* flags without
// --sharding and a --sharding-address other members cannot reach, before
// it contacts any cluster (exit 1 with a message naming the flag).
func TestShardingFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sharding-ring=r", "--sharding-identity=m1"}, "--sharding-identity, --sharding-ring: the --sharding-* flags apply only with --sharding"},
		{[]string{"--sharding", "--leader-elect"}, "exclude each other"},
		{[]string{"--sharding", "--sharding-address=m1.example"}, `--sharding-address "m1.example": want HOST:PORT`},
		{[]string{"--sharding", "--sharding-address=0.0.0.0:8443"}, "not an unspecified address"},
		{[]string{"--sharding", "--sharding-address=:8443"}, "not an unspecified address"},
		{[]string{"--sharding", "--sharding-address=m1:http"}, `port "http" is not a number`},
		{[]string{"--sharding", "--sharding-renew-deadline=10s", "--sharding-lease-duration=5s"}, "must be shorter than --sharding-lease-duration"},
		{[]string{"--sharding", "--sharding-max-peer-lease-duration=10s"}, "--sharding-max-peer-lease-duration (10s) must not be shorter than --sharding-lease-duration (15s)"},
		{[]string{"--sharding", "--sharding-max-peer-lease-duration=-1s"}, "--sharding-max-peer-lease-duration (-1s) must not be shorter"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"start", "--kubeconfig", "/nonexistent"}, tc.args...)
			if code := Execute(args, nil, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q: %s", tc.want, stderr.String())
			}
		})
	}
}
