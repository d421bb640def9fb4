package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestArgsForMetacontrollerName(t *testing.T) {
	got := argsFor("/usr/bin/metacontroller", []string{"--zap-log-level=4", "--discovery-interval=20s"})
	want := []string{"start", "--zap-log-level=4", "--discovery-interval=20s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("as metacontroller: %v, want %v", got, want)
	}
	if got := argsFor("/usr/local/bin/dctl", []string{"version"}); !reflect.DeepEqual(got, []string{"version"}) {
		t.Errorf("as dctl: %v", got)
	}
}

func TestGoStyleFlags(t *testing.T) {
	start := newStartCommand()
	got := goStyleFlags(start, []string{"-workers=3", "-zap-devel", "-v=4", "--metrics-address=:9999", "-nosuchflag", "--", "-workers=9"})
	want := []string{"--workers=3", "--zap-devel", "-v=4", "--metrics-address=:9999", "-nosuchflag", "--", "-workers=9"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// TestStartParsesGoStyleFlags: Metacontroller's own Go-flag spelling with
// one dash reaches dctl start's flag checks (here refused as a bad value,
// before anything connects to a cluster).
func TestStartParsesGoStyleFlags(t *testing.T) {
	var out, errb bytes.Buffer
	code := Execute([]string{"start", "-workers=0"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "--workers: want a positive number") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	code = Execute([]string{"start", "-discovery-interval=bad"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), `"--discovery-interval"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
