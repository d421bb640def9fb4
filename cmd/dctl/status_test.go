package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

func TestPrintStatus(t *testing.T) {
	ops := []opv1a1.Operator{
		{ObjectMeta: metav1.ObjectMeta{Name: "b-op"}, Status: opv1a1.OperatorStatus{Controllers: []opv1a1.ControllerStatus{{
			Name:       "broken",
			Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "InvalidSpec"}},
			LastErrors: []opv1a1.ErrorRecord{{Message: `spec.controllers[0].pipeline: unknown pipeline stage "@x"`}},
		}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-op"}, Status: opv1a1.OperatorStatus{Controllers: []opv1a1.ControllerStatus{{
			Name:       "works",
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Ready"}},
			Counters:   opv1a1.Counters{Deltas: 12, Writes: 3, WriteErrors: 1},
		}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-new"}},
	}
	var b bytes.Buffer
	if err := printStatus(&b, ops, nil, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"OPERATOR", "CONTROLLER", "READY", "LAST ERROR"},
		{"a-op", "works", "True", "Ready", "12", "3", "1"},
		{"b-op", "broken", "False", "InvalidSpec", `unknown pipeline stage "@x"`},
		{"c-new", "Unknown"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Error("colour without a terminal")
	}
	b.Reset()
	_ = printStatus(&b, ops, nil, time.Time{}, true)
	if !strings.Contains(b.String(), "\x1b[32mTrue\x1b[0m") || !strings.Contains(b.String(), "\x1b[31mFalse\x1b[0m") {
		t.Errorf("no colour with colour on:\n%q", b.String())
	}
}

func TestSelectOperators(t *testing.T) {
	items := []opv1a1.Operator{}
	for _, n := range []string{"app-summary", "bad-kind-1", "fanout", "label-copy-2", "plural-clash"} {
		items = append(items, opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	names := func(ops []opv1a1.Operator) string {
		var s []string
		for _, op := range ops {
			s = append(s, op.Name)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		args []string
		want string
		err  string
	}{
		{args: nil, want: "app-summary,bad-kind-1,fanout,label-copy-2,plural-clash"},
		{args: []string{"app-summary"}, want: "app-summary"},
		{args: []string{"fanout", "bad-kind-1"}, want: "bad-kind-1,fanout"},
		{args: []string{"label-copy-2"}, want: "label-copy-2"},
		{args: []string{"fanout", "fanout"}, want: "fanout"},
		{args: []string{"nope", "fanout", "gone"}, err: "operator(s) not found: gone, nope"},
	} {
		got, err := selectOperators(items, tc.args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if names(got) != tc.want {
			t.Errorf("%v: selected %s, want %s", tc.args, names(got), tc.want)
		}
	}
}
