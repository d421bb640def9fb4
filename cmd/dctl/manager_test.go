package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

// TestRestConfigRateLimits: by default the manager's client has no
// client-side rate limit (QPS -1, as controller-runtime's GetConfig gives),
// not client-go's 5 and 10; --kube-api-qps and --kube-api-burst set one
// token bucket (rest.Config.RateLimiter, which every client built from the
// config or a copy shares), and ownBucket's copy has none, so its client
// makes its own of the same size.
func TestRestConfigRateLimits(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      []string
		qps       float32
		burst     int
		bucketQPS float32 // of the shared bucket; 0: none
	}{
		{nil, -1, 0, 0},
		{[]string{"--kube-api-qps", "0"}, 0, 0, 5},
		{[]string{"--kube-api-qps", "7.5", "--kube-api-burst", "9"}, 7.5, 9, 7.5},
	} {
		f := &managerFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd, "0", "0")
		if err := cmd.Flags().Parse(append([]string{"--kubeconfig", kc}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst || cfg.Host != "https://127.0.0.1:6443" {
			t.Errorf("%v: host %s qps %v burst %d, want %v %d", tc.args, cfg.Host, cfg.QPS, cfg.Burst, tc.qps, tc.burst)
		}
		switch {
		case tc.bucketQPS == 0 && cfg.RateLimiter != nil:
			t.Errorf("%v: a rate limiter without a limit", tc.args)
		case tc.bucketQPS != 0 && (cfg.RateLimiter == nil || cfg.RateLimiter.QPS() != tc.bucketQPS):
			t.Errorf("%v: rate limiter %v, want a token bucket of %v/s", tc.args, cfg.RateLimiter, tc.bucketQPS)
		case rest.CopyConfig(cfg).RateLimiter != cfg.RateLimiter:
			t.Errorf("%v: a copy of the config has another rate limiter", tc.args)
		}
		if own := ownBucket(cfg); own.RateLimiter != nil || own.QPS != cfg.QPS || own.Burst != cfg.Burst {
			t.Errorf("%v: ownBucket kept the shared rate limiter or changed the limits", tc.args)
		}
	}
}

// TestNegativeReleaseDelayRefused: a negative --release-startup-pages-after
// is an error naming the flag, not a silent "never".
func TestNegativeReleaseDelayRefused(t *testing.T) {
	f := &managerFlags{}
	cmd := &cobra.Command{Use: "x"}
	f.register(cmd, "0", "0")
	if err := cmd.Flags().Parse([]string{"--release-startup-pages-after", "-5s"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.newManager(logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "--release-startup-pages-after -5s") {
		t.Fatalf("newManager with a negative release delay: %v, want an error naming the flag", err)
	}
}

// TestContentTypeRefused: --kube-api-content-type takes protobuf or JSON;
// anything else is an error naming the flag.
func TestContentTypeRefused(t *testing.T) {
	for _, v := range []string{"application/yaml", "json", ""} {
		f := &managerFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd, "0", "0")
		if err := cmd.Flags().Parse([]string{"--kube-api-content-type", v}); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.newManager(logr.Discard())
		if err == nil || !strings.Contains(err.Error(), "--kube-api-content-type") {
			t.Errorf("newManager with --kube-api-content-type %q: %v, want an error naming the flag", v, err)
		}
	}
}

// TestLogTimesInMilliseconds: the manager's log lines, console and JSON,
// carry their time in RFC 3339 with milliseconds.
func TestLogTimesInMilliseconds(t *testing.T) {
	stamp := regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|[+-]\d{2}:\d{2})`)
	for _, asJSON := range []bool{false, true} {
		var buf bytes.Buffer
		(&managerFlags{logJSON: asJSON}).logger(&buf).Info("hello")
		line := buf.String()
		m := stamp.FindString(line)
		if m == "" || !strings.Contains(line, "hello") {
			t.Fatalf("JSON %v: log line %q has no RFC 3339 time with milliseconds", asJSON, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, m); err != nil {
			t.Fatalf("JSON %v: time %q: %v", asJSON, m, err)
		}
	}
}

// TestClientLimitsNormalised: every negative --kube-api-qps means no limit
// and is kept as -1 (a tiny one that float32 rounds to -0 included), -0 is
// 0; so two spellings with the same meaning do not conflict.
func TestClientLimitsNormalised(t *testing.T) {
	for _, tc := range []struct {
		args []string
		qps  float32
	}{
		{[]string{"--kube-api-qps", "-1e-50"}, -1},
		{[]string{"--kube-api-qps", "-7.5"}, -1},
		{[]string{"--kube-api-qps", "-0"}, 0},
		{[]string{"--kube-api-qps", "-1", "--client-go-qps", "-2"}, -1},
		{[]string{"--kube-api-qps", "0", "--client-go-qps", "-0"}, 0},
		{[]string{"--kube-api-qps", "2.5", "--client-go-qps", "2.50"}, 2.5},
	} {
		f := &managerFlags{}
		m := &metacontrollerFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd, "0", "0")
		m.register(cmd, f)
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatalf("parsing %q: %v", tc.args, err)
		}
		if err := m.validate(cmd.Flags()); err != nil {
			t.Errorf("validating %q: %v", tc.args, err)
		}
		if f.qps != tc.qps || math.Signbit(float64(f.qps)) != math.Signbit(float64(tc.qps)) {
			t.Errorf("parsing %q: qps %v, want %v", tc.args, f.qps, tc.qps)
		}
	}
}

// TestClientLimitsRefused: a --kube-api-qps of NaN (which compares false
// with every bound and would pass for "no limit") or infinity and a
// negative --kube-api-burst are errors when the flags are parsed, naming
// the spelling given; the values kept are the defaults.
func TestClientLimitsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--kube-api-qps", "NaN"}, "--kube-api-qps"},
		{[]string{"--client-go-qps", "nan"}, "--client-go-qps"},
		{[]string{"--kube-api-qps=+Inf"}, "--kube-api-qps"},
		{[]string{"--client-go-qps", "-inf"}, "--client-go-qps"},
		{[]string{"--kube-api-burst", "-7"}, "--kube-api-burst"},
		{[]string{"--kube-api-qps", "5", "--kube-api-burst", "-1"}, "--kube-api-burst"},
		{[]string{"--client-go-burst", "-3"}, "--client-go-burst"},
		{[]string{"--kube-api-burst", "1e3"}, "--kube-api-burst"},
		{[]string{"--kube-api-burst", "0x10"}, "--kube-api-burst"},
		{[]string{"--kube-api-qps", "1e40"}, "--kube-api-qps"},
		{[]string{"--client-go-qps", "1e-50"}, "--client-go-qps"}, // rounds to 0: the default of 5
	} {
		f := &managerFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd, "0", "0")
		(&metacontrollerFlags{}).register(cmd, f)
		err := cmd.Flags().Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), `"`+tc.flag+`"`) {
			t.Errorf("parsing %q: %v, want an error naming %s", tc.args, err, tc.flag)
		}
		wantQPS := float32(defaultKubeAPIQPS)
		if tc.args[0] == "--kube-api-qps" && tc.args[1] == "5" {
			wantQPS = 5 // a valid flag before the refused one
		}
		if f.qps != wantQPS || f.burst != defaultKubeAPIBurst {
			t.Errorf("parsing %q: qps %v burst %d, want %v and the default burst %d", tc.args, f.qps, f.burst, wantQPS, defaultKubeAPIBurst)
		}
	}
}

// TestRestConfigCompression: the manager asks for uncompressed responses
// (rest.Config.DisableCompression, which keeps client-go's transport from
// sending Accept-Encoding: gzip) unless --kube-api-compression is given,
// and a kubeconfig's disable-compression turns it off whatever the flag.
func TestRestConfigCompression(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "kubeconfig")
	disabled := filepath.Join(dir, "kubeconfig-disabled")
	if err := os.WriteFile(plain, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	off := strings.Replace(testKubeconfig, `server: "https://127.0.0.1:6443"`, `server: "https://127.0.0.1:6443", disable-compression: true`, 1)
	if off == testKubeconfig {
		t.Fatal("the test kubeconfig has no server line to extend")
	}
	if err := os.WriteFile(disabled, []byte(off), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kubeconfig string
		args       []string
		disabled   bool
	}{
		{plain, nil, true},
		{plain, []string{"--kube-api-compression"}, false},
		{plain, []string{"--kube-api-compression=false"}, true},
		{disabled, []string{"--kube-api-compression"}, true},
		{disabled, nil, true},
	} {
		f := &managerFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd, "0", "0")
		if err := cmd.Flags().Parse(append([]string{"--kubeconfig", tc.kubeconfig}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.DisableCompression != tc.disabled {
			t.Errorf("%s %v: DisableCompression %v, want %v", filepath.Base(tc.kubeconfig), tc.args, cfg.DisableCompression, tc.disabled)
		}
	}
}

// TestBurstWithoutRateLimitRefused: --kube-api-burst given while the QPS is
// negative (no client-side rate limit, the default) would be ignored, and
// is an error naming both flags when the flags are validated; with a QPS
// of 0 or more it is accepted. Metacontroller's --client-go-burst is
// accepted with a negative QPS, as Metacontroller accepts it, and
// burstIgnored gives the message dctl start logs for it.
func TestBurstWithoutRateLimitRefused(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		refuse string // validate's error; "": none
		warn   string // burstIgnored's message for --client-go-burst; "": none
	}{
		{args: []string{"--kube-api-burst", "5"}, refuse: "--kube-api-burst 5 has no effect without a client-side rate limit: " +
			"set --kube-api-qps to 0 or more (negative, the default, means no limit), or drop --kube-api-burst"},
		{args: []string{"--kube-api-qps=-1", "--kube-api-burst=0"}, refuse: "--kube-api-burst 0 has no effect without a client-side rate limit: set --kube-api-qps to 0"},
		{args: []string{"--kube-api-qps=-7.5", "--kube-api-burst=20"}, refuse: "--kube-api-burst 20 has no effect"},
		{args: []string{"--client-go-qps=-1", "--kube-api-burst=3"}, refuse: "--kube-api-burst 3 has no effect without a client-side rate limit: set --client-go-qps to 0"},
		{args: []string{"--kube-api-burst=3", "--client-go-burst=3"}, refuse: "--kube-api-burst 3 has no effect"},
		{args: nil},
		{args: []string{"--kube-api-qps=-1"}},
		{args: []string{"--kube-api-qps=0", "--kube-api-burst=5"}},
		{args: []string{"--kube-api-qps=7.5", "--kube-api-burst=9"}},
		{args: []string{"--client-go-qps=1", "--kube-api-burst=5"}},
		{args: []string{"--client-go-qps=5", "--client-go-burst=10"}},
		// Metacontroller's spellings, as a Metacontroller Deployment gives them.
		{args: []string{"--client-go-qps=-1", "--client-go-burst=0"}, warn: "--client-go-burst 0 has no effect without a client-side rate limit: set --client-go-qps to 0 or more"},
		{args: []string{"--client-go-burst=20"}, warn: "--client-go-burst 20 has no effect without a client-side rate limit: set --client-go-qps to 0 or more"},
		{args: []string{"--kube-api-qps=-1", "--client-go-burst=20"}, warn: "--client-go-burst 20 has no effect without a client-side rate limit: set --kube-api-qps to 0 or more"},
	} {
		f, mf := &managerFlags{}, &metacontrollerFlags{}
		cmd := &cobra.Command{Use: "start"}
		f.register(cmd, "0", "0")
		mf.register(cmd, f)
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatalf("parsing %q: %v", tc.args, err)
		}
		if err := mf.validate(cmd.Flags()); err != nil {
			t.Fatalf("validating Metacontroller's flags %q: %v", tc.args, err)
		}
		err := f.validate(cmd.Flags())
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.args, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.refuse)
		}
		flag, msg := f.burstIgnored(cmd.Flags())
		if tc.warn != "" && (flag != "--client-go-burst" || !strings.Contains(msg, tc.warn)) {
			t.Errorf("%q: burstIgnored %s %q, want --client-go-burst and %q", tc.args, flag, msg, tc.warn)
		}
		if tc.refuse == "" && tc.warn == "" && flag != "" {
			t.Errorf("%q: burstIgnored %s %q, want nothing", tc.args, flag, msg)
		}
	}
}

// TestBurstWithoutRateLimitCommands: dctl start and dctl run exit 1 with
// the error for --kube-api-burst without a client-side rate limit, before
// they load a kubeconfig or read an operator file; dctl start runs on with
// Metacontroller's --client-go-qps=-1 --client-go-burst=0 (here up to the
// missing kubeconfig) and logs that the burst has no effect.
func TestBurstWithoutRateLimitCommands(t *testing.T) {
	const want = "--kube-api-burst 5 has no effect without a client-side rate limit: set --kube-api-qps to 0 or more"
	for _, args := range [][]string{
		{"start", "--kubeconfig", "/nonexistent", "--kube-api-burst", "5"},
		{"run", "--kubeconfig", "/nonexistent", "--kube-api-burst=5", "-f", "/nonexistent.yaml"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Execute(args, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("dctl %q: exit %d, stderr %q; want 1 and %q", args, code, stderr.String(), want)
		}
		if s := stderr.String(); strings.Contains(s, "kubeconfig") || strings.Contains(s, "nonexistent.yaml") {
			t.Errorf("dctl %q went on past the flags: %s", args, s)
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"start", "--kubeconfig", "/nonexistent", "--release-startup-pages-after=0", "--client-go-qps=-1", "--client-go-burst=0"}
	code := Execute(args, nil, &stdout, &stderr)
	if s := stderr.String(); code != 1 || !strings.Contains(s, "loading kubeconfig") ||
		!strings.Contains(s, "WARNING: --client-go-burst 0 has no effect without a client-side rate limit: set --client-go-qps to 0 or more") {
		t.Errorf("dctl %q: exit %d, stderr %q; want 1, the warning and the kubeconfig's error", args, code, s)
	}
}
