package main

import (
	"bytes"
	"strings"
	"testing"

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
	if err := printStatus(&b, ops, false); err != nil {
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
	_ = printStatus(&b, ops, true)
	if !strings.Contains(b.String(), "\x1b[32mTrue\x1b[0m") || !strings.Contains(b.String(), "\x1b[31mFalse\x1b[0m") {
		t.Errorf("no colour with colour on:\n%q", b.String())
	}
}
